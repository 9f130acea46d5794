// /admin#<admin token>: the part after '#' never reaches the server, so the token lands in no access log.
// Trade it for the admin session cookie (HttpOnly, SameSite=Strict), take it out of the address bar and the
// history, then show the dashboard. Runs on load and when only the '#' part of the address changes.
(function () {
  "use strict";
  function signIn() {
    var token = window.location.hash.slice(1);
    try {
      token = decodeURIComponent(token);
    } catch (error) {
      // a stray '%': sent as it is, and refused with a message
    }
    if (!token) return;
    window.history.replaceState(null, "", window.location.pathname);
    if (document.body.getAttribute("data-signed-in") === "yes") return;
    var message = document.getElementById("sign-in-error");
    fetch("/admin/session", {
      method: "POST",
      credentials: "same-origin",
      headers: { Authorization: "Bearer " + token, "X-Requested-With": "empeval" },
    }).then(function (response) {
      if (response.ok) {
        window.location.replace("/admin");
        return null;
      }
      return response.json().then(function (body) {
        message.textContent = body.message || "sign-in failed (HTTP " + response.status + ")";
      });
    }).catch(function (error) {
      message.textContent = "sign-in failed: " + error.message;
    });
  }
  window.addEventListener("hashchange", signIn);
  signIn();

  // A table wider than its box scrolls sideways in it (admin.css: on a phone, say). While it does, it takes the
  // keyboard focus in the tab order, so that it can be scrolled without a mouse; once it fits, it leaves it.
  function scrollableTables() {
    var tables = document.querySelectorAll("table");
    for (var i = 0; i < tables.length; i++) {
      if (tables[i].scrollWidth > tables[i].clientWidth + 1) tables[i].setAttribute("tabindex", "0");
      else tables[i].removeAttribute("tabindex");
    }
  }
  window.addEventListener("resize", scrollableTables);
  scrollableTables();
})();
