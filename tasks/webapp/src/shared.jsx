// Parts both task pages use (Likert and pairwise): the page's header (title, preview banner), a conversation turn, the consent step, the progress bar, the review-and-submit step and the end
// page, and the context the page's host lends them (HostContext). Every text from models or people is rendered as React text, never as HTML.
import { createContext, useContext, useEffect, useState } from "react";

// What the page's host (local.jsx) lends the parts below: `consented`, a ref set when the rater accepted the consent
// before her assignment was claimed (the task page's own consent step then goes straight on to the instructions,
// once), and `decline`, which tells the server she declined (her assignment, if any, goes back to the pool) and
// resolves to the ids released. A host without them (Mephisto's) shows the consent and its answer as they are.
export const HostContext = createContext({});

export function TaskHeader({ study, fallbackTitle, preview }) {
  return (
    <>
      <h1>{study && study.title ? study.title : fallbackTitle}</h1>
      {preview && (
        <p className="preview-banner" id="preview-banner" role="status">
          Preview: nothing you do here is recorded
        </p>
      )}
      {study && study.instructions ? <p className="hint">{study.instructions}</p> : null}
    </>
  );
}

// `reply` marks the reply to rate: the page scrolls so that it is on screen (itemView.js).
export function Turn({ role, text, extraClass = "", label, reply = false }) {
  return (
    <div className={`turn ${role} ${extraClass}`} data-role={role} data-reply={reply ? "true" : undefined}>
      <span className="who">{label || (role === "speaker" ? "Speaker" : "Listener")}</span>
      {text}
    </div>
  );
}

export function Consent({ onAccept, onDecline, task = "rate short replies", answers = "ratings" }) {
  const { consented } = useContext(HostContext);
  const given = Boolean(consented && consented.current);
  useEffect(() => {
    if (!given) return;
    consented.current = false; // once: "Read the consent and instructions again" shows it
    onAccept();
  }, [given, consented, onAccept]);
  if (given) return null;
  return (
    <section className="card note" id="consent" aria-labelledby="consent-title">
      <h2 id="consent-title">Before you start</h2>
      <p><strong>Content note.</strong> The conversations you will read are about personal experiences people
        shared: some are about painful events such as loss, illness, fear or conflict. If you would rather not
        read about such topics, you are free to stop at any time.</p>
      <p>You will {task} written by computer programs or by people. Your {answers} are stored under a
        pseudonym and used only for research on dialogue systems.</p>
      <div className="nav">
        <button className="secondary" id="consent-decline" onClick={onDecline}>I would rather not</button>
        <button id="consent-accept" onClick={onAccept} autoFocus>I agree, continue</button>
      </div>
    </section>
  );
}

// What the rater reads after declining. `nothingHeld`: she declined before anything was claimed for her (local.jsx
// asks for consent first), so there is nothing to give back. Else, with a host that can tell the server (local.jsx),
// only what the server answered: whatever she held went back to the pool, or she held nothing; until it answers,
// that it is on its way, and if it cannot be reached, that the assignment stays hers until it expires.
export function Declined({ nothingHeld = false }) {
  const { decline } = useContext(HostContext);
  const [outcome, setOutcome] = useState(nothingHeld ? { state: "done", released: 0 }
    : decline ? { state: "sending" } : { state: "none" });
  useEffect(() => {
    if (nothingHeld || !decline) return undefined;
    let live = true;
    decline().then((released) => live && setOutcome({ state: "done", released: released.length }))
      .catch((error) => live && setOutcome({ state: "failed", message: String(error.message || error) }));
    return () => { live = false; };
  }, [decline, nothingHeld]);
  let text = "No problem: you can close this page. None of your answers were recorded.";
  if (outcome.state === "sending") text = "No problem: telling the study you declined...";
  if (outcome.state === "done") {
    text = outcome.released
      ? "No problem: the work you were given went back to the study, and nothing you did was kept. You can close "
        + "this page."
      : "No problem: you can close this page. Nothing was recorded, and no work was set aside for you.";
  }
  return (
    <div className="card note" id="declined" data-state={outcome.state} role="status">
      <p>{text}</p>
      {outcome.state === "failed" && (
        <p className="error" id="decline-error">The study could not be told ({outcome.message}): nothing you answered
          was recorded, but the work you were given stays reserved for you until it expires. Reload the page to try
          again.</p>
      )}
    </div>
  );
}

// The text above the bar is a polite live region: a screen reader announces each change without interrupting.
// Beside it, the link that opens the consent and instructions again.
export function Progress({ done, total, noun, onReopen }) {
  const progress = Math.round((100 * done) / total);
  return (
    <>
      <div className="status-row">
        <div className="hint" id="progress-text" aria-live="polite">{done} of {total} {noun}</div>
        <button type="button" className="link" id="reopen-instructions" onClick={onReopen}>
          Read the consent and instructions again
        </button>
      </div>
      <div className="progress" role="progressbar" aria-labelledby="progress-text" aria-valuemin={0}
           aria-valuemax={100} aria-valuenow={progress} aria-valuetext={`${done} of ${total} ${noun}`}>
        <div style={{ width: `${progress}%` }} />
      </div>
    </>
  );
}

