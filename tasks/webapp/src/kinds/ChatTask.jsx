// The chat task: an assignment is a session of a few conversations, one per partner. In each, the rater plays
// someone who shares an experience (an EmpatheticDialogues prompt: an emotion and a situation) and her partner, a
// system the server serves live, replies. After each of her partner's replies she ticks what it did (the study's
// turn questions; "None of these" excludes the others, and at least one box is needed before she goes on); once
// the conversation is long enough she ends it and rates it on the study's criteria, on the Likert page's scale and
// wording. After the last conversation: the comment and Submit (the shared review step).
//
// The page talks to the server itself for the live part (POST .../conversations/<position>/turns and .../end,
// GET /api/annotate/next to resync after a conflict); the host adapter sends the submission. On a crowd platform
// (assignment.live: {url, token, worker}, set by the Mephisto adapter) the page is served at the platform's origin:
// it calls the empeval server at live.url with the unit's token and the worker's platform id instead of a cookie,
// and reads its conversations' state from GET .../live when it opens (the platform's copy of the unit predates
// every turn) and after a conflict. Nothing the rater
// receives names or hints at the system: her partner is "Partner". A reply that could not be made ({"failed":
// true}) is shown kindly and the page moves on; a network error or a server error keeps her message and offers
// Retry, which sends the same {index, text} (the server takes an identical resend as the same turn); a conflict
// shows the server's message and reloads the assignment. A reload resumes: the turns and each conversation's state
// come with the payload, the ticks, the ratings, the unsent text and the comment from the draft (drafts.js); a
// message of hers the server stored but never answered (a crash in between) is sent again by itself.
// Every text from models or people is rendered as React text, never as HTML.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { dropDraft, forgetConsent, hasConsented, rememberConsent, saveDraft, storageKeys } from "../drafts.js";
import {
  Consent, Declined, ItemHeading, PointScale, Progress, Review, scaleChoices, Submitted, TaskHeader,
} from "../shared.jsx";

const CSRF = { "X-Requested-With": "empeval" };
const NONE = "none";
const PHASES = ["consent", "instructions", "chat", "review"];
const PII_NOTICE = "Please do not type any personal information (names, addresses, contact details).";
const PREVIEW_REPLY = "(Preview: your partner's reply would appear here.)";
const DRAFT_KIND = "chat";

// An error from the server, with its HTTP status (0: the server could not be reached).
class CallError extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

