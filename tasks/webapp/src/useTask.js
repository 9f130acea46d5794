// The state both task pages share (Likert and pairwise): the phase (consent, instructions, rating, review,
// submitted, or declined), the item on screen and its highlighted question, one answer object per item, the
// comment, the comment on each item (a study with item comments: ItemComment.jsx), the seconds spent on each
// item, the keyboard (an answer key answers the highlighted question, Enter goes on) and the submit step. Everything but the submit status is kept as a draft in the browser (drafts.js)
// and restored on reload; a rater who has been through a study's consent and instructions starts her next
// assignment with the first item. A preview assignment (the researcher trying the page) keeps nothing and
// submits nothing.
import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import {
  dropDraft, forgetConsent, hasConsented, readDraft, rememberConsent, saveDraft, storageKeys,
} from "./drafts.js";

const given = (value) => value !== undefined;

/**
 * assignment: the payload; rater / submissionId: who works on it and the page's id of its submission (they key
 * the stored draft and consent); isAnswer(value): whether a stored value is an answer this page offers;
 * answerForKey(key): the answer a key press gives (or a function of the question's answer so far), or undefined;
 * toBody(answers, seconds, itemComments): the submit body's answers (itemComments: the text under each item);
 * onSubmit(body): sends it and resolves to the server's receipt; isComplete(value): whether a question's answer is finished (by default: given at all; an answer made of
 * parts, such as a side and a justification, says when it is whole).
 */
