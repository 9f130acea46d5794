// Parts both task pages use (Likert and pairwise): a conversation turn, the consent step, the progress bar, the
// review-and-submit step and the thank-you. Every text from models or people is rendered as React text, never as
// HTML.
import { useState } from "react";

export function Turn({ role, text, extraClass = "", label }) {
  return (
    <div className={`turn ${role} ${extraClass}`} data-role={role}>
      <span className="who">{label || (role === "speaker" ? "Speaker" : "Listener")}</span>
      {text}
    </div>
  );
}

export function Consent({ onAccept, task = "rate short replies", answers = "ratings" }) {
  const [declined, setDeclined] = useState(false);
  if (declined) {
    return <div className="card note"><p>No problem: you can close this page. Nothing was recorded.</p></div>;
  }
  return (
    <div className="card note" id="consent">
      <h2>Before you start</h2>
      <p><strong>Content note.</strong> The conversations you will read are about personal experiences people
        shared: some are about painful events such as loss, illness, fear or conflict. If you would rather not
        read about such topics, you are free to stop at any time.</p>
      <p>You will {task} written by computer programs or by people. Your {answers} are stored under a
        pseudonym and used only for research on dialogue systems.</p>
      <div className="nav">
        <button className="secondary" onClick={() => setDeclined(true)}>I would rather not</button>
        <button id="consent-accept" onClick={onAccept} autoFocus>I agree, continue</button>
      </div>
    </div>
  );
}

export function Progress({ done, total, noun }) {
  const progress = Math.round((100 * done) / total);
  return (
    <>
      <div className="hint" id="progress-text">{done} of {total} {noun}</div>
      <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={progress}>
        <div style={{ width: `${progress}%` }} />
      </div>
    </>
  );
}

// The last step: an optional comment and Submit. The button is disabled while a submission is on its way, and a
// failure says why and lets the rater try again (the host adapter resends with the same submission id, which the
// server recognises, so nothing is stored twice).
export function Review({ complete, completeText, incompleteText, comment, onComment, status, onSubmit, onBack }) {
  return (
    <section className="card" id="review">
      <h2>Almost done</h2>
      <p>{complete ? completeText : incompleteText}</p>
      <label htmlFor="comment">Anything you want to tell us? (optional)</label>
      <textarea id="comment" maxLength={2000} value={comment} onChange={(e) => onComment(e.target.value)} />
      {status.state === "failed" && <p className="error" id="submit-error">Could not submit: {status.message}. Please try again.</p>}
      <div className="nav">
        <button className="secondary" onClick={onBack}>Back</button>
        <button id="submit" disabled={!complete || status.state === "sending"} onClick={onSubmit}>
          {status.state === "sending" ? "Submitting..." : "Submit"}
        </button>
      </div>
    </section>
  );
}

export function Submitted({ what, more = "Rate more", onDone }) {
  return (
    <section className="card" id="submitted">
      <h2 className="done">Thank you! Your {what} are saved.</h2>
      {onDone ? <button id="more" onClick={onDone}>{more}</button> : null}
    </section>
  );
}
