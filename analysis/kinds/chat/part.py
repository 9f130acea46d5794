"""The chat kind's part in the analysis: its export tables (analysis.kinds.chat.schema) and its report, in this
order: a summary; the conversation means per system (a table and a figure); the unpaired tests of each pair of
systems; the mixed model with rater and prompt intercepts; the per-turn annotation rates; conversation length,
latency and model failures; the controls; a methods paragraph with the study's numbers.

The report reads the conversation ratings (``ReportRequest.table``, the ``chat`` table) and, when given, the
further tables in ``ReportRequest.tables`` (``conversations``, ``turns``, ``turn_annotations``); a section whose
table is missing (a report from an export file of the chat table alone) says which one in a line. What it reads of
``ReportRequest.meta`` (each optional): ``criteria`` (keys, or {"key": ...}, in the study's order), ``scale``
([min, max] or {"min", "max"}; else ``chat.scale_labels`` gives 1..their number; else 1-5), ``turn_questions``
(keys or {"key", "label"}; also under ``chat``), ``min_utterances`` and ``max_utterances`` (also under ``chat``),
``k`` or ``chat.conversations_per_system``, ``sessions_per_rater``.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from empeval.analysis.kinds import AnalysisKind, LinkedStudy, ReportRefused, ReportRequest, linked_sections, register
from empeval.analysis.kinds.chat.schema import CHAT_COLUMNS, CHAT_SCHEMAS, ChatExportError
from empeval.analysis.report.document import Block, Heading, Image, Paragraph, Table
from empeval.analysis.report.sections import Report, Section

#: The columns that say an export file holds a chat study's conversation ratings (the primary table).
CHAT_MARKERS = frozenset({"conversation_id", "criterion", "score"})
#: The report's CSV tables: file stem -> ChatTables attribute.
CHAT_REPORT_TABLES = {"chat_means": "means", "chat_pairwise_tests": "tests", "chat_mixed_model": "mixed",
                      "chat_turn_annotation_rates": "rates", "chat_length_latency": "length",
                      "chat_failures": "failures", "chat_controls": "controls", "chat_control_checks": "checks"}
SECTIONS = ("summary", "conversation_means", "pairwise_tests", "mixed_model", "turn_annotations", "length_latency",
            "controls", "methods")
ALPHA = 0.05
CORRECTION = "holm"


def _keys(values: Any) -> list[str]:
    """Keys from a list of keys or of {"key": ...} mappings."""
    return [str(v.get("key")) if isinstance(v, dict) else str(v) for v in (values or ()) if v is not None]


def _setting(meta: dict[str, Any], key: str) -> Any:
    """A chat setting from the meta, top level first, then under ``chat``."""
    if meta.get(key) is not None:
        return meta[key]
    chat = meta.get("chat")
    return chat.get(key) if isinstance(chat, dict) else None


def chat_scale(meta: dict[str, Any]) -> tuple[int, int]:
    """The study's scale from its meta (see the module docstring), 1-5 when it does not say.

    >>> chat_scale({"scale": {"min": 1, "max": 7}}), chat_scale({"chat": {"scale_labels": ["a", "b", "c"]}})
    ((1, 7), (1, 3))
    """
    scale = meta.get("scale")
    if isinstance(scale, dict) and "min" in scale and "max" in scale:
        return int(scale["min"]), int(scale["max"])
    if isinstance(scale, (list, tuple)) and len(scale) == 2:
        return int(scale[0]), int(scale[1])
    labels = _setting(meta, "scale_labels")
    if labels:
        return 1, len(labels)
    from empeval.analysis.kinds.chat.tables import DEFAULT_SCALE

    return DEFAULT_SCALE


def _questions(meta: dict[str, Any]) -> list[str]:
    from empeval.analysis.kinds.chat.schema import NONE_OF_THESE

    keys = _keys(_setting(meta, "turn_questions"))
    return [*keys, NONE_OF_THESE] if keys and NONE_OF_THESE not in keys else keys


def check_scores(ratings: pd.DataFrame, scale: tuple[int, int], *, source: str) -> None:
    """ChatExportError naming the row of the first score off the study's scale."""
    low, high = scale
    off = ((ratings["score"] < low) | (ratings["score"] > high)).to_numpy()
    if off.any():
        row = int(off.argmax())
        raise ChatExportError(f"{source}: row {row + 1}, column 'score' is {ratings['score'].iloc[row]}; the study's "
                              f"scale runs from {low} to {high}")


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def _conversations(table: pd.DataFrame) -> int:
    return int(table[["assignment_id", "conversation_id"]].drop_duplicates().shape[0])


