// Local host adapter. An invite link is /annotate#<token> (older links: /annotate/<token>). The page trades the
// token once for an HttpOnly, SameSite=Strict cookie (POST /api/annotate/session, the token in the
// Authorization header) and takes it out of the address bar, so it lands in no access log, history entry or
// shared screenshot; from then on the cookie authenticates every call, and every call carries the
// X-Requested-With header the server asks of cookie-authenticated requests (CSRF protection).
// Assignments come from, and ratings go to, empeval's JSON API. A submission id is kept per assignment in
// localStorage, so a retry after a network failure is recognised by the server as the same submission, and the
// draft saved under it (drafts.js) is found again after a reload or a closed tab. The rater is known to the page
// by a digest of her invite token (the cookie itself is out of the page's reach): it keys "she has read the
// consent and instructions of this study". A study with a qualification shows it first (Qualification.jsx). Nothing
// is claimed before she accepts the study's consent: the page asks what she holds (to resume) without claiming,
// shows the consent, and claims once she accepts; declining tells the server, which releases whatever she holds
// (HostContext in shared.jsx, also for the task page's own consent, opened again).
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { createRoot } from "react-dom/client";
import { hasConsented, storageKeys } from "./drafts.js";
import Qualification from "./Qualification.jsx";
import { Completion, Consent, Declined, HostContext, TaskHeader } from "./shared.jsx";
import TaskApp from "./TaskApp.jsx";

const CSRF = { "X-Requested-With": "empeval" };

function decoded(text) {
  try {
    return decodeURIComponent(text);
  } catch (error) {
    return text; // a stray '%': the server will say the token is not valid
  }
}

// The researcher's preview of a study (/admin/studies/<name>/preview, signed in to /admin): the payload comes from
// /api/studies/<name>/preview, marked `preview: true`, and the page records nothing (useTask.js).
function previewSource() {
  const match = window.location.pathname.match(/^\/admin\/studies\/([^/]+)\/preview\/?$/);
  return match ? `/api/studies/${match[1]}/preview` : null;
}

function tokenInAddress() {
  if (previewSource()) return "";
  const { hash, pathname } = window.location;
  if (hash.length > 1) return decoded(hash.slice(1));
  return decoded(pathname.split("/annotate/")[1] || "");
}

const RATER_KEY = "empeval-rater";

function stored(key) {
  try {
    return window.localStorage.getItem(key);
  } catch (error) {
    return null;
  }
}

function store(key, value) {
  try {
    if (value === null) window.localStorage.removeItem(key); else window.localStorage.setItem(key, value);
  } catch (error) {
    // storage disabled: no draft, consent shown again
  }
}

function randomId() {
  return window.crypto && window.crypto.randomUUID ? window.crypto.randomUUID()
    : `${Date.now()}-${Math.random().toString(16).slice(2)}`;
}

/** A SHA-256 digest of the invite token (the token itself never goes into storage); a random id where the page
 * has no WebCrypto (plain http to another host), which then stands for this browser's session. */
async function raterDigest(token) {
  if (!(window.crypto && window.crypto.subtle)) return randomId();
  const digest = await window.crypto.subtle.digest("SHA-256", new TextEncoder().encode(token));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("").slice(0, 32);
}

// An error from the server, with its HTTP status (0: the server could not be reached).
class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

async function call(path, options) {
  let response;
  try {
    response = await fetch(path, { ...options, credentials: "same-origin" });
  } catch (error) {
    throw new ApiError("the server could not be reached", 0);
  }
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(body.message || `HTTP ${response.status}`, response.status);
  return body;
}

async function startSession() {
  const token = tokenInAddress();
  if (!token) return; // a reload after the exchange: the cookie is set
  try {
    await call("/api/annotate/session", { method: "POST", headers: { ...CSRF, Authorization: `Bearer ${token}` } });
  } catch (error) {
    // Answered, even with a refusal: the token leaves the address bar (after a network failure it stays, for a
    // reload).
    if (error.status !== 0) window.history.replaceState(null, "", "/annotate");
    throw error;
  }
  window.history.replaceState(null, "", "/annotate");
  store(RATER_KEY, await raterDigest(token));
}

function api(path, options = {}) {
  return call(path, { ...options, headers: { ...CSRF, ...(options.headers || {}) } });
}

const session = startSession();

function submissionKey(assignmentId) {
  return `empeval-submission-${assignmentId}`;
}

function submissionIdFor(assignmentId) {
  let id = stored(submissionKey(assignmentId));
  if (!id) {
    id = randomId();
    store(submissionKey(assignmentId), id);
  }
  return id;
}

// What a rater reads when the page cannot go on: what happened and what to do about it.
function LoadError({ error, preview }) {
  let title = "Your task could not be loaded";
  let advice = "Reload the page to try again. If it keeps happening, tell the researcher who sent you the link.";
  if (preview && (error.status === 401 || error.status === 403)) {
    title = "Sign in to preview this study";
    advice = "Open /admin, sign in with the admin token, then open the preview again.";
  } else if (error.status === 401 || error.status === 403) {
    title = "This link is not valid or has expired";
    advice = "Ask the researcher who sent it for a new one.";
  } else if (error.status === 429) {
    title = "Too many attempts from this network";
    advice = "Wait a few minutes, then open your link again.";
  } else if (error.status === 0) {
    title = "The server could not be reached";
    advice = "Check your connection, then reload the page.";
  }
  return (
    <main id="load-error" data-status={error.status}>
      <h1>{title}</h1>
      <p className="error-advice">{advice}</p>
      <p className="hint">Details: {error.message}</p>
    </main>
  );
}