// How the page reaches the server: same origin with the invite cookie (and the CSRF header), or, for a crowd unit
// (`live`), the server's address with the unit's token and no cookie.
function serverOf(live) {
  const where = live
    ? { base: String(live.url).replace(/\/+$/, ""), credentials: "omit",
        headers: { "X-Empeval-Unit": String(live.token), "X-Empeval-Worker": String(live.worker || "") } }
    : { base: "", credentials: "same-origin", headers: CSRF };
  async function call(path, options = {}) {
    let response;
    try {
      response = await fetch(where.base + path, {
        ...options, credentials: where.credentials, headers: { ...where.headers, ...(options.headers || {}) },
      });
    } catch (error) {
      throw new CallError("the server could not be reached", 0);
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) throw new CallError(body.message || `HTTP ${response.status}`, response.status);
    return body;
  }
  function post(path, body) {
    return call(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
  }
  return { call, post };
}

const unreachable = (error) => error.status === 0 || error.status >= 500;

/** A payload item's conversation as the page keeps it: its turns in order, its state and the server's message. */
function conversationOf(item) {
  const turns = (Array.isArray(item.turns) ? item.turns : [])
    .filter((t) => t && Number.isInteger(t.index) && typeof t.text === "string")
    .map((t) => ({ index: t.index, speaker: t.index % 2 === 0 ? "rater" : "system", text: t.text }))
    .sort((a, b) => a.index - b.index);
  const state = ["open", "ended", "failed"].includes(item.state) ? item.state : "open";
  return { turns, state, message: typeof item.message === "string" ? item.message : null };
}

/** `turns` with `turn` in its place (replacing one of the same index). */
function withTurn(turns, turn) {
  return [...turns.filter((t) => t.index !== turn.index), turn].sort((a, b) => a.index - b.index);
}

function readStored(key) {
  try {
    const text = key ? window.localStorage.getItem(key) : null;
    return text === null ? null : JSON.parse(text);
  } catch (error) {
    return null;
  }
}

/** The chat draft saved under `key` if it fits this assignment (as drafts.js readDraft does for the other pages:
 * a bad value counts as none, and only known criteria, scores, questions and system turns are kept). */
function readChatDraft(key, items, criteria, isScore, questionKeys) {
  const draft = readStored(key);
  if (!draft || typeof draft !== "object" || draft.kind !== DRAFT_KIND || !PHASES.includes(draft.phase)) return null;
  const n = items.length;
  const fits = (value) => Array.isArray(value) && value.length === n;
  const ratings = fits(draft.ratings) ? draft.ratings.map((r) => {
    const clean = {};
    if (r && typeof r === "object") for (const c of criteria) if (isScore(r[c.key])) clean[c.key] = r[c.key];
    return clean;
  }) : items.map(() => ({}));
  const ticks = fits(draft.ticks) ? draft.ticks.map((t) => {
    const clean = {};
    if (t && typeof t === "object") {
      for (const [idx, keys] of Object.entries(t)) {
        const number = Number(idx);
        if (!Number.isInteger(number) || number < 1 || number % 2 !== 1 || !Array.isArray(keys)) continue;
        const kept = questionKeys.filter((k) => keys.includes(k));
        if (kept.length) clean[number] = kept.includes(NONE) ? [NONE] : kept;
      }
    }
    return clean;
  }) : items.map(() => ({}));
  return {
    phase: draft.phase,
    resume: PHASES.includes(draft.resume) ? draft.resume : null,
    ratings,
    ticks,
    done: fits(draft.done) ? draft.done.map((d) => d === true) : items.map(() => false),
    texts: fits(draft.texts) ? draft.texts.map((t) => (typeof t === "string" ? t : "")) : items.map(() => ""),
    seconds: fits(draft.seconds) && draft.seconds.every((s) => typeof s === "number" && Number.isFinite(s) && s >= 0)
      ? draft.seconds : items.map(() => 0),
    comment: typeof draft.comment === "string" ? draft.comment.slice(0, 2000) : "",
  };
}

function promptText(prompt) {
  const emotion = prompt && typeof prompt.emotion === "string" && prompt.emotion ? prompt.emotion : null;
  return emotion ? `You are talking about a time you felt ${emotion}:` : "You are talking about this situation:";
}

function Instructions({ n, chat, criteria, scale, onStart }) {
  return (
    <div className="card" id="instructions">
      <h2>Instructions</h2>
      <p>You will have {n === 1 ? "one short conversation" : `${n} short conversations`} by text chat
        {n === 1 ? "" : ", each with a different partner"}. In each, you play someone telling a partner about something
        that happened to them: the page gives you a feeling and a situation. Talk about it as if it had happened to
        you, in your own words.</p>
      <ul>
        <li>After each reply of your partner, tick what applies to that reply: at least one box, or
          {" "}<em>None of these</em>.</li>
        <li>A conversation has at least {chat.min_utterances} and at most {chat.max_utterances} messages, yours and
          your partner's together. Once it has {chat.min_utterances}, you may end it with <em>End
          conversation</em>.</li>
        <li>Then rate the whole conversation on {criteria.length} questions, from {scale.min} to {scale.max}:</li>
      </ul>
      <dl>
        {criteria.map((c) => (
          <div key={c.key}><dt>{c.label}</dt><dd>{c.question}{c.definition ? ` ${c.definition}` : ""}</dd></div>
        ))}
      </dl>
      <p>If your partner cannot answer, the page tells you and you go on with the next conversation: you will not
        be penalised.</p>
      <p className="hint">{PII_NOTICE}</p>
      <p className="hint">Keyboard: Enter sends your message, Shift+Enter starts a new line.</p>
      <div className="nav"><span /><button id="start" onClick={onStart} autoFocus>Start</button></div>
    </div>
  );
}

// The Likert page's question, as it renders it (LikertTask.jsx does not export it): the scale is shared.jsx's.
function Question({ criterion, scale, value, onChoose, index }) {
  return (
    <fieldset className="question" data-criterion={criterion.key}>
      <legend>{index + 1}. {criterion.label}: <span className="question-text" id={`question-${index}`}>{criterion.question}</span></legend>
      <PointScale name={criterion.key} choices={scaleChoices(scale)} value={value} onChoose={onChoose}
                  label={criterion.label} describedBy={`question-${index}`} />
    </fieldset>
  );
}

function Ticks({ index, number, questions, checked, onToggle, disabled }) {
  const missing = checked.length === 0;
  return (
    <fieldset className={`ticks${missing ? " missing" : ""}`} data-index={index}>
      <legend>About reply {number}: what did your partner do? <span className="hint">(tick at least one)</span></legend>
      <div className="tick-options">
        {questions.map((q) => (
          <label key={q.key} className={checked.includes(q.key) ? "chosen" : ""}>
            <input type="checkbox" name={`turn-${index}`} value={q.key} checked={checked.includes(q.key)}
                   disabled={disabled} onChange={(e) => onToggle(q.key, e.target.checked)} />
            {q.label}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

function Messages({ turns, questions, ticks, onToggle, editable, label = "Conversation" }) {
  let replies = 0;
  return (
    <div className="card chat-log" role="log" aria-label={label} id="chat-log">
      {turns.length === 0 && <p className="hint">No messages yet.</p>}
      {turns.map((t) => {
        const mine = t.speaker === "rater";
        if (!mine) replies += 1;
        return (
          <div key={t.index} className={`chat-turn ${mine ? "mine" : "partner"}`} data-speaker={t.speaker}
               data-index={t.index}>
            <div className={`turn chat-msg ${mine ? "mine" : "partner"}`}>
              <span className="who">{mine ? "You" : "Partner"}<span className="sr-only">:</span></span>
              {t.text}
            </div>
            {!mine && (
              <Ticks index={t.index} number={replies} questions={questions} checked={ticks[t.index] || []}
                     disabled={!editable} onToggle={(key, on) => onToggle(t.index, key, on)} />
            )}
          </div>
        );
      })}
    </div>
  );
}

export default function ChatTask({ assignment, onSubmit, onDone, rater = null, submissionId = null }) {
  const { items, criteria, scale, study, chat } = assignment;
  const preview = assignment.preview === true;
  const live = assignment.live || null;
  const { call, post } = useMemo(() => serverOf(live), [live]);
  const statePath = live ? `/api/assignments/${assignment.assignment_id}/live` : "/api/annotate/next";
  const questions = chat.turn_questions;
  const questionKeys = useMemo(() => questions.map((q) => q.key), [questions]);
  const isScore = useCallback((v) => Number.isInteger(v) && v >= scale.min && v <= scale.max, [scale]);
  const keys = useMemo(() => storageKeys(assignment, rater, submissionId), [assignment, rater, submissionId]);
  const [restored] = useState(() => readChatDraft(keys.draft, items, criteria, isScore, questionKeys));

  const [phase, setPhase] = useState(() => (restored ? restored.phase : hasConsented(keys) ? "chat" : "consent"));
  const [resume, setResume] = useState(restored ? restored.resume : null);
  const [convs, setConvs] = useState(() => items.map(conversationOf));
  const [ticks, setTicks] = useState(() => (restored ? restored.ticks : items.map(() => ({}))));
  const [ratings, setRatings] = useState(() => (restored ? restored.ratings : items.map(() => ({}))));
  const [done, setDone] = useState(() => (restored ? restored.done : items.map(() => false)));
  const [texts, setTexts] = useState(() => (restored ? restored.texts : items.map(() => "")));
  const [comment, setComment] = useState(restored ? restored.comment : "");
  const [awaiting, setAwaiting] = useState(null); // {i, index, text, state: "sending" | "unreachable"}
  const [ending, setEnding] = useState(null); // null | "sending" | "unreachable"
  const [notice, setNotice] = useState(null); // the server's refusal, shown until the next move
  const [gone, setGone] = useState(null); // the assignment is no longer this page's: why
  const [status, setStatus] = useState({ state: "idle" });
  const seconds = useRef(restored ? [...restored.seconds] : items.map(() => 0));
  const shownAt = useRef(null);
  const inFlight = useRef(false);
  const autoSent = useRef(new Set());

  const current = done.findIndex((d) => !d);
  const conv = current >= 0 ? convs[current] : null;
  const view = phase === "chat" && conv ? (conv.state === "ended" ? "rate" : "chat") : phase;

  // Time on each conversation: accumulated while it is on screen (talking and rating).
  useEffect(() => {
    if (phase !== "chat" || current < 0) return undefined;
    shownAt.current = performance.now();
    const at = current;
    return () => {
      seconds.current[at] += (performance.now() - shownAt.current) / 1000;
      shownAt.current = null;
    };
  }, [phase, current]);

  const times = useCallback(() => {
    const running = phase === "chat" && shownAt.current !== null ? (performance.now() - shownAt.current) / 1000 : 0;
    return seconds.current.map((s, i) => Math.round((i === current ? s + running : s) * 10) / 10);
  }, [phase, current]);

  const draft = useCallback(() => ({
    kind: DRAFT_KIND, phase, resume, ticks, ratings, done, texts, comment, seconds: times(),
  }), [phase, resume, ticks, ratings, done, texts, comment, times]);

  // The draft follows every change, and once more as the page goes away; nothing before the consent, nor once the
  // work is sent or declined (as on the other pages, useTask.js).
  useEffect(() => {
    if (phase === "consent" || phase === "submitted" || phase === "declined") return undefined;
    saveDraft(keys, draft());
    const onHide = () => saveDraft(keys, draft());
    window.addEventListener("pagehide", onHide);
    return () => window.removeEventListener("pagehide", onHide);
  }, [keys, phase, draft]);

  // Every conversation finished: the review step.
  useEffect(() => {
    if (phase === "chat" && current < 0) setPhase("review");
  }, [phase, current]);

  // A new conversation, its rating form or a new phase is shown from its start, its heading focused.
  useEffect(() => {
    if (view === "chat" || view === "rate") {
      const heading = document.getElementById("item-heading");
      if (heading) heading.focus({ preventScroll: true });
      const last = view === "chat" ? document.querySelector("#chat-log .chat-turn:last-child") : null;
      if (last) last.scrollIntoView({ block: "nearest" }); else window.scrollTo(0, 0);
    } else {
      window.scrollTo(0, 0);
    }
  }, [view, current]);

  const setConv = useCallback((i, change) => {
    setConvs((old) => old.map((c, j) => (j === i ? change(c) : c)));
  }, []);

  const resync = useCallback(async () => {
    if (preview) return;
    let body;
    try {
      body = await call(statePath);
    } catch (error) {
      setNotice(`Could not reload your conversations: ${error.message}. Reload the page to try again.`);
      return;
    }
    const fresh = body.assignment;
    if (!fresh || fresh.assignment_id !== assignment.assignment_id || !Array.isArray(fresh.items)) {
      setGone(body.message || "This session is no longer open.");
      return;
    }
    const byId = new Map(fresh.items.map((item) => [item.item_id, item]));
    setConvs((old) => items.map((item, i) => (byId.has(item.item_id) ? conversationOf(byId.get(item.item_id)) : old[i])));
  }, [preview, assignment.assignment_id, items, call, statePath]);

  // A crowd unit's page opens with the platform's copy of the unit, written before any turn: the conversations
  // as the server holds them are read once (a reload resumes where she was).
  const loaded = useRef(false);
  useEffect(() => {
    if (!live || preview || loaded.current) return;
    loaded.current = true;
    resync();
  }, [live, preview, resync]);

  const sendTurn = useCallback(async (i, index, text) => {
    if (inFlight.current) return;
    inFlight.current = true;
    setAwaiting({ i, index, text, state: "sending" });
    setNotice(null);
    try {
      const reply = preview
        ? await new Promise((resolve) => { window.setTimeout(() => resolve({ index: index + 1, text: PREVIEW_REPLY }), 400); })
        : await post(`/api/assignments/${assignment.assignment_id}/conversations/${items[i].position}/turns`,
          { index, text });
      if (reply.failed) {
        setConv(i, (c) => ({ ...c, state: "failed", message: reply.message || null }));
      } else {
        setConv(i, (c) => ({ ...c, turns: withTurn(c.turns, { index: reply.index, speaker: "system", text: reply.text }) }));
      }
      setAwaiting(null);
    } catch (error) {
      if (unreachable(error)) {
        setAwaiting({ i, index, text, state: "unreachable" });
      } else {
        setAwaiting(null);
        setNotice(error.message);
        // Her text was refused: it goes back into the box (unless she is typing another), and on a conflict the
        // page takes the conversation as the server holds it.
        setTexts((old) => old.map((t, j) => (j === i && !t ? text : t)));
        if (error.status === 400) {
          setConv(i, (c) => ({ ...c, turns: c.turns.filter((t) => t.index !== index) }));
        } else {
          await resync();
        }
      }
    } finally {
      inFlight.current = false;
    }
  }, [preview, assignment.assignment_id, items, setConv, resync, post]);

  // A message of hers the server holds without a reply (the page went away while it waited): sent again, once.
  useEffect(() => {
    if (phase !== "chat" || !conv || conv.state !== "open" || awaiting || inFlight.current) return;
    const last = conv.turns[conv.turns.length - 1];
    const key = last ? `${current}:${last.index}` : null;
    if (last && last.speaker === "rater" && !autoSent.current.has(key)) {
      autoSent.current.add(key);
      sendTurn(current, last.index, last.text);
    }
  }, [phase, conv, current, awaiting, sendTurn]);

  const toggleTick = useCallback((i, index, key, on) => {
    setTicks((old) => old.map((t, j) => {
      if (j !== i) return t;
      const before = t[index] || [];
      let after;
      if (!on) after = before.filter((k) => k !== key);
      else if (key === NONE) after = [NONE];
      else after = [...before.filter((k) => k !== NONE), key];
      return { ...t, [index]: questionKeys.filter((k) => after.includes(k)) };
    }));
  }, [questionKeys]);

  const unticked = useCallback((i) => convs[i].turns.filter(
    (t) => t.speaker === "system" && !(ticks[i][t.index] && ticks[i][t.index].length)), [convs, ticks]);
  const rated = useCallback((i) => criteria.every((c) => ratings[i][c.key] !== undefined), [criteria, ratings]);
  const finished = useCallback((i) => convs[i].state === "failed"
    || (convs[i].state === "ended" && rated(i) && unticked(i).length === 0), [convs, rated, unticked]);
  const answered = useMemo(() => items.filter((_, i) => done[i] && finished(i)).length, [items, done, finished]);
  const allDone = items.every((_, i) => finished(i));

  const acceptConsent = useCallback(() => setPhase("instructions"), []);
  const declineConsent = useCallback(() => { dropDraft(keys); forgetConsent(keys); setPhase("declined"); }, [keys]);
  const start = useCallback(() => { rememberConsent(keys); setPhase(resume || "chat"); setResume(null); }, [keys, resume]);
  const reopen = useCallback(() => { setResume(phase); setPhase("consent"); }, [phase]);
  const backFromReview = useCallback(() => {
    setDone((old) => old.map((d, i) => (i === old.length - 1 ? false : d)));
    setPhase("chat");
  }, []);
  const goOn = useCallback(() => {
    setNotice(null);
    setDone((old) => old.map((d, i) => (i === current ? true : d)));
  }, [current]);

  const submit = useCallback(async () => {
    if (!allDone || status.state === "sending") return;
    if (preview) { setStatus({ state: "preview" }); return; }
    setStatus({ state: "sending" });
    const secs = times();
    const conversations = items.map((item, i) => {
      const turns = {};
      for (const t of convs[i].turns) {
        if (t.speaker === "system" && ticks[i][t.index] && ticks[i][t.index].length) {
          turns[String(t.index)] = ticks[i][t.index];
        }
      }
      return { item_id: item.item_id, ratings: convs[i].state === "failed" ? {} : ratings[i], turns, seconds: secs[i] };
    });
    try {
      const receipt = await onSubmit({ conversations, comment: comment.trim() || undefined });
      dropDraft(keys);
      setStatus({ state: "sent", receipt });
      setPhase("submitted");
    } catch (error) {
      setStatus({ state: "failed", message: String(error.message || error) });
    }
  }, [allDone, status.state, preview, times, items, convs, ticks, ratings, onSubmit, comment, keys]);

  // The conversation on screen: what she may do now.
  const turns = conv ? conv.turns : [];
  const last = turns[turns.length - 1];
  const waiting = Boolean(awaiting && awaiting.i === current);
  const missing = conv ? unticked(current) : [];
  const full = turns.length + 2 > chat.max_utterances;
  const open = Boolean(conv && conv.state === "open");
  const theirTurn = !last || last.speaker === "system";
  const canSend = open && !waiting && theirTurn && !full && missing.length === 0;
  const canEnd = open && !waiting && !ending && last && last.speaker === "system"
    && turns.length >= chat.min_utterances && missing.length === 0;
  const text = current >= 0 ? texts[current] : "";

  const send = useCallback(() => {
    const message = text.trim();
    if (!canSend || !message) return;
    const index = turns.length;
    setConv(current, (c) => ({ ...c, turns: withTurn(c.turns, { index, speaker: "rater", text: message }) }));
    setTexts((old) => old.map((t, j) => (j === current ? "" : t)));
    autoSent.current.add(`${current}:${index}`);
    sendTurn(current, index, message);
  }, [text, canSend, turns.length, current, setConv, sendTurn]);

  const end = useCallback(async () => {
    if (current < 0) return;
    const i = current;
    setEnding("sending");
    setNotice(null);
    try {
      if (!preview) await post(`/api/assignments/${assignment.assignment_id}/conversations/${items[i].position}/end`, {});
      setConv(i, (c) => ({ ...c, state: "ended" }));
      setEnding(null);
    } catch (error) {
      if (unreachable(error)) {
        setEnding("unreachable");
      } else {
        setEnding(null);
        setNotice(error.message);
        await resync();
      }
    }
  }, [current, preview, assignment.assignment_id, items, setConv, resync, post]);

  const onKeyDown = (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.altKey && !event.ctrlKey && !event.metaKey
        && !event.nativeEvent.isComposing) {
      event.preventDefault();
      send();
    }
  };

  // After a new message, the latest turn (and, under a reply, its boxes) is brought on screen.
  const shownTurns = turns.length;
  useEffect(() => {
    if (view !== "chat" || shownTurns === 0) return;
    const latest = document.querySelector("#chat-log .chat-turn:last-child");
    if (latest) latest.scrollIntoView({ block: "nearest" });
  }, [view, shownTurns]);

  const n = items.length;
  const item = current >= 0 ? items[current] : null;
  const lastOne = done.every((d, i) => d || i === current);
  return (
    <main data-kind="chat">
      <TaskHeader study={study} fallbackTitle="Talk with a partner about a feeling" preview={preview} />
      {phase === "consent" && (
        <Consent task="chat about an experience and rate replies" answers="messages and ratings"
                 onAccept={acceptConsent} onDecline={declineConsent} />
      )}
      {phase === "declined" && <Declined />}
      {phase === "instructions" && (
        <Instructions n={n} chat={chat} criteria={criteria} scale={scale} onStart={start} />
      )}
      {(phase === "chat" || phase === "review") && (
        <Progress done={answered} total={n} noun="conversations finished" onReopen={reopen} />
      )}
      {gone && (
        <div className="card note" id="chat-gone" role="alert">
          <p>{gone}</p>
          <button id="chat-reload" onClick={() => (onDone ? onDone() : window.location.reload())}>Continue</button>
        </div>
      )}
      {phase === "chat" && item && (
        <section id="item" className="chat" data-item-id={item.item_id} data-position={item.position}
                 data-state={conv.state} aria-labelledby="item-heading">
          <ItemHeading>
            Conversation {current + 1} of {n}{view === "rate" ? ": your ratings" : ""}
          </ItemHeading>
          <section className="card note prompt" id="chat-prompt" aria-label="Your situation">
            <p><strong>{promptText(item.prompt)}</strong>{" "}
              {item.prompt && item.prompt.situation ? item.prompt.situation : ""}</p>
            {view === "chat" && open && turns.length === 0 && (
              <p className="hint">Start the conversation: tell your partner about it in your own words.</p>
            )}
          </section>

          {view === "chat" && (
            <>
              <Messages turns={turns} questions={questions} ticks={ticks[current]} editable={open}
                        onToggle={(index, key, on) => toggleTick(current, index, key, on)} />
              <p className="hint typing" id="typing" aria-live="polite">
                {waiting && awaiting.state === "sending" ? "Your partner is typing\u2026" : ""}
              </p>
              {waiting && awaiting.state === "unreachable" && (
                <div className="error chat-error" id="turn-error" role="alert">
                  Could not reach the server —{" "}
                  <button type="button" id="retry"
                          onClick={() => sendTurn(current, awaiting.index, awaiting.text)}>Retry</button>
                </div>
              )}
              {ending === "unreachable" && (
                <div className="error chat-error" id="end-error" role="alert">
                  Could not reach the server —{" "}
                  <button type="button" id="retry-end" onClick={end}>Retry</button>
                </div>
              )}
              {notice && <p className="error" id="chat-notice" role="alert">{notice}</p>}
              {conv.state === "failed" && (
                <div className="card note" id="chat-failed" role="status">
                  <p>{conv.message || "Your partner could not answer. This is not your fault, and you will not be "
                    + "penalised."}</p>
                  <div className="chat-actions">
                    <button id="next-conversation" onClick={goOn}>{lastOne ? "Finish" : "Next conversation"}</button>
                  </div>
                </div>
              )}
              {open && (
                <div className="card composer" id="composer">
                  <p className="hint pii" id="pii-notice">{PII_NOTICE}</p>
                  {!full ? (
                    <>
                      <label htmlFor="chat-input">Your message</label>
                      <textarea id="chat-input" maxLength={chat.max_chars} rows={3} value={text}
                                aria-describedby="pii-notice chat-count"
                                onChange={(e) => setTexts((old) => old.map((t, j) => (j === current ? e.target.value : t)))}
                                onKeyDown={onKeyDown} />
                      <p className="hint" id="chat-count">
                        {text.length} of {chat.max_chars} characters. Messages so far: {turns.length} (at least
                        {" "}{chat.min_utterances}, at most {chat.max_utterances}).
                      </p>
                    </>
                  ) : (
                    <p id="chat-full">This conversation has reached its length: end it to rate it.</p>
                  )}
                  {missing.length > 0 && !waiting && (
                    <p className="hint" id="tick-first">Tick at least one box about your partner's reply to go on.</p>
                  )}
                  <div className="chat-actions">
                    {!full && (
                      <button id="send" disabled={!canSend || !text.trim()} onClick={send}>Send</button>
                    )}
                    <button id="end-conversation" className={full ? "" : "secondary"} disabled={!canEnd}
                            onClick={end}>{ending === "sending" ? "Ending..." : "End conversation"}</button>
                  </div>
                </div>
              )}
            </>
          )}

          {view === "rate" && (
            <>
              <div className="card" id="rating">
                <p>How was this conversation? Rate your partner on each question.</p>
                {criteria.map((c, q) => (
                  <Question key={c.key} index={q} criterion={c} scale={scale} value={ratings[current][c.key]}
                            onChoose={(v) => setRatings((old) => old.map((r, j) => (j === current ? { ...r, [c.key]: v } : r)))} />
                ))}
              </div>
              <details className="card transcript" open={missing.length > 0}>
                <summary>Show the conversation again</summary>
                <Messages turns={turns} questions={questions} ticks={ticks[current]} editable
                          label="The conversation" onToggle={(index, key, on) => toggleTick(current, index, key, on)} />
              </details>
              {missing.length > 0 && (
                <p className="hint" id="tick-first">Tick at least one box about each of your partner's replies.</p>
              )}
              <div className="chat-actions">
                <button id="next-conversation" disabled={!finished(current)} onClick={goOn}>
                  {lastOne ? "Finish" : "Next conversation"}
                </button>
              </div>
            </>
          )}
        </section>
      )}
      {phase === "review" && (
        <Review complete={allDone} completeText="Every conversation is finished."
                incompleteText="Some conversations still need your ratings." comment={comment}
                onComment={setComment} status={status} onSubmit={submit} onBack={backFromReview} />
      )}
      {phase === "submitted" && (
        <Submitted what="conversations and ratings" more="Chat more" onDone={onDone} receipt={status.receipt} />
      )}
    </main>
  );
}