def _late_assignments(ratings: pd.DataFrame, conversations: pd.DataFrame | None) -> set:
    late = set(ratings.loc[ratings["late"], "assignment_id"])
    if conversations is not None:
        late |= set(conversations.loc[conversations["late"], "assignment_id"])
    return late


def _missing(table: str) -> Paragraph:
    return Paragraph(f"Not computed: this report was given no **{table}** table (a report from an export file has "
                     "the **chat** table only).")


def _summary(ratings: pd.DataFrame, conversations: pd.DataFrame | None, done: Any, late: int,
             include_late: bool, exclude_flagged: bool) -> str:
    real = ratings.loc[~ratings["is_control"]]
    controls = ratings.loc[ratings["is_control"]]
    if ratings.empty:
        text = "No conversation was rated."
    else:
        raters = _count(ratings["annotator"].nunique(), "rater")
        text = (f"{len(ratings)} ratings ({ratings['criterion'].nunique()} criteria) of "
                f"{_count(_conversations(ratings), 'conversation')} by {raters}"
                f" in {_count(ratings['assignment_id'].nunique(), 'session')}: "
                f"{_count(_conversations(real), 'conversation')} with {_count(real['system'].nunique(), 'system')} "
                f"({', '.join(sorted(real['system'].unique()))}) over {_count(real['context_id'].nunique(), 'prompt')}")
        text += (f", and {_count(_conversations(controls), 'conversation')} with "
                 f"{_count(controls['system'].nunique(), 'control partner')} "
                 f"({', '.join(sorted(controls['system'].unique()))})." if len(controls) else ".")
    if conversations is not None:
        states = conversations["state"].value_counts()
        text += (f" {_count(len(conversations), 'conversation')} {_were(len(conversations))} claimed: "
                 f"{int(states.get('ended', 0))} ended, "
                 f"{int(states.get('failed', 0))} failed (the model did not answer), {int(states.get('open', 0))} "
                 "still open.")
        if len(conversations) and states.get("failed", 0) == len(conversations):
            text += " **Every conversation failed**: the systems' backend needs looking at before raters talk again."
    if late:
        text += (f" {_count(late, 'session')} {_were(late)} submitted after expiring; "
                 + ("they are included." if include_late else "they are left out of every table."))
    if done.flagged:
        action = "left out of the comparisons" if exclude_flagged else "kept (exclude_flagged off)"
        text += (f" {_count(len(done.flagged), 'rater')} scored a control conversation high and "
                 f"{_were(len(done.flagged))} {action}: {', '.join(done.flagged)}.")
    return text


def means_display(means: pd.DataFrame) -> pd.DataFrame:
    """The conversation means as the report prints them."""
    from empeval.analysis.report.tables import fmt, interval

    return pd.DataFrame({
        "Criterion": means["criterion"],
        "System": [f"{s} (control)" if c else s for s, c in zip(means["system"], means["is_control"], strict=True)],
        "Conversations": means["conversations"].astype(str),
        "Mean": [fmt(v) + interval(lo, hi) for v, lo, hi in zip(means["mean"], means["ci_low"], means["ci_high"],
                                                                strict=True)],
        "SD": [fmt(v) for v in means["sd"]]})


def _means_section(done: Any, figure: bytes | None, latex: bool) -> Section:
    blocks: list[Block] = [Heading("Conversation ratings")]
    if done.means.empty:
        return Section("conversation_means", [*blocks, Paragraph("No conversation with a real system was rated.")],
                       tables={"chat_means": done.means})
    shown = means_display(done.means)
    caption = ("Mean score of each system's conversations per criterion (each conversation rated once by the "
               "rater who had it), with 95% Student t-intervals over conversations; controls left out"
               + (", and the raters the controls flag" if done.excluded else "") + ".")
    blocks.append(Table(shown, caption=caption))
    figures = {}
    if figure is not None:
        blocks.append(Image(figure, "figures/chat_means.png", caption="Conversation means with 95% t-intervals."))
        figures["chat_means"] = figure
    tex = {}
    if latex:
        from empeval.analysis.report.latex import booktabs

        tex["chat_means"] = booktabs(shown, caption="Conversation means (95\\% t-intervals).", label="tab:chat-means")
    return Section("conversation_means", blocks, tables={"chat_means": done.means}, figures=figures, latex=tex)


