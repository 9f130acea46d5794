// Local host adapter. An invite link is /annotate#<token> (older links: /annotate/<token>). The page trades the
// token once for an HttpOnly, SameSite=Strict cookie (POST /api/annotate/session, the token in the
// Authorization header) and takes it out of the address bar, so it lands in no access log, history entry or
// shared screenshot; from then on the cookie authenticates every call, and every call carries the
// X-Requested-With header the server asks of cookie-authenticated requests (CSRF protection).
// Assignments come from, and ratings go to, empeval's JSON API. A submission id is kept per assignment in
// sessionStorage, so a retry after a network failure is recognised by the server as the same submission.
import { useCallback, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import TaskApp from "./TaskApp.jsx";

const CSRF = { "X-Requested-With": "empeval" };

function decoded(text) {
  try {
    return decodeURIComponent(text);
  } catch (error) {
    return text; // a stray '%': the server will say the token is not valid
  }
}

function tokenInAddress() {
  const { hash, pathname } = window.location;
  if (hash.length > 1) return decoded(hash.slice(1));
  return decoded(pathname.split("/annotate/")[1] || "");
}

async function startSession() {
  const token = tokenInAddress();
  if (!token) return; // a reload after the exchange: the cookie is set
  const response = await fetch("/api/annotate/session", {
    method: "POST",
    credentials: "same-origin",
    headers: { ...CSRF, Authorization: `Bearer ${token}` },
  });
  // Answered, well or not: the token leaves the address bar (after a network failure it stays, for a reload).
  window.history.replaceState(null, "", "/annotate");
  if (!response.ok) {
    const body = await response.json().catch(() => ({}));
    throw new Error(body.message || `HTTP ${response.status}`);
  }
}

async function api(path, options = {}) {
  const response = await fetch(path, {
    ...options, credentials: "same-origin", headers: { ...CSRF, ...(options.headers || {}) },
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `HTTP ${response.status}`);
  return body;
}

const session = startSession();

function submissionIdFor(assignmentId) {
  const key = `empeval-submission-${assignmentId}`;
  let id = window.sessionStorage.getItem(key);
  if (!id) {
    id = window.crypto && window.crypto.randomUUID ? window.crypto.randomUUID()
      : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
    window.sessionStorage.setItem(key, id);
  }
  return id;
}

function LocalHost() {
  const [state, setState] = useState({ loading: true });
  const load = useCallback(() => {
    setState({ loading: true });
    session.then(() => api("/api/annotate/next"))
      .then((body) => setState({ assignment: body.assignment, message: body.message }))
      .catch((error) => setState({ error: error.message }));
  }, []);
  useEffect(load, [load]);

  if (state.loading) return <main><p>Loading...</p></main>;
  if (state.error) return <main><p className="error" id="load-error">{state.error}</p></main>;
  if (!state.assignment) return <main><p id="no-work">{state.message}</p></main>;
  const assignment = state.assignment;
  const onSubmit = (payload) => api(`/api/assignments/${assignment.assignment_id}/submit`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ submission_id: submissionIdFor(assignment.assignment_id), ...payload }),
  });
  return <TaskApp key={assignment.assignment_id} assignment={assignment} onSubmit={onSubmit} onDone={load} />;
}

createRoot(document.getElementById("root")).render(<LocalHost />);
