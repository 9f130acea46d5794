// The Likert task: per page a conversation and the one response to rate, then one question per criterion on the
// study's scale. Keys: the scale's digits answer the highlighted question, Enter goes on. Consent, instructions,
// progress, the review-and-submit step, the draft and the keyboard come from shared.jsx and useTask.js. Every text
// from models or people is rendered as React text, never as HTML.
import { useCallback } from "react";
import ItemComment, { itemCommentField } from "../ItemComment.jsx";
import { useItemView } from "../itemView.js";
import {
  Consent, Declined, ItemHeading, PointScale, Progress, Review, scaleChoices, Submitted, TaskHeader, Turn,
} from "../shared.jsx";
import { useTask } from "../useTask.js";

const EXAMPLE = {
  context: [
    { role: "speaker", text: "I finally got the results back, and I passed my nursing exam!" },
  ],
  good: "Congratulations! All those late nights paid off. How are you going to celebrate?",
  poor: "Exams are held several times a year.",
};

function Conversation({ context, response }) {
  return (
    <section className="card conversation" aria-label="Conversation">
      {context.map((turn, i) => <Turn key={i} role={turn.role} text={turn.text} />)}
      <Turn role="listener" extraClass="response" label="Response to rate" text={response} reply />
    </section>
  );
}

function Question({ criterion, scale, value, focused, onChoose, onFocus, index }) {
  return (
    <fieldset className={`question${focused ? " focused" : ""}`} data-criterion={criterion.key}
              data-focused={focused ? "true" : "false"} aria-current={focused ? "true" : undefined}
              onClick={onFocus}>
      <legend>{index + 1}. {criterion.label}: <span className="question-text" id={`question-${index}`}>{criterion.question}</span></legend>
      <PointScale name={criterion.key} choices={scaleChoices(scale)} value={value} onChoose={onChoose}
                  label={criterion.label} describedBy={`question-${index}`} />
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

export default function LikertTask({ assignment, onSubmit, onDone, rater = null, submissionId = null }) {
  const { items, criteria, scale, study } = assignment;
  const isAnswer = useCallback((v) => Number.isInteger(v) && v >= scale.min && v <= scale.max, [scale]);
  const answerForKey = useCallback((key) => {
    const value = Number(key);
    return key.length === 1 && isAnswer(value) ? value : undefined;
  }, [isAnswer]);
  const toBody = useCallback((answers, seconds, itemComments) => ({
    ratings: items.map((item, i) => ({
      item_id: item.item_id, scores: answers[i], seconds: seconds[i], ...itemCommentField(assignment, itemComments, i),
    })),
  }), [items, assignment]);
  const task = useTask({ assignment, rater, submissionId, isAnswer, answerForKey, toBody, onSubmit });
  const { phase, index, focus, answers } = task;
  useItemView(phase, index, focus);

  return (
    <main>
      <TaskHeader study={study} fallbackTitle="Rate responses in conversations" preview={task.preview} />
      {phase === "consent" && <Consent onAccept={task.acceptConsent} onDecline={task.declineConsent} />}
      {phase === "declined" && <Declined />}
      {phase === "instructions" && <Instructions criteria={criteria} scale={scale} onStart={task.start} />}
      {(phase === "rating" || phase === "review") && (
        <Progress done={task.answered} total={items.length} noun="responses rated" onReopen={task.reopen} />
      )}
      {phase === "rating" && (
        <section id="item" data-item-id={items[index].item_id} data-position={items[index].position}
                 aria-labelledby="item-heading">
          <ItemHeading>Response {index + 1} of {items.length}</ItemHeading>
          <Conversation context={items[index].context} response={items[index].response} />
          <div className="card">
            {criteria.map((c, q) => (
              <Question key={c.key} index={q} criterion={c} scale={scale} value={answers[index][c.key]}
                        focused={q === focus} onFocus={() => task.setFocus(q)}
                        onChoose={(v) => { task.setFocus(q); task.choose(c.key, v); }} />
            ))}
          </div>
          {assignment.item_comments === true && (
            <ItemComment noun="response" value={task.itemComments[index]} onChange={task.setItemComment} />
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
        <Review complete={task.allDone} completeText="Every response is rated."
                incompleteText="Some responses still need a rating." comment={task.comment}
                onComment={task.setComment} status={task.status} onSubmit={task.submit} onBack={task.backFromReview} />
      )}
      {phase === "submitted" && <Submitted what="ratings" onDone={onDone} receipt={task.status.receipt} />}
    </main>
  );
}
