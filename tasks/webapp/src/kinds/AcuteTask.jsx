// The ACUTE-Eval task: per page two whole conversations side by side (stacked on narrow screens, the first on top),
// each between a Speaker, who talks about something that happened to them, and a Listener; then, per question, the
// listener picked (conversation 1's, shown on the left, or conversation 2's) and a few words saying why. The payload
// carries the two conversations as text only (which is on the left is the design's), never which system listened
// or whether a pair is a control. Keys: 1 / 2 pick for the highlighted question, Enter goes on once its answer is
// whole. Consent, instructions, progress, the review-and-submit step, the draft and the keyboard come from shared.jsx
// and useTask.js; every text from models or people is rendered as React text, never as HTML.
import { useCallback } from "react";
import { useItemView } from "../itemView.js";
import { Consent, Declined, ItemHeading, Progress, Review, Submitted, TaskHeader, Turn } from "../shared.jsx";
import { useTask } from "../useTask.js";

const SIDES = [
  { key: "left", label: "Conversation 1", keyboard: "1" },
  { key: "right", label: "Conversation 2", keyboard: "2" },
];
// The blanks trimmed around a justification before it is counted: the server's (ASCII only), not String.trim's.
const BLANKS = /^[ \t\n\r]+|[ \t\n\r]+$/g;

const EXAMPLE = {
  left: [
    { speaker: "speaker", text: "My dog passed away last week. The house feels so empty." },
    { speaker: "listener", text: "What breed was it?" },
  ],
  right: [
    { speaker: "speaker", text: "My dog passed away last week. The house feels so empty." },
    { speaker: "listener", text: "I am so sorry. Losing a companion like that is hard; you must miss them a lot." },
  ],
};

function trimmedLength(text) {
  return typeof text === "string" ? text.replace(BLANKS, "").length : 0;
}

function promptLine(prompt) {
  const emotion = prompt && prompt.emotion ? prompt.emotion : "";
  const situation = prompt && prompt.situation ? prompt.situation : "";
  if (!emotion && !situation) return null;
  return (
    <p className="acute-prompt">
      <span className="who">The speaker's situation</span>
      {emotion ? `Feeling ${emotion}. ` : ""}{situation}
    </p>
  );
}

function ConversationCard({ number, conversation }) {
  const turns = conversation ? conversation.turns : [];
  return (
    <section className="card acute-side" aria-label={`Conversation ${number}`} data-side={number === 1 ? "left" : "right"}>
      <h3 className="acute-side-title">Conversation {number}</h3>
      {conversation ? promptLine(conversation.prompt) : null}
      {turns.map((t) => (
        <Turn key={t.index} role={t.speaker === "speaker" ? "speaker" : "listener"} text={t.text}
              label={t.speaker === "speaker" ? "Speaker" : `Listener ${number}`} />
      ))}
    </section>
  );
}

function Conversations({ left, right }) {
  return (
    <div className="acute-pair" data-reply="true">
      <ConversationCard number={1} conversation={left} />
      <ConversationCard number={2} conversation={right} />
    </div>
  );
}

function AcuteQuestion({ criterion, index, value, focused, onFocus, onPick, onWhy, bounds }) {
  const answer = value || {};
  const why = typeof answer.justification === "string" ? answer.justification : "";
  const count = trimmedLength(why);
  const short = why !== "" && count < bounds.min;
  return (
    <div className="acute-question" data-criterion={criterion.key}>
      <fieldset className={`question${focused ? " focused" : ""}`} data-criterion={criterion.key}
                data-focused={focused ? "true" : "false"} aria-current={focused ? "true" : undefined}
                onClick={onFocus}>
        <legend>{index + 1}. {criterion.label}: <span className="question-text" id={`question-${index}`}>{criterion.question}</span></legend>
        <div className="scale" role="radiogroup" aria-label={criterion.label} aria-describedby={`question-${index}`}>
          {SIDES.map((side) => (
            <label key={side.key} className={answer.choice === side.key ? "chosen" : ""}>
              <input type="radio" name={criterion.key} value={side.key} checked={answer.choice === side.key}
                     onChange={() => onPick(side.key)} />
              {side.label}'s listener
            </label>
          ))}
        </div>
      </fieldset>
      <div className="acute-why">
        <label htmlFor={`why-${criterion.key}`}>Why? In a few words ({bounds.min} characters or more)</label>
        <textarea id={`why-${criterion.key}`} name={`why-${criterion.key}`} maxLength={bounds.max} value={why}
                  aria-describedby={`why-count-${criterion.key}`} aria-invalid={short ? "true" : undefined}
                  onChange={(e) => onWhy(e.target.value)} />
        <p className={`hint${short ? " acute-short" : ""}`} id={`why-count-${criterion.key}`}>
          {count < bounds.min ? `${count} of at least ${bounds.min} characters` : `${count} characters`}
        </p>
      </div>
    </div>
  );
}

