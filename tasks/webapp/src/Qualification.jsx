// The qualification a study may ask of a rater before her first real assignment (issue 30; ACUTE-Eval's onboarding):
// consent, what the practice round is and its pass mark, then each practice item with the study's questions, and
// after each answer whether it was right, the answers counted right and the researcher's feedback; at the end either
// "Continue to the study" or a thank-you page saying what the study needs (on Prolific with the completion code the
// study gives to those who do not pass). The state comes from GET /api/annotate/qualification and every answer goes
// to POST /api/annotate/qualification/answers one at a time, so a reload resumes at the first item not answered;
// the server stores, scores and decides (the page never knows an answer before it is sent). The items are panels of
// text in the study kind's terms (a conversation and its response; responses A and B; two conversations), shown as
// React text, never as HTML.
import { useCallback, useEffect, useRef, useState } from "react";
import { Completion, Consent, Declined, PointScale, TaskHeader, Turn } from "./shared.jsx";

function Panel({ panel }) {
  return (
    <section className="card conversation gold-panel" aria-label={panel.title}>
      <h3 className="gold-panel-title">{panel.title}</h3>
      {panel.note ? <p className="acute-prompt"><span className="who">The speaker's situation</span>{panel.note}</p>
        : null}
      {panel.turns.map((turn, i) => (
        <Turn key={i} role={turn.role} text={turn.text} label={turn.label || undefined}
              extraClass={turn.label === "Response to rate" ? "response" : ""} />
      ))}
    </section>
  );
}

// The first panel on its own, the last two side by side on a wide screen (responses A and B, or two conversations).
function Panels({ panels }) {
  if (panels.length < 2) return panels.map((panel, i) => <Panel key={i} panel={panel} />);
  const head = panels.slice(0, -2);
  const sides = panels.slice(-2);
  return (
    <>
      {head.map((panel, i) => <Panel key={i} panel={panel} />)}
      <div className="gold-sides">{sides.map((panel, i) => <Panel key={i} panel={panel} />)}</div>
    </>
  );
}

function labelOf(choices, value) {
  const found = choices.find((c) => c.value === value);
  return found ? found.label : String(value);
}

// A Likert study's choices are the points of its scale: shown as the task page shows them (shared.jsx PointScale).
function Question({ criterion, index, choices, value, locked, onChoose }) {
  const points = choices.every((choice) => Number.isInteger(choice.value));
  return (
    <fieldset className="question" data-criterion={criterion.key}>
      <legend>{index + 1}. {criterion.label}: <span className="question-text" id={`gold-question-${index}`}>{criterion.question}</span></legend>
      {points ? (
        <PointScale name={`gold-${criterion.key}`} choices={choices} value={value} onChoose={onChoose}
                    label={criterion.label} describedBy={`gold-question-${index}`} disabled={locked} />
      ) : (
        <div className="scale" role="radiogroup" aria-label={criterion.label}
             aria-describedby={`gold-question-${index}`}>
          {choices.map((choice) => (
            <label key={String(choice.value)} className={value === choice.value ? "chosen" : ""}>
              <input type="radio" name={`gold-${criterion.key}`} value={String(choice.value)} disabled={locked}
                     checked={value === choice.value} onChange={() => onChoose(choice.value)} />
              {choice.label}
            </label>
          ))}
        </div>
      )}
    </fieldset>
  );
}

// What she is told after an answer: right or not, the answers counted right per question, and why.
function Feedback({ reply, criteria, choices }) {
  return (
    <section className={`card gold-feedback ${reply.correct ? "gold-right" : "gold-wrong"}`} id="qualification-feedback"
             role="status" aria-labelledby="qualification-feedback-title">
      <h3 id="qualification-feedback-title">{reply.correct ? "Right" : "Not quite"}</h3>
      <p>{reply.feedback}</p>
      <ul className="gold-answers">
        {criteria.map((c) => (
          <li key={c.key}>{c.label}: {(reply.right[c.key] || []).map((v) => labelOf(choices, v)).join(" or ")}
            {reply.answer[c.key] !== undefined && !(reply.right[c.key] || []).includes(reply.answer[c.key])
              ? ` (you answered ${labelOf(choices, reply.answer[c.key])})` : ""}</li>
        ))}
      </ul>
    </section>
  );
}

function rule(state) {
  const n = state.items.length;
  const tries = state.attempts > 1 ? ` You may go through them up to ${state.attempts} times.` : "";
  return `You need ${state.min_correct} of ${n} right to continue to the study.${tries}`;
}

// The first item of the attempt she has not answered (all answered: the last, whose feedback is on screen).
function firstOpen(state) {
  const answered = new Set(state.answered.map((a) => a.item));
  const open = state.items.findIndex((item) => !answered.has(item.position));
  return open === -1 ? state.items.length - 1 : open;
}