/** The points of a rating scale as choices, [{value, label}], from `scale` ({min, max, labels}): a point without a
 * label of its own is labelled with its number. */
export function scaleChoices(scale) {
  const choices = [];
  for (let p = scale.min; p <= scale.max; p++) {
    const label = scale.labels && scale.labels[p - scale.min];
    choices.push({ value: p, label: label || String(p) });
  }
  return choices;
}

// A rating scale (`choices` whose values are its points) on one row of options of equal width. On a phone
// (task.css) each option shows its number only and the labels of the scale's two ends stand above the row, which
// are left out of the accessibility tree: each option keeps its whole label as its text and its accessible name.
export function PointScale({ name, choices, value, onChoose, label, describedBy, disabled = false }) {
  const first = choices[0];
  const last = choices[choices.length - 1];
  const ends = first && last && (first.label !== String(first.value) || last.label !== String(last.value));
  return (
    <>
      {ends && (
        <div className="scale-ends" aria-hidden="true">
          <span className="scale-end">{first.label}</span><span className="scale-end">{last.label}</span>
        </div>
      )}
      <div className="scale points" role="radiogroup" aria-label={label} aria-describedby={describedBy}>
        {choices.map((choice) => (
          <label key={String(choice.value)} className={value === choice.value ? "chosen" : ""}
                 data-point={String(choice.value)}>
            <input type="radio" name={name} value={String(choice.value)} checked={value === choice.value}
                   disabled={disabled} onChange={() => onChoose(choice.value)} />
            <span className="point-label">{choice.label}</span>
          </label>
        ))}
      </div>
    </>
  );
}

// The heading of the item on screen ("Response 2 of 11"): it takes the keyboard focus when a new item opens.
export function ItemHeading({ children }) {
  return <h2 className="item-heading" id="item-heading" tabIndex={-1}>{children}</h2>;
}

// The last step: an optional comment and Submit. The button is disabled while a submission is on its way, and a
// failure says why and lets the rater try again (the host adapter resends with the same submission id, which the
// server recognises, so nothing is stored twice). In a preview Submit sends nothing and says so.
export function Review({ complete, completeText, incompleteText, comment, onComment, status, onSubmit, onBack }) {
  return (
    <section className="card" id="review" aria-labelledby="review-title">
      <h2 id="review-title">Almost done</h2>
      <p>{complete ? completeText : incompleteText}</p>
      <label htmlFor="comment">Anything you want to tell us? (optional)</label>
      <textarea id="comment" maxLength={2000} value={comment} onChange={(e) => onComment(e.target.value)} />
      {status.state === "failed" && (
        <p className="error" id="submit-error" role="alert">Could not submit: {status.message}. Please try again.</p>
      )}
      {status.state === "preview" && <p className="preview-banner" id="preview-not-submitted" role="status">Preview: not submitted</p>}
      <div className="nav">
        <button className="secondary" onClick={onBack}>Back</button>
        <button id="submit" disabled={!complete || status.state === "sending"} onClick={onSubmit}>
          {status.state === "sending" ? "Submitting..." : "Submit"}
        </button>
      </div>
    </section>
  );
}

/** `url` if it is an http(s) address, else null: a completion link never runs script. */
function webAddress(url) {
  try {
    const parsed = new URL(url);
    return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
  } catch (error) {
    return null;
  }
}

const REDIRECT_SECONDS = 3;

// A submit receipt may carry {"completion": {"code", "url"}} (a Prolific study): the code is shown large, with a
// link back to the platform, which the page also follows by itself after a few seconds. The qualification's
// thank-you page (Qualification.jsx) shows the code a participant who did not pass is given the same way.
export function Completion({ completion }) {
  const code = typeof completion.code === "string" ? completion.code : "";
  const url = webAddress(completion.url);
  useEffect(() => {
    if (!url) return undefined;
    const timer = window.setTimeout(() => window.location.assign(url), REDIRECT_SECONDS * 1000);
    return () => window.clearTimeout(timer);
  }, [url]);
  return (
    <div id="completion">
      {code && <p>Your completion code: <strong className="completion-code" id="completion-code">{code}</strong></p>}
      {url ? (
        <>
          <p><a className="button" id="completion-link" href={url}>Return to Prolific</a></p>
          <p className="hint" role="status">You will be taken back to Prolific in {REDIRECT_SECONDS} seconds.</p>
        </>
      ) : <p className="hint">Enter this code where your study asks for it.</p>}
    </div>
  );
}

export function Submitted({ what, more = "Rate more", onDone, receipt }) {
  const completion = receipt && typeof receipt.completion === "object" && receipt.completion;
  return (
    <section className="card" id="submitted" aria-labelledby="submitted-title">
      <h2 className="done" id="submitted-title">Thank you! Your {what} are saved.</h2>
      {completion ? <Completion completion={completion} /> : null}
      {onDone && !completion ? <button id="more" onClick={onDone}>{more}</button> : null}
    </section>
  );
}
