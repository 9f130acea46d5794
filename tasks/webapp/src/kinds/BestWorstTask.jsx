// The best-worst scaling task: per page a conversation, then the responses of a tuple labelled A, B, C, ... in the
// order the design chose (a grid of cards, stacked on narrow screens), and per criterion two questions: which
// response is the best and which the worst. The payload carries the texts only (never which system wrote them or
// whether a tuple is a control). A response cannot be both: the letter picked for one of the two is disabled in the
// other. Keys: a letter answers the highlighted question, Enter goes on. Consent, instructions, progress, the
// review-and-submit step, the draft and the keyboard work as on the other pages (shared.jsx, useTask.js), whose
// questions here are "<criterion>.best" and "<criterion>.worst".
import { useCallback, useMemo, useRef } from "react";
import { useItemView } from "../itemView.js";
import { Consent, Declined, ItemHeading, Progress, Review, Submitted, TaskHeader, Turn } from "../shared.jsx";
import { useTask } from "../useTask.js";

const ALL_LETTERS = "ABCDEF";
const PICKS = [
  { pick: "best", label: "Best" },
  { pick: "worst", label: "Worst" },
];

const EXAMPLE = {
  context: [{ role: "speaker", text: "I finally got the results back, and I passed my nursing exam!" }],
  responses: [
    "Exams are held several times a year.",
    "Congratulations! All those late nights paid off. How are you going to celebrate?",
    "That is nice. I had pasta for dinner.",
    "Well done, you must be relieved.",
  ],
};

/** The page's questions: a best and a worst question per criterion, keyed "<criterion>.<pick>". */
function questionsOf(criteria) {
  return criteria.flatMap((c) => PICKS.map(({ pick, label }) => ({
    key: `${c.key}.${pick}`, label: `${c.label}: ${label.toLowerCase()}`, criterion: c, pick, pickLabel: label,
  })));
}

function otherKey(question) {
  return `${question.criterion.key}.${question.pick === "best" ? "worst" : "best"}`;
}

function Responses({ texts }) {
  return (
    <div className="pair" role="group" aria-label="Responses" data-reply="true">
      {texts.map((text, i) => (
        <div key={i} className="card side" id={`response-${ALL_LETTERS[i]}`} data-letter={ALL_LETTERS[i]}>
          <span className="who">Response {ALL_LETTERS[i]}</span>
          <div className="text">{text}</div>
        </div>
      ))}
    </div>
  );
}

function PickQuestion({ question, letters, value, taken, focused, onChoose, onFocus, index }) {
  return (
    <fieldset className={`question${focused ? " focused" : ""}`} data-criterion={question.criterion.key}
              data-pick={question.pick} data-focused={focused ? "true" : "false"}
              aria-current={focused ? "true" : undefined} onClick={onFocus}>
      <legend>{index + 1}. {question.criterion.label}, <strong>{question.pickLabel.toLowerCase()}</strong>:{" "}
        <span className="question-text" id={`question-${index}`}>{question.criterion.question}</span></legend>
      <div className="scale" role="radiogroup" aria-label={question.label} aria-describedby={`question-${index}`}>
        {letters.map((letter) => (
          <label key={letter} className={value === letter ? "chosen" : ""}>
            <input type="radio" name={question.key} value={letter} checked={value === letter}
                   disabled={taken === letter} onChange={() => onChoose(letter)} />
            <span><span className="pick-word">{question.pickLabel}: </span>{letter}</span>
          </label>
        ))}
      </div>
    </fieldset>
  );
}

function Instructions({ criteria, size, onStart }) {
  const letters = ALL_LETTERS.slice(0, size);
  return (
    <div className="card" id="instructions">
      <h2>Instructions</h2>
      <p>Each page shows a conversation between a <em>Speaker</em>, who describes something that happened to
        them, and a <em>Listener</em>, then {size} possible replies of the Listener, {letters.split("").join(", ")}.
        For each question, pick the <strong>best</strong> reply and the <strong>worst</strong> reply (two different
        ones):</p>
      <dl>
        {criteria.map((c) => (
          <div key={c.key}><dt>{c.label}</dt><dd>{c.question}{c.definition ? ` ${c.definition}` : ""}</dd></div>
        ))}
      </dl>
      <h3>A worked example</h3>
      {EXAMPLE.context.map((t, i) => <Turn key={i} role={t.role} text={t.text} />)}
      <Responses texts={EXAMPLE.responses} />
      <p className="hint">Reply B shares the Speaker's joy and follows the conversation: the best for empathy and
        relevance. Reply C ignores the Speaker: the worst for both. For fluency every reply reads well; pick the
        easiest and the hardest to read all the same. Judge each question on its own, and do not let the place a
        reply is shown in sway you.</p>
      <p className="hint">Keyboard: press a letter to answer the highlighted question, Enter to go on.</p>
      <div className="nav"><span /><button id="start" onClick={onStart} autoFocus>Start</button></div>
    </div>
  );
}