export function useTask({ assignment, rater, submissionId, isAnswer, answerForKey, toBody, onSubmit,
                          isComplete = given }) {
  const { items, criteria } = assignment;
  const preview = assignment.preview === true;
  const keys = useMemo(() => storageKeys(assignment, rater, submissionId), [assignment, rater, submissionId]);
  const [restored] = useState(() => readDraft(keys.draft, items, criteria, isAnswer));
  const [phase, setPhase] = useState(() => (restored ? restored.phase : hasConsented(keys) ? "rating" : "consent"));
  const [resume, setResume] = useState(restored ? restored.resume : null);
  const [index, setIndex] = useState(restored ? restored.index : 0);
  const [focus, setFocus] = useState(restored ? restored.focus : 0);
  const [answers, setAnswers] = useState(() => (restored ? restored.answers : items.map(() => ({}))));
  const [comment, setComment] = useState(restored ? restored.comment : "");
  const [itemComments, setItemComments] = useState(() => (restored ? restored.itemComments : items.map(() => "")));
  const [status, setStatus] = useState({ state: "idle" });
  const seconds = useRef(restored ? [...restored.seconds] : items.map(() => 0));
  const shownAt = useRef(null);

  // Time on each item: accumulated while it is on screen (going back and forth adds up).
  useEffect(() => {
    if (phase !== "rating") return undefined;
    shownAt.current = performance.now();
    const current = index;
    return () => {
      seconds.current[current] += (performance.now() - shownAt.current) / 1000;
      shownAt.current = null;
    };
  }, [phase, index]);

  const draft = useCallback(() => {
    const running = phase === "rating" && shownAt.current !== null ? (performance.now() - shownAt.current) / 1000 : 0;
    const times = seconds.current.map((s, i) => Math.round((i === index ? s + running : s) * 10) / 10);
    return { phase, resume, index, focus, answers, comment, itemComments, seconds: times };
  }, [phase, resume, index, focus, answers, comment, itemComments]);

  // The draft follows every change, and once more as the page goes away (a reload keeps the running item's time).
  // Nothing is kept before the consent is given (a reload shows it again, or, when it was opened again, the page
  // resumes where the last draft was), nor once the work is sent or declined.
  useEffect(() => {
    if (phase === "consent" || phase === "submitted" || phase === "declined") return undefined;
    saveDraft(keys, draft());
    const onHide = () => saveDraft(keys, draft());
    window.addEventListener("pagehide", onHide);
    return () => window.removeEventListener("pagehide", onHide);
  }, [keys, phase, draft]);

  const itemDone = useCallback((i) => criteria.every((c) => isComplete(answers[i][c.key])), [answers, criteria,
    isComplete]);
  const answered = useMemo(() => items.filter((_, i) => itemDone(i)).length, [items, itemDone]);
  const allDone = answered === items.length;

  // `value` may be a function of the question's answer so far (an answer made of parts changes one of them).
  const choose = useCallback((criterionKey, value) => {
    setAnswers((old) => old.map((a, i) => (i === index
      ? { ...a, [criterionKey]: typeof value === "function" ? value(a[criterionKey]) : value } : a)));
  }, [index]);

  // The comment under the item on screen.
  const setItemComment = useCallback((text) => {
    setItemComments((old) => old.map((c, i) => (i === index ? text : c)));
  }, [index]);

  // An item opens with its first unanswered question highlighted (the first if all are answered).
  const goTo = useCallback((i) => {
    setIndex(i);
    setFocus(Math.max(0, criteria.findIndex((c) => !isComplete(answers[i][c.key]))));
  }, [criteria, answers, isComplete]);
  const next = useCallback(() => {
    if (index < items.length - 1) goTo(index + 1); else setPhase("review");
  }, [index, items.length, goTo]);

  const goOn = useCallback(() => {
    if (phase !== "rating") return;
    if (!isComplete(answers[index][criteria[focus].key])) return;
    if (focus < criteria.length - 1) { setFocus(focus + 1); return; }
    if (!itemDone(index)) { setFocus(criteria.findIndex((c) => !isComplete(answers[index][c.key]))); return; }
    next();
  }, [phase, criteria, focus, answers, index, itemDone, next, isComplete]);

  useEffect(() => {
    function onKey(event) {
      const target = event.target.tagName;
      if (phase !== "rating" || target === "TEXTAREA" || event.altKey || event.ctrlKey || event.metaKey) return;
      const value = answerForKey(event.key);
      if (value !== undefined) {
        event.preventDefault();
        choose(criteria[focus].key, value);
      } else if (event.key === "Enter" && target !== "BUTTON" && target !== "A") {
        event.preventDefault();
        goOn();
      }
    }
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [phase, focus, criteria, answerForKey, choose, goOn]);

  const acceptConsent = useCallback(() => setPhase("instructions"), []);
  // Declining ends the page and leaves nothing behind in the browser either.
  const declineConsent = useCallback(() => { dropDraft(keys); forgetConsent(keys); setPhase("declined"); }, [keys]);
  const start = useCallback(() => {
    rememberConsent(keys);
    setPhase(resume || "rating");
    setResume(null);
  }, [keys, resume]);
  // The link to read the consent and instructions again: back to where the rater was once she presses Start.
  const reopen = useCallback(() => { setResume(phase); setPhase("consent"); }, [phase]);
  const review = useCallback(() => setPhase("review"), []);
  const backFromReview = useCallback(() => { setPhase("rating"); setIndex(items.length - 1); }, [items.length]);

  const submit = useCallback(async () => {
    if (!allDone || status.state === "sending") return;
    if (preview) { setStatus({ state: "preview" }); return; }
    setStatus({ state: "sending" });
    try {
      const receipt = await onSubmit({ ...toBody(answers, draft().seconds, itemComments),
        comment: comment.trim() || undefined });
      dropDraft(keys);
      setStatus({ state: "sent", receipt });
      setPhase("submitted");
    } catch (error) {
      setStatus({ state: "failed", message: String(error.message || error) });
    }
  }, [allDone, status.state, preview, onSubmit, toBody, answers, draft, comment, itemComments, keys]);

  return {
    phase, index, focus, setFocus, answers, choose, comment, setComment, itemComments, setItemComment, status, preview, answered, allDone,
    itemDone, goTo, next, review, acceptConsent, declineConsent, start, reopen, backFromReview, submit,
  };
}