function Instructions({ criteria, bounds, onStart }) {
  return (
    <div className="card" id="instructions">
      <h2>Instructions</h2>
      <p>Each page shows two short conversations, <strong>Conversation 1</strong> and <strong>Conversation 2</strong>.
        In each, a <em>Speaker</em> tells a <em>Listener</em> about something that happened to them. Read both whole
        conversations, then answer each question by picking one of the two listeners, and say in a few words
        ({bounds.min} characters or more) why:</p>
      <dl>
        {criteria.map((c) => (
          <div key={c.key}><dt>{c.label}</dt><dd>{c.question}{c.definition ? ` ${c.definition}` : ""}</dd></div>
        ))}
      </dl>
      <h3>A worked example</h3>
      <Conversations left={{ prompt: {}, turns: EXAMPLE.left.map((t, i) => ({ ...t, index: i })) }}
                     right={{ prompt: {}, turns: EXAMPLE.right.map((t, i) => ({ ...t, index: i })) }} />
      <p className="hint">Listener 2 recognises the loss and the speaker's feelings; listener 1 asks about a detail and
        ignores them. For a question about feelings pick Conversation 2, and write for instance "It acknowledged
        how sad she felt." There is no tie: when the two seem close, pick the one you lean to. Which conversation
        is shown first says nothing about it.</p>
      <p className="hint">Keyboard: press 1 or 2 to pick for the highlighted question, Tab to reach its text box,
        Enter to go on.</p>
      <div className="nav"><span /><button id="start" onClick={onStart} autoFocus>Start</button></div>
    </div>
  );
}

export default function AcuteTask({ assignment, onSubmit, onDone, rater = null, submissionId = null }) {
  const { items, criteria, study } = assignment;
  const bounds = assignment.justification || { min: 10, max: 500 };
  const isAnswer = useCallback((v) => Boolean(v) && typeof v === "object"
    && (v.choice === undefined || SIDES.some((s) => s.key === v.choice))
    && (v.justification === undefined || (typeof v.justification === "string" && v.justification.length <= bounds.max)),
  [bounds.max]);
  const isComplete = useCallback((v) => Boolean(v) && SIDES.some((s) => s.key === v.choice)
    && trimmedLength(v.justification) >= bounds.min && v.justification.length <= bounds.max, [bounds]);
  const answerForKey = useCallback((key) => {
    const side = SIDES.find((s) => s.keyboard === key);
    return side ? (old) => ({ ...(old || {}), choice: side.key }) : undefined;
  }, []);
  const toBody = useCallback((answers, seconds) => ({
    comparisons: items.map((item, i) => ({
      item_id: item.item_id,
      choices: Object.fromEntries(criteria.map((c) => [c.key, answers[i][c.key].choice])),
      justifications: Object.fromEntries(criteria.map((c) => [c.key, answers[i][c.key].justification])),
      seconds: seconds[i],
    })),
  }), [items, criteria]);
  const task = useTask({ assignment, rater, submissionId, isAnswer, answerForKey, toBody, onSubmit, isComplete });
  const { phase, index, focus } = task;
  useItemView(phase, index, focus);

  const item = items[index];
  return (
    <main data-kind="acute">
      <TaskHeader study={study} fallbackTitle="Compare two conversations" preview={task.preview} />
      {phase === "consent" && (
        <Consent task="compare short conversations" answers="answers" onAccept={task.acceptConsent}
                 onDecline={task.declineConsent} />
      )}
      {phase === "declined" && <Declined />}
      {phase === "instructions" && <Instructions criteria={criteria} bounds={bounds} onStart={task.start} />}
      {(phase === "rating" || phase === "review") && (
        <Progress done={task.answered} total={items.length} noun="pairs compared" onReopen={task.reopen} />
      )}
      {phase === "rating" && (
        <section id="item" data-item-id={item.item_id} data-position={item.position} aria-labelledby="item-heading">
          <ItemHeading>Pair {index + 1} of {items.length}</ItemHeading>
          <Conversations left={item.left} right={item.right} />
          <div className="card">
            {criteria.map((c, q) => (
              <AcuteQuestion key={c.key} index={q} criterion={c} value={task.answers[index][c.key]} bounds={bounds}
                             focused={q === focus} onFocus={() => task.setFocus(q)}
                             onPick={(side) => { task.setFocus(q); task.choose(c.key, (old) => ({ ...(old || {}), choice: side })); }}
                             onWhy={(text) => task.choose(c.key, (old) => ({ ...(old || {}), justification: text }))} />
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
        <Review complete={task.allDone} completeText="Every pair is compared."
                incompleteText="Some pairs still need a pick or a reason." comment={task.comment}
                onComment={task.setComment} status={task.status} onSubmit={task.submit}
                onBack={task.backFromReview} />
      )}
      {phase === "submitted" && <Submitted what="answers" more="Compare more" onDone={onDone} receipt={task.status.receipt} />}
    </main>
  );
}
