// Where the page scrolls and what holds the keyboard focus as the rater moves through an assignment. A new item
// (Next, Back, Start, a reload) is shown from its start: the whole page from the top if the reply to rate fits on
// screen that way, else the item at the top of the screen, else (a conversation longer than the screen) scrolled
// just far enough that the reply to rate ends at the bottom. The focus goes to the item's heading, so a screen
// reader reads on from the conversation. Moving to another question of the same item focuses that question's
// answer (checked, or the first), which also scrolls it into view. A new phase (review, the end) starts at the top.
import { useEffect, useRef } from "react";

/** The scroll position at which the item starting at `itemTop` (page coordinates) shows its reply, which ends at
 * `replyBottom`, in a window `height` pixels tall. */
export function scrollTarget(itemTop, replyBottom, height) {
  if (replyBottom <= height) return 0;
  if (replyBottom - itemTop <= height) return itemTop;
  return replyBottom - height;
}

function showItemStart() {
  const item = document.getElementById("item");
  const reply = item && item.querySelector("[data-reply]");
  if (!item || !reply) return;
  const top = window.scrollY + item.getBoundingClientRect().top;
  const bottom = window.scrollY + reply.getBoundingClientRect().bottom;
  window.scrollTo(0, scrollTarget(top, bottom, window.innerHeight));
}

export function useItemView(phase, index, focus) {
  const shown = useRef({ phase: null, index: null });
  useEffect(() => {
    const before = shown.current;
    shown.current = { phase, index };
    if (phase !== "rating") {
      if (before.phase !== phase) window.scrollTo(0, 0);
      return;
    }
    if (before.phase !== "rating" || before.index !== index) {
      showItemStart();
      const heading = document.getElementById("item-heading");
      if (heading) heading.focus({ preventScroll: true });
      return;
    }
    const question = document.querySelector("#item fieldset[data-focused='true']");
    const answer = question && (question.querySelector("input:checked") || question.querySelector("input"));
    if (answer && document.activeElement !== answer) answer.focus();
  }, [phase, index, focus]);
}