def _tests_section(done: Any) -> Section:
    from empeval.analysis.report.tables import SIGNIFICANCE_MARK, fmt, fmt_p

    blocks: list[Block] = [Heading("Pairwise comparisons (unpaired)", level=3)]
    systems = sorted(done.ratings.loc[~done.ratings["is_control"], "system"].unique())
    if len(systems) < 2:
        what = f"only one system ({systems[0]}) was" if systems else "no real system was"
        return Section("pairwise_tests", [*blocks, Paragraph(f"No pairwise tests: {what} rated, so there is no pair "
                                                             "of systems to compare.")],
                       tables={"chat_pairwise_tests": done.tests})

    def p_adj(value: float) -> str:
        return fmt_p(value) + (SIGNIFICANCE_MARK if np.isfinite(value) and value < ALPHA else "")

    tests = done.tests
    blocks.append(Table(pd.DataFrame({
        "Criterion": tests["criterion"], "Pair (a vs b)": tests["system_a"] + " vs " + tests["system_b"],
        "n (a/b)": tests["n_a"].astype(str) + "/" + tests["n_b"].astype(str),
        "Δ mean (a−b)": [fmt(v) for v in tests["mean_diff"]],
        "Welch t (df)": [f"{fmt(t)} ({fmt(df, 1)})" if np.isfinite(t) else "n/a"
                         for t, df in zip(tests["welch_t"], tests["welch_df"], strict=True)],
        "p adj. (Welch)": [p_adj(v) for v in tests["p_welch_adj"]],
        "U": [fmt(v, 1) for v in tests["mw_u"]], "p adj. (Mann-Whitney)": [p_adj(v) for v in tests["p_mw_adj"]],
        "r (rank-biserial)": [fmt(v) for v in tests["rank_biserial"]], "Note": tests["note"]}),
        caption=f"Each pair of systems on each criterion, their conversations compared unpaired (different "
                f"conversations): Welch's t-test and the two-sided Mann-Whitney U test, p-values Holm-adjusted over "
                f"all {len(tests)} pairs × criteria, {SIGNIFICANCE_MARK} below {ALPHA:g}; r = 2U/(n_a n_b) − 1, "
                "positive when a's conversations score higher."))
    return Section("pairwise_tests", blocks, tables={"chat_pairwise_tests": tests})


def _mixed_section(done: Any) -> Section:
    from empeval.analysis.report.tables import fmt, fmt_p

    blocks: list[Block] = [Heading("Mixed model: rater and prompt intercepts", level=3)]
    mixed = done.mixed
    if mixed.empty:
        return Section("mixed_model", [*blocks, Paragraph("Not fitted: no conversation with a real system was "
                                                          "rated.")], tables={"chat_mixed_model": mixed})
    fitted = mixed["lmm_p"].notna()
    if not fitted.any():
        reasons = "; ".join(f"{c}: {n}" for c, n in zip(mixed["criterion"], mixed["note"], strict=True))
        return Section("mixed_model", [*blocks, Paragraph(f"Not fitted: {reasons}.")],
                       tables={"chat_mixed_model": mixed})
    blocks.append(Table(pd.DataFrame({
        "Criterion": mixed["criterion"],
        "Pair (a vs b)": [f"{a} vs {b}" if b else a for a, b in zip(mixed["system_a"], mixed["system_b"],
                                                                    strict=True)],
        "Δ (a−b)": [fmt(v) for v in mixed["lmm_diff"]], "SE": [fmt(v) for v in mixed["lmm_se"]],
        "z": [fmt(v) for v in mixed["lmm_z"]], "p": [fmt_p(v) for v in mixed["lmm_p"]],
        "p adj.": [fmt_p(v) for v in mixed["lmm_p_adj"]],
        "Raters / prompts": mixed["raters"].astype(str) + " / " + mixed["prompts"].astype(str),
        "Note": mixed["note"]}),
        caption="Linear mixed model score ~ system + (1 | rater) + (1 | prompt) per criterion: the difference of "
                "two systems' fixed effects, its Wald test, p Holm-adjusted over all pairs × criteria; it allows "
                "for raters who are lenient or strict and prompts that are easy or hard, which the unpaired tests "
                "ignore."))
    return Section("mixed_model", blocks, tables={"chat_mixed_model": mixed})


