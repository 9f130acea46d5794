// The pairwise (A/B) task: per page a conversation, then two responses to it side by side (stacked on narrow
// screens), A on the left and B on the right, and one choice per criterion: A, B or, when the study allows it, a
// tie. The payload carries the two texts only (A is the one the design put on the left), never which system wrote
// them or whether a pair is a control. Keys: A / B / T answer the highlighted question, Enter goes on. Consent,
// instructions, progress and the review-and-submit step are the Likert page's (shared.jsx).
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { Consent, Progress, Review, Submitted, Turn } from "./shared.jsx";

const ANSWERS = [
  { key: "A", label: "A" },
  { key: "B", label: "B" },
  { key: "T", label: "Tie" },
];

const EXAMPLE = {
  context: [
    { role: "speaker", text: "I finally got the results back, and I passed my nursing exam!" },
  ],
  a: "Exams are held several times a year.",
  b: "Congratulations! All those late nights paid off. How are you going to celebrate?",
};

function Responses({ a, b }) {
  return (
    <div className="pair" aria-label="responses">
      <div className="card side" id="response-a" data-side="A">
        <span className="who">Response A</span>
        <div className="text">{a}</div>
      </div>
      <div className="card side" id="response-b" data-side="B">
        <span className="who">Response B</span>
        <div className="text">{b}</div>
      </div>
    </div>
  );
}

function ChoiceQuestion({ criterion, answers, value, focused, onChoose, onFocus, index }) {
  return (
    <fieldset className={`question${focused ? " focused" : ""}`} data-criterion={criterion.key}
              data-focused={focused ? "true" : "false"} onClick={onFocus}>
      <legend>{index + 1}. {criterion.label}</legend>
      <div>{criterion.question}</div>
      <div className="scale" role="radiogroup" aria-label={criterion.label}>
        {answers.map((answer) => (
          <label key={answer.key} className={value === answer.key ? "chosen" : ""}>
            <input type="radio" name={criterion.key} value={answer.key} checked={value === answer.key}
                   onChange={() => onChoose(answer.key)} />
            {answer.label}
          </label>
        ))}
      </div>
    </fieldset>
  );
}

function Instructions({ criteria, ties, onStart }) {
  return (
    <div className="card" id="instructions">
      <h2>Instructions</h2>
      <p>Each page shows a conversation between a <em>Speaker</em>, who describes something that happened to
        them, and a <em>Listener</em>, then two possible replies of the Listener, <strong>A</strong> and
        {" "}<strong>B</strong>. For each question, choose the better reply{ties ? ", or Tie when neither is better" : ""}:</p>
      <dl>
        {criteria.map((c) => (
          <div key={c.key}><dt>{c.label}</dt><dd>{c.question}{c.definition ? ` ${c.definition}` : ""}</dd></div>
        ))}
      </dl>
      <h3>A worked example</h3>
      {EXAMPLE.context.map((t, i) => <Turn key={i} role={t.role} text={t.text} />)}
      <Responses a={EXAMPLE.a} b={EXAMPLE.b} />
      <p className="hint">Reply B shares the Speaker's joy and follows the conversation; reply A is correct English
        but ignores both. Empathy: B. Relevance: B. Fluency: {ties ? "Tie (both read well)" : "either; both read well"}.
        Judge each question on its own, and do not let the side a reply is on sway you.</p>
      <p className="hint">Keyboard: press A or B{ties ? " (T for a tie)" : ""} to answer the highlighted question,
        Enter to go on.</p>
      <div className="nav"><span /><button id="start" onClick={onStart} autoFocus>Start</button></div>
    </div>
  );
}

