// The task, independent of where it is hosted: an adapter passes the assignment in and takes the answers out
// (onSubmit). The assignment's kind picks the page: "pairwise" (two responses, one choice per criterion) or, by
// default, the Likert page below (one response rated on the scale). Every text from models or people is rendered
// as React text, never as HTML.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import PairwiseTask from "./PairwiseTask.jsx";
import { Consent, Progress, Review, Submitted, Turn } from "./shared.jsx";

const EXAMPLE = {
  context: [
    { role: "speaker", text: "I finally got the results back, and I passed my nursing exam!" },
  ],
  good: "Congratulations! All those late nights paid off. How are you going to celebrate?",
  poor: "Exams are held several times a year.",
};

function Conversation({ context, response }) {
  return (
    <div className="card conversation" aria-label="conversation">
      {context.map((turn, i) => <Turn key={i} role={turn.role} text={turn.text} />)}
      <Turn role="listener" extraClass="response" label="Response to rate" text={response} />
    </div>
  );
}

function Question({ criterion, scale, value, focused, onChoose, onFocus, index }) {
  const points = [];
  for (let p = scale.min; p <= scale.max; p++) points.push(p);
  return (
    <fieldset className={`question${focused ? " focused" : ""}`} data-criterion={criterion.key}
              data-focused={focused ? "true" : "false"} onClick={onFocus}>
      <legend>{index + 1}. {criterion.label}</legend>
      <div>{criterion.question}</div>
      <div className="scale" role="radiogroup" aria-label={criterion.label}>
        {points.map((p, i) => (
          <label key={p} className={value === p ? "chosen" : ""}>
            <input type="radio" name={criterion.key} value={p} checked={value === p}
                   onChange={() => onChoose(p)} />
            {scale.labels && scale.labels[i] ? scale.labels[i] : String(p)}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

function Instructions({ criteria, scale, onStart }) {
  return (
    <div className="card" id="instructions">
      <h2>Instructions</h2>
      <p>Each page shows a conversation between a <em>Speaker</em>, who describes something that happened to
        them, and a <em>Listener</em>. The last, highlighted reply is the one to rate. Rate it on three
        questions, from {scale.min} to {scale.max}:</p>
      <dl>
        {criteria.map((c) => (
          <div key={c.key}><dt>{c.label}</dt><dd>{c.question}{c.definition ? ` ${c.definition}` : ""}</dd></div>
        ))}
      </dl>
      <h3>A worked example</h3>
      {EXAMPLE.context.map((t, i) => <Turn key={i} role={t.role} text={t.text} />)}
      <Turn role="listener" extraClass="response" label="Reply A" text={EXAMPLE.good} />
      <p className="hint">Reply A shares the Speaker's joy, stays on topic and reads well: Empathy 5, Relevance 5,
        Fluency 5.</p>
      <Turn role="listener" extraClass="response" label="Reply B" text={EXAMPLE.poor} />
      <p className="hint">Reply B is correct English but ignores the Speaker's feelings and barely follows the
        conversation: Empathy 1, Relevance 2, Fluency 5. Rate each question on its own.</p>
      <p className="hint">Keyboard: press {scale.min}-{scale.max} to answer the highlighted question, Enter to go on.</p>
      <div className="nav"><span /><button id="start" onClick={onStart} autoFocus>Start</button></div>
    </div>
  );
}

export default function TaskApp({ assignment, onSubmit, onDone }) {
  if (assignment.kind === "pairwise") return <PairwiseTask assignment={assignment} onSubmit={onSubmit} onDone={onDone} />;
  return <LikertTask assignment={assignment} onSubmit={onSubmit} onDone={onDone} />;
}

function LikertTask({ assignment, onSubmit, onDone }) {
  const { items, criteria, scale, study } = assignment;
  const [phase, setPhase] = useState("consent");
  const [index, setIndex] = useState(0);
  const [focus, setFocus] = useState(0);
  const [answers, setAnswers] = useState(() => items.map(() => ({})));
  const [comment, setComment] = useState("");
  const [status, setStatus] = useState({ state: "idle" });
  const seconds = useRef(items.map(() => 0));
  const shownAt = useRef(null);

  // Time on each item: accumulated while it is on screen (going back and forth adds up).
  useEffect(() => {
    if (phase !== "rating") return undefined;
    shownAt.current = performance.now();
    const current = index;
    return () => { seconds.current[current] += (performance.now() - shownAt.current) / 1000; };
  }, [phase, index]);

  const itemDone = useCallback((i) => criteria.every((c) => answers[i][c.key] !== undefined), [answers, criteria]);
  const answered = useMemo(() => items.filter((_, i) => itemDone(i)).length, [items, itemDone]);
  const allDone = answered === items.length;

  const choose = useCallback((criterionKey, value) => {
    setAnswers((old) => old.map((a, i) => (i === index ? { ...a, [criterionKey]: value } : a)));
  }, [index]);

  const goOn = useCallback(() => {
    if (phase !== "rating") return;
    const current = criteria[focus];
    if (answers[index][current.key] === undefined) return;
    if (focus < criteria.length - 1) { setFocus(focus + 1); return; }
    if (!itemDone(index)) { setFocus(criteria.findIndex((c) => answers[index][c.key] === undefined)); return; }
    if (index < items.length - 1) { setIndex(index + 1); setFocus(0); } else { setPhase("review"); }
  }, [phase, criteria, focus, answers, index, items.length, itemDone]);

  useEffect(() => {
    function onKey(event) {
      if (phase !== "rating" || event.target.tagName === "TEXTAREA" || event.altKey || event.ctrlKey || event.metaKey) return;
      const value = Number(event.key);
      if (event.key.length === 1 && Number.isInteger(value) && value >= scale.min && value <= scale.max) {
        event.preventDefault();
        choose(criteria[focus].key, value);
      } else if (event.key === "Enter") {
        event.preventDefault();
        goOn();
      }
    }
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [phase, focus, criteria, scale, choose, goOn]);

  async function submit() {
    if (!allDone || status.state === "sending") return;
    setStatus({ state: "sending" });
    const ratings = items.map((item, i) => ({
      item_id: item.item_id, scores: answers[i], seconds: Math.round(seconds.current[i] * 10) / 10,
    }));
    try {
      const receipt = await onSubmit({ ratings, comment: comment.trim() || undefined });
      setStatus({ state: "sent", receipt });
      setPhase("submitted");
    } catch (error) {
      setStatus({ state: "failed", message: String(error.message || error) });
    }
  }

  return (
    <main>
      <h1>{study && study.title ? study.title : "Rate responses in conversations"}</h1>
      {study && study.instructions ? <p className="hint">{study.instructions}</p> : null}
      {phase === "consent" && <Consent onAccept={() => setPhase("instructions")} />}
      {phase === "instructions" && <Instructions criteria={criteria} scale={scale} onStart={() => setPhase("rating")} />}
      {(phase === "rating" || phase === "review") && (
        <Progress done={answered} total={items.length} noun="responses rated" />
      )}
      {phase === "rating" && (
        <section id="item" data-item-id={items[index].item_id} data-position={items[index].position}>
          <div className="hint">Response {index + 1} of {items.length}</div>
          <Conversation context={items[index].context} response={items[index].response} />
          <div className="card">
            {criteria.map((c, q) => (
              <Question key={c.key} index={q} criterion={c} scale={scale} value={answers[index][c.key]}
                        focused={q === focus} onFocus={() => setFocus(q)} onChoose={(v) => { setFocus(q); choose(c.key, v); }} />
            ))}
          </div>
          <div className="nav">
            <button className="secondary" disabled={index === 0} onClick={() => { setIndex(index - 1); setFocus(0); }}>Back</button>
            <button id="next" disabled={!itemDone(index)}
                    onClick={() => { if (index < items.length - 1) { setIndex(index + 1); setFocus(0); } else setPhase("review"); }}>
              {index < items.length - 1 ? "Next" : "Review"}
            </button>
          </div>
        </section>
      )}
      {phase === "review" && (
        <Review complete={allDone} completeText="Every response is rated." incompleteText="Some responses still need a rating."
                comment={comment} onComment={setComment} status={status} onSubmit={submit}
                onBack={() => { setPhase("rating"); setIndex(items.length - 1); }} />
      )}
      {phase === "submitted" && <Submitted what="ratings" onDone={onDone} />}
    </main>
  );
}