def _rates_section(done: Any, given: dict[str, pd.DataFrame]) -> Section:
    from empeval.analysis.report.tables import interval

    blocks: list[Block] = [Heading("Per-turn annotations", level=3)]
    if "turn_annotations" not in given or done.rates is None:
        return Section("turn_annotations", [*blocks, _missing("turn_annotations")])
    rates = done.rates
    if rates.empty:
        nothing = Paragraph("No system turn was annotated in a submitted session.")
        return Section("turn_annotations", [*blocks, nothing], tables={"chat_turn_annotation_rates": rates})
    blocks.append(Table(pd.DataFrame({
        "System": [f"{s} (control)" if c else s for s, c in zip(rates["system"], rates["is_control"], strict=True)],
        "Question": rates["question"], "Turns": rates["turns"].astype(str), "Ticked": rates["checked"].astype(str),
        "Rate % (95% CI)": [f"{100 * r:.1f}" + interval(100 * lo, 100 * hi, 1)
                            for r, lo, hi in zip(rates["rate"], rates["ci_low"], rates["ci_high"], strict=True)]}),
        caption="The share of each system's annotated turns on which the raters ticked each question, with Wilson "
                "95% intervals (turns of one conversation are not independent: read the intervals as a lower bound "
                "on the uncertainty)."))
    return Section("turn_annotations", blocks, tables={"chat_turn_annotation_rates": rates})


def _length_section(done: Any, given: dict[str, pd.DataFrame]) -> Section:
    from empeval.analysis.report.tables import fmt, interval

    blocks: list[Block] = [Heading("Length, latency and model failures", level=3)]
    if "conversations" not in given or done.length is None:
        return Section("length_latency", [*blocks, _missing("conversations")])
    length = done.length
    if length.empty:
        return Section("length_latency", [*blocks, Paragraph("No conversation was claimed.")],
                       tables={"chat_length_latency": length})
    blocks.append(Table(pd.DataFrame({
        "System": [f"{s} (control)" if c else s for s, c in zip(length["system"], length["is_control"], strict=True)],
        "Conversations": length["conversations"].astype(str), "Ended": length["ended"].astype(str),
        "Failed": length["failed"].astype(str), "Open": length["open"].astype(str),
        "Failure % (95% CI)": [fmt(100 * r, 1) + interval(100 * lo, 100 * hi, 1) for r, lo, hi in zip(
            length["failure_rate"], length["failure_ci_low"], length["failure_ci_high"], strict=True)],
        "Utterances (mean / median)": [f"{fmt(m, 1)} / {fmt(d, 1)}" for m, d in zip(
            length["utterances_mean"], length["utterances_median"], strict=True)],
        "Latency ms (mean / median / p90)": [f"{fmt(m, 0)} / {fmt(d, 0)} / {fmt(p, 0)}" for m, d, p in zip(
            length["latency_mean_ms"], length["latency_median_ms"], length["latency_p90_ms"], strict=True)]}),
        caption="Per partner: conversations claimed and their state; the failure rate among the finished ones "
                "(ended or failed: the model did not answer), Wilson 95% interval; the length of the ended ones in "
                "utterances, both sides counted; the latency per system turn (median and 90th percentile from the "
                "turns table, when given)."))
    if done.failures is not None and not done.failures.empty:
        failures = done.failures
        blocks.append(Table(pd.DataFrame({"System": failures["system"], "Failure": failures["failure"],
                                          "Conversations": failures["conversations"].astype(str)}),
                            caption="Why the failed conversations failed."))
    return Section("length_latency", blocks, tables={"chat_length_latency": length,
                                                    "chat_failures": done.failures})