export default function Qualification({ initial, onAnswer, onPassed }) {
  const [state, setState] = useState(initial);
  // A reload resumes where she was: at her first open item, or at the start of her next attempt.
  const [phase, setPhase] = useState(() => (initial.status !== "pending" ? initial.status
    : initial.answered.length ? "items" : initial.attempt > 1 ? "again" : "consent"));
  const [index, setIndex] = useState(() => firstOpen(initial));
  const [chosen, setChosen] = useState({});
  const [reply, setReply] = useState(null);
  const [sending, setSending] = useState(false);
  const [error, setError] = useState(null);
  const heading = useRef(null);
  const { criteria, choices, items, study } = state;

  useEffect(() => {
    if (heading.current) heading.current.focus();
  }, [phase, index]);

  const complete = criteria.every((c) => chosen[c.key] !== undefined);
  const check = useCallback(async () => {
    if (!complete || sending) return;
    setSending(true);
    setError(null);
    try {
      const answered = await onAnswer({ item: items[index].position, attempt: state.attempt, answer: chosen });
      setReply(answered);
      setState(answered.state);
    } catch (failure) {
      setError(String(failure.message || failure));
    } finally {
      setSending(false);
    }
  }, [complete, sending, onAnswer, items, index, state.attempt, chosen]);

  // After the feedback: the next item, or what the attempt decided (a new attempt starts on the first item).
  const goOn = useCallback(() => {
    setReply(null);
    setChosen({});
    if (state.status !== "pending") { setPhase(state.status); return; }
    if (state.answered.length === 0) { setIndex(0); setPhase("again"); return; }
    setIndex(firstOpen(state));
  }, [state]);

  const title = "Before the study: a few practice items";
  let body = null;
  if (phase === "consent") {
    body = <Consent task="first answer a few practice questions about replies" answers="answers"
                    onAccept={() => setPhase("intro")} onDecline={() => setPhase("declined")} />;
  } else if (phase === "declined") {
    body = <Declined />;
  } else if (phase === "intro" || phase === "again") {
    const correct = phase === "again" ? `You got fewer than ${state.min_correct} right that time. ` : "";
    body = (
      <section className="card" id="qualification-intro" aria-labelledby="qualification-intro-title">
        <h2 className="gold-heading" id="qualification-intro-title" ref={heading} tabIndex={-1}>
          {phase === "again" ? `Attempt ${state.attempt} of ${state.attempts}` : "Practice first"}
        </h2>
        <p>{correct}This study first asks you to answer {items.length} practice item{items.length === 1 ? "" : "s"}
          {" "}whose answers are known. After each one you will see the answers counted right and why. {rule(state)}</p>
        {state.intro ? <p>{state.intro}</p> : null}
        <div className="nav"><span />
          <button id="qualification-start" onClick={() => setPhase("items")}>Start the practice items</button>
        </div>
      </section>
    );
  } else if (phase === "items") {
    const item = items[index];
    const locked = reply !== null;
    body = (
      <section id="qualification-item" data-position={item.position} aria-labelledby="qualification-heading">
        <h2 className="item-heading" id="qualification-heading" ref={heading} tabIndex={-1}>
          Practice item {index + 1} of {items.length}
          {state.attempts > 1 ? ` (attempt ${state.attempt} of ${state.attempts})` : ""}
        </h2>
        <Panels panels={item.panels} />
        <div className="card">
          {criteria.map((c, q) => (
            <Question key={c.key} criterion={c} index={q} choices={choices} value={chosen[c.key]} locked={locked}
                      onChoose={(v) => setChosen((old) => ({ ...old, [c.key]: v }))} />
          ))}
        </div>
        {error && <p className="error" id="qualification-error" role="alert">Could not send your answer: {error}.
          Please try again.</p>}
        {reply && <Feedback reply={reply} criteria={criteria} choices={choices} />}
        <div className="nav"><span />
          {reply ? <button id="qualification-next" onClick={goOn} autoFocus>
            {state.status !== "pending" || state.answered.length === 0 || index === items.length - 1
              ? "See the result" : "Next practice item"}</button>
            : <button id="qualification-check" disabled={!complete || sending} onClick={check}>
              {sending ? "Checking..." : "Check my answer"}</button>}
        </div>
      </section>
    );
  } else if (phase === "passed") {
    body = (
      <section className="card" id="qualification-passed" aria-labelledby="qualification-passed-title">
        <h2 className="done gold-heading" id="qualification-passed-title" ref={heading} tabIndex={-1}>You passed the practice
          round</h2>
        <p>You got {state.correct} of {items.length} right. The study itself comes next.</p>
        <div className="nav"><span /><button id="qualification-continue" onClick={onPassed}>Continue to the
          study</button></div>
      </section>
    );
  } else if (phase === "failed") {
    const completion = state.completion && typeof state.completion === "object" ? state.completion : null;
    body = (
      <section className="card" id="qualification-failed" aria-labelledby="qualification-failed-title">
        <h2 className="gold-heading" id="qualification-failed-title" ref={heading} tabIndex={-1}>Thank you for your time</h2>
        <p>This study needs raters who get at least {state.min_correct} of the {items.length} practice items right;
          you got {state.correct}, so there is no work for you in it. Nothing more is asked of you.</p>
        {completion ? <Completion completion={completion} /> : <p className="hint">You can close this page.</p>}
      </section>
    );
  }
  return (
    <main data-kind="qualification" data-phase={phase}>
      <TaskHeader study={study} fallbackTitle={title} />
      {body}
    </main>
  );
}
