// Local host adapter: the invite token comes from the URL (/annotate/<token>); assignments come from, and
// ratings go to, empeval's JSON API. A submission id is kept per assignment in sessionStorage, so a retry
// after a network failure is recognised by the server as the same submission.
import { useCallback, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import TaskApp from "./TaskApp.jsx";

const token = decodeURIComponent(window.location.pathname.split("/annotate/")[1] || "");
const headers = { Authorization: `Bearer ${token}` };

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: { ...headers, ...(options.headers || {}) } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.message || `HTTP ${response.status}`);
  return body;
}

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
    api("/api/annotate/next")
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