def _controls_section(done: Any, scale: tuple[int, int], exclude_flagged: bool) -> Section:
    blocks: list[Block] = [Heading("Controls", level=3)]
    if done.checks.empty:
        return Section("controls", [*blocks, Paragraph("No conversation with a control partner was rated.")],
                       tables={"chat_controls": done.controls, "chat_control_checks": done.checks})
    controls = done.controls
    shown = means_display(controls)
    shown["Control target"] = [("every criterion" if t == "" else t) if c else "" for t, c in zip(
        controls["control_target"], controls["is_control"], strict=True)]
    blocks.append(Table(shown, caption="The control partners' conversation means (known-bad partners) beside the "
                                       "real systems', from every rater (flagged ones included)."))
    checks = done.checks
    blocks.append(Table(pd.DataFrame({
        "Rater": checks["annotator"], "Control": checks["system"],
        "Target": [t or "every criterion" for t in checks["control_target"]], "Scores": checks["scores"],
        "Scored high": ["**yes**" if h else "no" for h in checks["high"]]}),
        caption=f"Each rated control conversation: scored high when at least {scale[1] - 1} (of {scale[1]}) on the "
                "control's target criterion, or on every criterion for a control without one."))
    if done.flagged:
        action = "left out of the comparisons" if exclude_flagged else "kept in the comparisons (exclude_flagged off)"
        blocks.append(Paragraph(f"Flagged: {', '.join(done.flagged)} ({action})."))
    else:
        blocks.append(Paragraph("No rater scored a control conversation high."))
    return Section("controls", blocks, tables={"chat_controls": controls, "chat_control_checks": checks})


def methods_paragraph(ratings: pd.DataFrame, done: Any, *, meta: dict[str, Any], scale: tuple[int, int],
                      questions: list[str], conversations: pd.DataFrame | None, exclude_flagged: bool) -> str:
    """A methods paragraph with the study's numbers: the design (ParlAI's model-chat task on EmpatheticDialogues
    prompts), what was analysed, the tests and corrections, the mixed model, the intervals and the controls."""
    low, high = scale
    criteria = list(dict.fromkeys(done.means["criterion"])) or sorted(ratings["criterion"].unique())
    bounds = (_setting(meta, "min_utterances"), _setting(meta, "max_utterances"))
    sentences = [
        "Raters played the speaker of an EmpatheticDialogues prompt (the emotion and situation of an ED test "
        "dialogue; Rashkin et al. 2019) and talked live with each system, as in ParlAI's model-chat task (Miller "
        "et al. 2017), without being told which system it was, on a different prompt each"
        + (f"; a conversation ran {bounds[0]} to {bounds[1]} utterances, both sides counted" if all(bounds) else "")
        + ". After each of the system's turns the rater ticked what it did (model-chat's per-turn annotations "
        "adapted to empathy" + (f": {', '.join(questions)}" if questions else "") + "), and after each conversation "
        f"rated it on {', '.join(criteria) or 'the study criteria'} on a {low}–{high} scale."]
    real = done.ratings.loc[~done.ratings["is_control"]]
    if real.empty:
        sentences.append("No conversation with a real system was rated, so nothing was compared.")
    else:
        sentences.append(
            f"We analysed {len(real)} ratings of {_count(_conversations(real), 'conversation')} with "
            f"{_count(real['system'].nunique(), 'system')} by {_count(real['annotator'].nunique(), 'rater')} over "
            f"{_count(real['context_id'].nunique(), 'prompt')}; each conversation counts once, and a system's mean "
            "carries a 95% Student t-interval over its conversations.")
    if conversations is not None and len(conversations):
        finished = int(conversations["state"].isin(["ended", "failed"]).sum())
        failed = int((conversations["state"] == "failed").sum())
        sentences.append(f"{failed} of {finished} finished conversations failed because the model did not answer "
                         "(they have no ratings; failure rates carry Wilson intervals).")
    n_tests = int(done.tests["p_welch"].notna().sum() + done.tests["p_mw"].notna().sum())
    if len(done.tests):
        sentences.append(
            "Because the systems were rated on different conversations, each pair of systems was compared per "
            "criterion with Welch's unequal-variance t-test (Welch 1947) and the two-sided Mann-Whitney U test (Mann "
            "& Whitney 1947), with the rank-biserial correlation r = 2U/(n_a n_b) − 1 as its effect size (Kerby "
            f"2014); each test's p-values were adjusted by Holm's method (Holm 1979) over its {len(done.tests)} "
            f"comparisons (pairs × criteria; {n_tests} tests in all), α = {ALPHA:g}.")
    elif not real.empty:
        sentences.append("Only one system was rated: no pair of systems was tested.")
    fitted = done.mixed.loc[done.mixed["lmm_p"].notna()]
    if len(fitted):
        sentences.append(
            "A linear mixed model score ~ system with crossed random intercepts for rater and prompt (Baayen, "
            "Davidson & Bates 2008; variance components by the method of moments of Gao & Owen 2017, refined to "
            "REML on small designs; fixed effects by generalised least squares; Wald tests of each pair, "
            f"Holm-adjusted over its {len(fitted)} pairs × criteria) allows for raters who talk with several systems "
            "and for prompts shared across systems.")
    elif len(done.mixed):
        sentences.append(f"The mixed model with rater and prompt intercepts could not be fitted "
                         f"({done.mixed['note'].iloc[0]}).")
    if done.rates is not None and len(done.rates):
        sentences.append("Per-turn annotation rates carry Wilson score intervals (Wilson 1927).")
    if len(done.checks):
        verb = "left out of the comparisons" if exclude_flagged else "flagged but kept"
        sentences.append(
            f"{_count(len(done.checks), 'conversation')} with control partners (known-bad partners) were interleaved; "
            f"a rater who scored one at least {high - 1} on its target criterion (on every criterion for a control "
            f"without one) was {verb}: {len(done.flagged)} of {ratings['annotator'].nunique()}.")
    return " ".join(sentences)


