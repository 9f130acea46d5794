// What the page keeps in the rater's browser (localStorage), so a reload or a closed tab loses nothing:
// - a draft per assignment (the answers, the comment, the comment on each item, the seconds per item, where she
//   was and in which phase), keyed by study, assignment id and the page's submission id, and removed after a successful submit;
// - that she has read the consent and instructions of a study, keyed by study and rater, so the next assignment
//   starts with the first item.
// Storage may be missing, full or hold anything (another version of the page, a hand edit): every read is checked
// and a bad value counts as none, and no write ever breaks the page.

const PREFIX = "empeval";
const PHASES = ["consent", "instructions", "rating", "review"];

function read(key) {
  try {
    const text = window.localStorage.getItem(key);
    return text === null ? null : JSON.parse(text);
  } catch (error) {
    return null; // no storage, or not JSON
  }
}

function write(key, value) {
  try {
    window.localStorage.setItem(key, JSON.stringify(value));
  } catch (error) {
    // storage disabled or full: the page works on, without a draft
  }
}

function remove(key) {
  try {
    window.localStorage.removeItem(key);
  } catch (error) {
    // storage disabled
  }
}

function keysStartingWith(prefix) {
  try {
    return Object.keys(window.localStorage).filter((key) => key.startsWith(prefix));
  } catch (error) {
    return [];
  }
}

/** The storage keys of an assignment's draft and of its study's consent; null where the page cannot tell whose
 * work it is (no submission id, no rater), and both null for a preview, which records nothing, not even here. */
export function storageKeys(assignment, rater, submissionId) {
  const study = assignment.study && assignment.study.name;
  if (assignment.preview === true || !study) return { draft: null, consent: null, study: null };
  return {
    study: `${PREFIX}-draft:${study}:`,
    draft: submissionId ? `${PREFIX}-draft:${study}:${assignment.assignment_id}:${submissionId}` : null,
    consent: rater ? `${PREFIX}-consent:${study}:${rater}` : null,
  };
}

/** The draft saved under `key` if it fits this assignment: one answer object per item holding only the study's
 * criteria with answers `isAnswer` accepts, a known phase, an item index in range; else null. */
export function readDraft(key, items, criteria, isAnswer) {
  const draft = key && read(key);
  if (!draft || typeof draft !== "object") return null;
  const { phase, index, focus, answers, comment, itemComments, seconds, resume } = draft;
  if (!PHASES.includes(phase) || !Array.isArray(answers) || answers.length !== items.length) return null;
  if (!Number.isInteger(index) || index < 0 || index >= items.length) return null;
  const keys = criteria.map((c) => c.key);
  const kept = answers.map((answer) => {
    const clean = {};
    if (answer && typeof answer === "object") {
      for (const k of keys) if (isAnswer(answer[k])) clean[k] = answer[k];
    }
    return clean;
  });
  const times = Array.isArray(seconds) && seconds.length === items.length
    && seconds.every((s) => typeof s === "number" && Number.isFinite(s) && s >= 0) ? seconds : items.map(() => 0);
  return {
    phase,
    index,
    focus: Number.isInteger(focus) && focus >= 0 && focus < criteria.length ? focus : 0,
    answers: kept,
    comment: typeof comment === "string" ? comment.slice(0, 2000) : "",
    // One text per item (a draft from before item comments, or a bad one, has none).
    itemComments: items.map((_, i) => (Array.isArray(itemComments) && itemComments.length === items.length
      && typeof itemComments[i] === "string" ? itemComments[i].slice(0, 2000) : "")),
    seconds: times,
    resume: PHASES.includes(resume) ? resume : null,
  };
}

/** Keeps `draft` under `key`, and drops the study's drafts of other assignments (expired or submitted elsewhere:
 * this browser works on one assignment of a study at a time). */
export function saveDraft(keys, draft) {
  if (!keys.draft) return;
  write(keys.draft, draft);
  for (const key of keysStartingWith(keys.study)) if (key !== keys.draft) remove(key);
}

export function dropDraft(keys) {
  if (keys.draft) remove(keys.draft);
}

/** Whether the rater has been through this study's consent and instructions in this browser. */
export function hasConsented(keys) {
  return Boolean(keys.consent && read(keys.consent));
}

export function rememberConsent(keys) {
  if (keys.consent) write(keys.consent, { at: new Date().toISOString() });
}

export function forgetConsent(keys) {
  if (keys.consent) remove(keys.consent);
}