export default function PairwiseTask({ assignment, onSubmit, onDone }) {
  const { items, criteria, study, ties } = assignment;
  const answers = useMemo(() => ANSWERS.filter((a) => ties || a.key !== "T"), [ties]);
  const [phase, setPhase] = useState("consent");
  const [index, setIndex] = useState(0);
  const [focus, setFocus] = useState(0);
  const [choices, setChoices] = useState(() => items.map(() => ({})));
  const [comment, setComment] = useState("");
  const [status, setStatus] = useState({ state: "idle" });
  const seconds = useRef(items.map(() => 0));
  const shownAt = useRef(null);

  // Time on each pair: accumulated while it is on screen (going back and forth adds up).
  useEffect(() => {
    if (phase !== "rating") return undefined;
    shownAt.current = performance.now();
    const current = index;
    return () => { seconds.current[current] += (performance.now() - shownAt.current) / 1000; };
  }, [phase, index]);

  const itemDone = useCallback((i) => criteria.every((c) => choices[i][c.key] !== undefined), [choices, criteria]);
  const answered = useMemo(() => items.filter((_, i) => itemDone(i)).length, [items, itemDone]);
  const allDone = answered === items.length;

  const choose = useCallback((criterionKey, value) => {
    setChoices((old) => old.map((c, i) => (i === index ? { ...c, [criterionKey]: value } : c)));
  }, [index]);

  const goOn = useCallback(() => {
    if (phase !== "rating") return;
    const current = criteria[focus];
    if (choices[index][current.key] === undefined) return;
    if (focus < criteria.length - 1) { setFocus(focus + 1); return; }
    if (!itemDone(index)) { setFocus(criteria.findIndex((c) => choices[index][c.key] === undefined)); return; }
    if (index < items.length - 1) { setIndex(index + 1); setFocus(0); } else { setPhase("review"); }
  }, [phase, criteria, focus, choices, index, items.length, itemDone]);

  useEffect(() => {
    function onKey(event) {
      if (phase !== "rating" || event.target.tagName === "TEXTAREA" || event.altKey || event.ctrlKey || event.metaKey) return;
      const key = event.key.length === 1 ? event.key.toUpperCase() : event.key;
      if (answers.some((a) => a.key === key)) {
        event.preventDefault();
        choose(criteria[focus].key, key);
      } else if (key === "Enter") {
        event.preventDefault();
        goOn();
      }
    }
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [phase, focus, criteria, answers, choose, goOn]);

  async function submit() {
    if (!allDone || status.state === "sending") return;
    setStatus({ state: "sending" });
    const judgments = items.map((item, i) => ({
      item_id: item.item_id, choices: choices[i], seconds: Math.round(seconds.current[i] * 10) / 10,
    }));
    try {
      const receipt = await onSubmit({ judgments, comment: comment.trim() || undefined });
      setStatus({ state: "sent", receipt });
      setPhase("submitted");
    } catch (error) {
      setStatus({ state: "failed", message: String(error.message || error) });
    }
  }

  const item = items[index];
  return (
    <main data-kind="pairwise">
      <h1>{study && study.title ? study.title : "Compare responses in conversations"}</h1>
      {study && study.instructions ? <p className="hint">{study.instructions}</p> : null}
      {phase === "consent" && <Consent task="compare short replies" answers="answers" onAccept={() => setPhase("instructions")} />}
      {phase === "instructions" && <Instructions criteria={criteria} ties={ties} onStart={() => setPhase("rating")} />}
      {(phase === "rating" || phase === "review") && (
        <Progress done={answered} total={items.length} noun="pairs compared" />
      )}
      {phase === "rating" && (
        <section id="item" data-item-id={item.item_id} data-position={item.position}>
          <div className="hint">Pair {index + 1} of {items.length}</div>
          <div className="card conversation" aria-label="conversation">
            {item.context.map((turn, i) => <Turn key={i} role={turn.role} text={turn.text} />)}
          </div>
          <Responses a={item.response_a} b={item.response_b} />
          <div className="card">
            {criteria.map((c, q) => (
              <ChoiceQuestion key={c.key} index={q} criterion={c} answers={answers} value={choices[index][c.key]}
                              focused={q === focus} onFocus={() => setFocus(q)}
                              onChoose={(v) => { setFocus(q); choose(c.key, v); }} />
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
        <Review complete={allDone} completeText="Every pair is compared." incompleteText="Some pairs still need a choice."
                comment={comment} onComment={setComment} status={status} onSubmit={submit}
                onBack={() => { setPhase("rating"); setIndex(items.length - 1); }} />
      )}
      {phase === "submitted" && <Submitted what="answers" more="Compare more" onDone={onDone} />}
    </main>
  );
}