def chat_report(table: pd.DataFrame, *, name: str, tables: dict[str, pd.DataFrame] | None = None,
                meta: dict[str, Any] | None = None, include_late: bool = True, exclude_flagged: bool = True,
                latex: bool = False) -> Report:
    """The chat report of the conversation ratings `table` and the further `tables` (by name: conversations, turns,
    turn_annotations; each validated) as sections, in the order ``SECTIONS``; each table also a CSV
    (``CHAT_REPORT_TABLES``), the means a figure and, with `latex`, a booktabs table. ChatExportError for a score
    off the study's scale; ReportRefused when there is nothing to report: no ratings and no failed conversation, or
    only late ratings and late ones left out."""
    from empeval.analysis.kinds.chat.schema import validate_table
    from empeval.analysis.kinds.chat.tables import chat_tables

    meta = meta or {}
    ratings = validate_table("chat", table, source=f"study {name!r}, chat table")
    given = {key: validate_table(key, frame, source=f"study {name!r}, {key} table")
             for key, frame in (tables or {}).items() if key in CHAT_SCHEMAS and key != "chat" and frame is not None}
    scale = chat_scale(meta)
    check_scores(ratings, scale, source=f"study {name!r}, chat table")
    ratings, given = _with_display_names(ratings, given, meta)
    conversations = given.get("conversations")
    failed = 0 if conversations is None else int((conversations["state"] == "failed").sum())
    if ratings.empty and not failed:
        raise ReportRefused(f"study {name!r} has no conversation ratings yet: nothing to report. A rater rates a "
                            "conversation when she ends it and her session counts once she submits it; run the "
                            "report once some sessions are in")
    late = len(_late_assignments(ratings, conversations))
    if not include_late and len(ratings) and ratings["late"].all():
        raise ReportRefused(f"all {late} session(s) of {name!r} with ratings were submitted late: nothing to report "
                            "without them (leave out --without-late)")
    criteria = _keys(meta.get("criteria"))
    questions = _questions(meta)
    done = chat_tables(ratings, conversations=conversations, turns=given.get("turns"),
                       turn_annotations=given.get("turn_annotations"), criteria=criteria or None,
                       questions=questions or None, scale=scale, include_late=include_late,
                       exclude_flagged=exclude_flagged, correction=CORRECTION)
    report = Report(title=f"Human evaluation report: {name} (chat, live conversations)", sections=[
        Section("summary", [Paragraph(_summary(ratings, conversations, done, late, include_late, exclude_flagged))])])
    report.add(_means_section(done, _means_figure(done.means), latex), _tests_section(done),
               _mixed_section(done), _rates_section(done, given), _length_section(done, given),
               _controls_section(done, scale, exclude_flagged),
               Section("methods", [Heading("Methods"), Paragraph(methods_paragraph(
                   ratings, done, meta=meta, scale=scale, questions=questions, conversations=conversations,
                   exclude_flagged=exclude_flagged))]))
    return report