// Real work, or first the study's qualification (Qualification.jsx) while she has not passed it: the server hands
// out nothing before (GET /api/annotate/next answers 403), so the page asks for her qualification first. Then the
// assignment she holds, if any (GET /api/annotate/next?claim=no claims nothing); holding none, she is asked for her
// consent before one is claimed (`consent`), unless she gave it in this browser before (drafts.js).
async function work() {
  await session;
  const qualification = await api("/api/annotate/qualification");
  if (qualification.required && qualification.status !== "passed") return { qualification };
  const current = await api("/api/annotate/next?claim=no");
  if (current.assignment || current.completion) return current;
  if (!hasConsented(storageKeys({ study: current.study }, stored(RATER_KEY)))) return { consent: current.study };
  return claim();
}

// Claims her assignment (GET /api/annotate/next): only once she has accepted the consent.
async function claim() {
  const body = await api("/api/annotate/next");
  return { assignment: body.assignment, message: body.message, completion: body.completion };
}

// "She accepted the consent in this tab and her assignment is being claimed": kept for the tab's life (session
// storage), so a reload before the task page has kept anything of its own goes on to the instructions rather than
// asking again.
const ACCEPTED_KEY = "empeval-accepted";

function acceptedHere() {
  try {
    return window.sessionStorage.getItem(ACCEPTED_KEY) === "1";
  } catch (error) {
    return false;
  }
}

function rememberAccepted(value) {
  try {
    if (value) window.sessionStorage.setItem(ACCEPTED_KEY, "1"); else window.sessionStorage.removeItem(ACCEPTED_KEY);
  } catch (error) {
    // storage disabled: a reload asks again
  }
}

// The consent step's wording per study kind, as each kind's page words it (kinds/*.jsx).
const CONSENT_WORDS = {
  pairwise: { task: "compare short replies", answers: "answers" },
  best_worst: { task: "pick the best and the worst of a few short replies", answers: "answers" },
  chat: { task: "chat about an experience and rate replies", answers: "messages and ratings" },
  acute: { task: "compare short conversations", answers: "answers" },
};

function declineStudy() {
  return api("/api/annotate/decline", { method: "POST" }).then((body) => body.released || []);
}

function answerGoldItem(body) {
  return api("/api/annotate/qualification/answers", {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  });
}

const HEADING = "Rate responses in conversations";

function LocalHost() {
  const [state, setState] = useState({ loading: true });
  // Set when she has accepted the consent before her claim: the task page's own consent step then goes straight on
  // to the instructions (shared.jsx, HostContext), on its first showing only (cleared once it has been shown).
  const consented = useRef(false);
  const run = useCallback((next) => {
    setState({ loading: true });
    next().then(setState).catch((error) => setState({ error }));
  }, []);
  const load = useCallback(() => {
    const source = previewSource();
    run(source ? () => api(source).then((body) => ({ assignment: body.assignment, message: body.message }))
      : work);
  }, [run]);
  useEffect(load, [load]);
  const accept = useCallback(() => { consented.current = true; rememberAccepted(true); run(claim); }, [run]);
  const host = useMemo(() => ({ consented, decline: declineStudy }), []);
  const assignmentId = state.assignment ? state.assignment.assignment_id : null;
  // The task page's first showing has run its effects (children's run first): the one-shot is spent.
  useEffect(() => {
    if (assignmentId === null) return;
    consented.current = false;
    rememberAccepted(false);
  }, [assignmentId]);

  if (state.loading) return <main><h1>{HEADING}</h1><p>Loading...</p></main>;
  if (state.error) return <LoadError error={state.error} preview={Boolean(previewSource())} />;
  if (state.qualification) {
    return <Qualification initial={state.qualification} onAnswer={answerGoldItem} onPassed={load} />;
  }
  if (state.consent) {
    // Nothing is claimed yet: accepting claims her assignment; declining leaves nothing to release, and says so.
    const words = CONSENT_WORDS[state.consent.kind] || {};
    return (
      <main data-kind={state.consent.kind} data-phase={state.declined ? "declined" : "consent"}>
        <TaskHeader study={state.consent} fallbackTitle={HEADING} />
        {state.declined ? <Declined nothingHeld />
          : <Consent {...words} onAccept={accept} onDecline={() => setState({ ...state, declined: true })} />}
      </main>
    );
  }
  if (!state.assignment) {
    return (
      <main>
        <h1>{HEADING}</h1>
        <p id="no-work">{state.message}</p>
        {state.completion ? <Completion completion={state.completion} /> : null}
      </main>
    );
  }
  const assignment = state.assignment;
  // Resumed or just claimed after her consent in this tab: the task page's consent step goes straight on, once.
  if (acceptedHere()) consented.current = true;
  const submissionId = assignment.preview === true ? null : submissionIdFor(assignment.assignment_id);
  const onSubmit = async (payload) => {
    const receipt = await api(`/api/assignments/${assignment.assignment_id}/submit`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ submission_id: submissionId, ...payload }),
    });
    store(submissionKey(assignment.assignment_id), null);
    return receipt;
  };
  return (
    <HostContext.Provider value={host}>
      <TaskApp key={assignment.assignment_id} assignment={assignment} onSubmit={onSubmit} onDone={load}
               rater={stored(RATER_KEY)} submissionId={submissionId} />
    </HostContext.Provider>
  );
}

createRoot(document.getElementById("root")).render(<LocalHost />);
