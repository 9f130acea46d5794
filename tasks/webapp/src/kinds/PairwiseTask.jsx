// The pairwise (A/B) task: per page a conversation, then two responses to it side by side (stacked on narrow
// screens), A on the left and B on the right, and one choice per criterion: A, B or, when the study allows it, a
// tie. The payload carries the two texts only (A is the one the design put on the left), never which system wrote
// them or whether a pair is a control. Keys: A / B / T answer the highlighted question, Enter goes on. Consent,
// instructions, progress, the review-and-submit step, the draft and the keyboard work as on the Likert page
// (shared.jsx, useTask.js).
import { useCallback, useMemo } from "react";
import ItemComment, { itemCommentField } from "../ItemComment.jsx";
import { useItemView } from "../itemView.js";
import { Consent, Declined, ItemHeading, Progress, Review, Submitted, TaskHeader, Turn } from "../shared.jsx";
import { useTask } from "../useTask.js";

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
    <div className="pair" role="group" aria-label="Responses" data-reply="true">
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
              data-focused={focused ? "true" : "false"} aria-current={focused ? "true" : undefined}
              onClick={onFocus}>
      <legend>{index + 1}. {criterion.label}: <span className="question-text" id={`question-${index}`}>{criterion.question}</span></legend>
      <div className="scale" role="radiogroup" aria-label={criterion.label} aria-describedby={`question-${index}`}>
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

export default function PairwiseTask({ assignment, onSubmit, onDone, rater = null, submissionId = null }) {
  const { items, criteria, study, ties } = assignment;
  const answers = useMemo(() => ANSWERS.filter((a) => ties || a.key !== "T"), [ties]);
  const isAnswer = useCallback((v) => answers.some((a) => a.key === v), [answers]);
  const answerForKey = useCallback((key) => {
    const upper = key.length === 1 ? key.toUpperCase() : key;
    return isAnswer(upper) ? upper : undefined;
  }, [isAnswer]);
  const toBody = useCallback((choices, seconds, itemComments) => ({
    judgments: items.map((item, i) => ({
      item_id: item.item_id, choices: choices[i], seconds: seconds[i], ...itemCommentField(assignment, itemComments, i),
    })),
  }), [items, assignment]);
  const task = useTask({ assignment, rater, submissionId, isAnswer, answerForKey, toBody, onSubmit });
  const { phase, index, focus } = task;
  const choices = task.answers;
  useItemView(phase, index, focus);

  const item = items[index];
  return (
    <main data-kind="pairwise">
      <TaskHeader study={study} fallbackTitle="Compare responses in conversations" preview={task.preview} />
      {phase === "consent" && (
        <Consent task="compare short replies" answers="answers" onAccept={task.acceptConsent}
                 onDecline={task.declineConsent} />
      )}
      {phase === "declined" && <Declined />}
      {phase === "instructions" && <Instructions criteria={criteria} ties={ties} onStart={task.start} />}
      {(phase === "rating" || phase === "review") && (
        <Progress done={task.answered} total={items.length} noun="pairs compared" onReopen={task.reopen} />
      )}
      {phase === "rating" && (
        <section id="item" data-item-id={item.item_id} data-position={item.position} aria-labelledby="item-heading">
          <ItemHeading>Pair {index + 1} of {items.length}</ItemHeading>
          <section className="card conversation" aria-label="Conversation">
            {item.context.map((turn, i) => <Turn key={i} role={turn.role} text={turn.text} />)}
          </section>
          <Responses a={item.response_a} b={item.response_b} />
          <div className="card">
            {criteria.map((c, q) => (
              <ChoiceQuestion key={c.key} index={q} criterion={c} answers={answers} value={choices[index][c.key]}
                              focused={q === focus} onFocus={() => task.setFocus(q)}
                              onChoose={(v) => { task.setFocus(q); task.choose(c.key, v); }} />
            ))}
          </div>
          {assignment.item_comments === true && (
            <ItemComment noun="pair" value={task.itemComments[index]} onChange={task.setItemComment} />
          )}
          <div className="nav">
            <button className="secondary" disabled={index === 0} onClick={() => task.goTo(index - 1)}>Back</button>
            <button id="next" disabled={!task.itemDone(index)} onClick={task.next}>
              {index < items.length - 1 ? "Next" : "Finish"}
            </button>
          </div>
        </section>
      )}
      {phase === "review" && (
        <Review complete={task.allDone} completeText="Every pair is compared." incompleteText="Some pairs still need a choice."
                comment={task.comment} onComment={task.setComment} status={task.status} onSubmit={task.submit}
                onBack={task.backFromReview} />
      )}
      {phase === "submitted" && <Submitted what="answers" more="Compare more" onDone={onDone} receipt={task.status.receipt} />}
    </main>
  );
}