def _with_display_names(ratings: pd.DataFrame, given: dict[str, pd.DataFrame],
                        meta: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """The ratings and the further tables with every system under its display name (`meta` "display_names",
    analysis.report.systems), so every table, figure, CSV and sentence of the report names a system the same way;
    controls are told by ``is_control``, not by name, so renaming them changes nothing else.

    >>> ratings = pd.DataFrame({"system": ["moel", "gold"], "score": [3, 4]})
    >>> renamed, _ = _with_display_names(ratings, {}, {"display_names": {"moel": "MoEL"}})
    >>> renamed["system"].tolist()
    ['MoEL', 'gold']
    """
    from empeval.analysis.report.systems import display_names, renamed

    names = display_names(meta)
    if not names:
        return ratings, given
    return renamed(ratings, names), {key: renamed(frame, names) for key, frame in given.items()}


def _means_figure(means: pd.DataFrame) -> bytes | None:
    """The conversation means with their intervals, a panel per criterion (analysis.report.plots); a mean without an
    interval (one conversation) drawn as a point."""
    if means.empty:
        return None
    from empeval.analysis.report.plots import figure_png, system_means_plot

    drawn = means.assign(ci_low=means["ci_low"].fillna(means["mean"]), ci_high=means["ci_high"].fillna(means["mean"]))
    plot = system_means_plot(drawn, criteria=list(dict.fromkeys(means["criterion"])))
    for axis in plot.axes:
        axis.set_xlabel("mean conversation score (95% t-interval)")
    return figure_png(plot)


def chat_summary_lines(means: pd.DataFrame, criteria: Sequence[str] = ()) -> list[str]:
    """The conversation means (tables/chat_means.csv) in a line per criterion, best first; criteria in the order
    of `criteria`, others after.

    >>> means = pd.DataFrame({"criterion": ["empathy", "empathy"], "system": ["a", "b"], "mean": [3.5, 4.25],
    ...                       "conversations": [6, 6]})
    >>> chat_summary_lines(means)
    ['  empathy    b 4.25 (n=6), a 3.50 (n=6)']
    """
    order = {criterion: rank for rank, criterion in enumerate(criteria)}
    lines = []
    for criterion in sorted(dict.fromkeys(means["criterion"]), key=lambda c: order.get(c, len(order))):
        ranked = means.loc[means["criterion"] == criterion].sort_values(["mean", "system"], ascending=[False, True])
        lines.append(f"  {criterion:<10} " + ", ".join(f"{row.system} {row.mean:.2f} (n={row.conversations})"
                                                       for row in ranked.itertuples(index=False)))
    return lines


@register
class ChatAnalysis(AnalysisKind):
    name: ClassVar[str] = "chat"
    label: ClassVar[str] = "chat (live conversations)"
    columns: ClassVar[tuple[str, ...]] = CHAT_COLUMNS

    def recognises(self, columns: Sequence[str]) -> bool:
        return CHAT_MARKERS <= set(columns)

    def read_export(self, path: Path) -> pd.DataFrame:
        from empeval.analysis.kinds.chat.schema import read_chat_file

        return read_chat_file(path, "chat")

    def report(self, request: ReportRequest) -> Report:
        from empeval.analysis.stats.threads import single_threaded_blas

        with single_threaded_blas():
            report = chat_report(request.table, name=request.name, tables=request.tables, meta=request.meta,
                                 include_late=request.include_late, exclude_flagged=request.exclude_flagged,
                                 latex=request.latex)
        report.add(*linked_sections(request))  # what the studies linked to it say (an ACUTE study's win table)
        return report

    def summary_lines(self, paths: dict[str, Path], criteria: Sequence[str]) -> list[str]:
        if "table_chat_means" not in paths:
            return []
        means = pd.read_csv(paths["table_chat_means"])
        if means.empty:
            return ["no conversation with a real system was rated"]
        return ["mean conversation score per system (best first; n conversations):",
                *chat_summary_lines(means, criteria)]

    def flagged_raters(self, table: pd.DataFrame, meta: dict[str, Any]) -> set[str]:
        """The raters who scored a control conversation high (analysis.kinds.chat.tables.control_checks, on the
        study's scale)."""
        from empeval.analysis.kinds.chat.schema import validate_table
        from empeval.analysis.kinds.chat.tables import control_checks, flagged_by_controls

        if table.empty:
            return set()
        ratings = validate_table("chat", table, source=f"study {meta.get('name', '')}".strip())
        return set(flagged_by_controls(control_checks(ratings, scale=chat_scale(meta))))

    def linked_section(self, request: ReportRequest, linked: list[LinkedStudy]) -> Section | None:
        """Nothing yet: a chat study linked to another says nothing in that study's report."""
        return None