export default function BestWorstTask({ assignment, onSubmit, onDone, rater = null, submissionId = null }) {
  const { items, criteria, study } = assignment;
  const questions = useMemo(() => questionsOf(criteria), [criteria]);
  // The shared state machine walks questions: the assignment it is given asks the best and the worst of each
  // criterion as two questions.
  const asked = useMemo(() => ({ ...assignment, criteria: questions }), [assignment, questions]);
  const size = useMemo(() => Math.max(2, ...items.map((item) => item.responses.length)), [items]);
  const letters = useMemo(() => ALL_LETTERS.slice(0, size).split(""), [size]);
  const isAnswer = useCallback((v) => typeof v === "string" && letters.includes(v), [letters]);
  // A key press may not pick for one question the letter the other pick of its criterion holds: `current` is the
  // page's state as last rendered (the key handler is set up before the state exists).
  const current = useRef({ answers: [], index: 0, focus: 0 });
  const answerForKey = useCallback((key) => {
    const upper = key.length === 1 ? key.toUpperCase() : key;
    if (!isAnswer(upper)) return undefined;
    const { answers, index, focus } = current.current;
    const question = questions[focus];
    const taken = question && answers[index] ? answers[index][otherKey(question)] : undefined;
    return upper === taken ? undefined : upper;
  }, [isAnswer, questions]);
  const toBody = useCallback((answers, seconds) => ({
    best_worst: items.map((item, i) => ({
      item_id: item.item_id,
      best: Object.fromEntries(criteria.map((c) => [c.key, answers[i][`${c.key}.best`]])),
      worst: Object.fromEntries(criteria.map((c) => [c.key, answers[i][`${c.key}.worst`]])),
      seconds: seconds[i],
    })),
  }), [items, criteria]);
  const task = useTask({ assignment: asked, rater, submissionId, isAnswer, answerForKey, toBody, onSubmit });
  const { phase, index, focus } = task;
  current.current = { answers: task.answers, index, focus };
  useItemView(phase, index, focus);

  const item = items[index];
  const answers = task.answers[index] || {};
  return (
    <main data-kind="best_worst">
      <TaskHeader study={study} fallbackTitle="Pick the best and the worst response in conversations"
                  preview={task.preview} />
      {phase === "consent" && (
        <Consent task="pick the best and the worst of a few short replies" answers="answers"
                 onAccept={task.acceptConsent} onDecline={task.declineConsent} />
      )}
      {phase === "declined" && <Declined />}
      {phase === "instructions" && <Instructions criteria={criteria} size={size} onStart={task.start} />}
      {(phase === "rating" || phase === "review") && (
        <Progress done={task.answered} total={items.length} noun="sets of replies judged" onReopen={task.reopen} />
      )}
      {phase === "rating" && (
        <section id="item" data-item-id={item.item_id} data-position={item.position} aria-labelledby="item-heading">
          <ItemHeading>Conversation {index + 1} of {items.length}</ItemHeading>
          <section className="card conversation" aria-label="Conversation">
            {item.context.map((turn, i) => <Turn key={i} role={turn.role} text={turn.text} />)}
          </section>
          <Responses texts={item.responses} />
          <div className="card">
            <p className="hint">A reply cannot be both the best and the worst on one question.</p>
            {questions.map((question, q) => (
              <PickQuestion key={question.key} index={q} question={question}
                            letters={letters.slice(0, item.responses.length)} value={answers[question.key]}
                            taken={answers[otherKey(question)]} focused={q === focus}
                            onFocus={() => task.setFocus(q)}
                            onChoose={(v) => { task.setFocus(q); task.choose(question.key, v); }} />
            ))}
          </div>
          <div className="nav">
            <button className="secondary" disabled={index === 0} onClick={() => task.goTo(index - 1)}>Back</button>
            <button id="next" disabled={!task.itemDone(index)} onClick={task.next}>
              {index < items.length - 1 ? "Next" : "Finish"}
            </button>
          </div>
        </section>
      )}
      {phase === "review" && (
        <Review complete={task.allDone} completeText="Every set of replies is judged."
                incompleteText="Some sets of replies still need a best and a worst." comment={task.comment}
                onComment={task.setComment} status={task.status} onSubmit={task.submit}
                onBack={task.backFromReview} />
      )}
      {phase === "submitted" && <Submitted what="answers" more="Judge more" onDone={onDone} receipt={task.status.receipt} />}
    </main>
  );
}
