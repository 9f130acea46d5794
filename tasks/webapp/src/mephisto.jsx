// Mephisto host adapter: the task page is served by Mephisto's router (StaticReactBlueprint). The unit's
// initialTaskData is {"payload": <the same shape as the local host's assignment>}; the ratings (or, on a pairwise
// page, the judgments) go back with Mephisto's submit call and are stored as the agent's outputs. An onboarding agent gets the short
// qualification test instead (its questions come without their answers; the runner checks them).
import { useMemo, useState } from "react";
import { createRoot } from "react-dom/client";
import { postCompleteTask, useMephistoTask } from "mephisto-task";
import TaskApp from "./TaskApp.jsx";
import css from "./task.css";

const style = document.createElement("style");
style.textContent = css;
document.head.appendChild(style);
// Mephisto's router brings its own index.html, which names no language: screen readers need it to read the page.
document.documentElement.lang = document.documentElement.lang || "en";

function Onboarding({ data, onSubmit }) {
  const [answers, setAnswers] = useState({});
  const [sent, setSent] = useState(false);
  const questions = (data && data.questions) || [];
  const complete = questions.every((q) => answers[q.key]);
  return (
    <main id="onboarding">
      <h1>A short qualification test</h1>
      <p className="hint">{data && data.instructions}</p>
      {questions.map((q, i) => (
        <fieldset key={q.key} className="card question" data-question={q.key}>
          <legend>Conversation {i + 1}</legend>
          <div className="turn speaker"><span className="who">Speaker</span>{q.context}</div>
          <div className="scale" role="radiogroup" aria-label={`Conversation ${i + 1}`}>
            {Object.entries(q.replies).map(([label, text]) => (
              <label key={label} className={answers[q.key] === label ? "chosen" : ""}>
                <input type="radio" name={q.key} value={label} checked={answers[q.key] === label}
                       onChange={() => setAnswers({ ...answers, [q.key]: label })} />
                Reply {label}: {text}
              </label>
            ))}
          </div>
        </fieldset>
      ))}
      <div className="nav"><span />
        <button id="onboarding-submit" disabled={!complete || sent}
                onClick={() => { setSent(true); onSubmit({ answers }); }}>Submit</button>
      </div>
    </main>
  );
}

// Mephisto blocks a worker with a reason code and a stock sentence; "null_agent_id" is what a worker who failed
// the qualification test (or was refused a unit) meets, so she is told what happened and what to do.
function Blocked({ reason, explanation }) {
  const failedOnboarding = reason === "null_agent_id";
  return (
    <main id="blocked" data-reason={reason}>
      <h1>{failedOnboarding ? "This task is not available to you" : "This task cannot be shown"}</h1>
      {failedOnboarding ? (
        <p className="error-advice">Your answers to the short qualification test did not match what the task needs,
          or there is no work left for you. Please return the task so that it goes to someone else; thank you for
          your time.</p>
      ) : null}
      <p className={failedOnboarding ? "hint" : "error"}>{explanation || reason}</p>
    </main>
  );
}

function MephistoHost() {
  const { isLoading, isPreview, isOnboarding, initialTaskData, blockedReason, blockedExplanation, agentId,
          mephistoWorkerId, providerWorkerId, handleSubmit, taskConfig } = useMephistoTask();
  // A chat unit's page calls the empeval server live (payload.live: its address and the unit's token) and says
  // which worker is at work as the platform names her to the page. Made once, so the page keeps its identity.
  const withWorker = useMemo(() => {
    const payload = initialTaskData ? initialTaskData.payload : null;
    return payload && payload.live ? { ...payload, live: { ...payload.live, worker: providerWorkerId } } : payload;
  }, [initialTaskData, providerWorkerId]);
  if (blockedReason) return <Blocked reason={blockedReason} explanation={blockedExplanation} />;
  if (isPreview) {
    // The job's own title and description (the runner passes them as task_config): a pairwise job asks for A/B
    // choices, not ratings. The fixed text is for a runner that passes none.
    const title = (taskConfig && taskConfig.preview_title) || "Rate responses in conversations";
    const text = (taskConfig && taskConfig.preview_text) || ("Read short conversations about personal experiences "
      + "and rate one reply in each for empathy, relevance and fluency on a 1-5 scale.");
    return <main id="preview"><h1>{title}</h1><p>{text} Accept the task to begin.</p></main>;
  }
  if (isLoading || !initialTaskData) return <main><p id="loading">Loading...</p></main>;
  if (isOnboarding) return <Onboarding data={initialTaskData} onSubmit={handleSubmit} />;
  const assignment = withWorker;
  // postCompleteTask returns a promise, so the page says "saved" only once Mephisto has the ratings.
  const onSubmit = (ratings) => postCompleteTask(agentId, ratings);
  return <TaskApp assignment={assignment} onSubmit={onSubmit} rater={mephistoWorkerId} submissionId={agentId} />;
}

createRoot(document.getElementById("app")).render(<MephistoHost />);
