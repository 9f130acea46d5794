"""The ACUTE-Eval kind's part in the analysis: its judgment table (analysis.kinds.acute.schema) and its report, built
from the A/B kind's tables (analysis.kinds.pairwise.tables.pairwise_tables) over pairs of conversations: a summary;
the linked chat study and its ratings beside the ACUTE picks; the win table with the per-pair sign test, the
Bradley-Terry ranking (with more than two systems), agreement and position bias (the A/B kind's blocks, their
wording made ACUTE's); the control pairs and the raters they flag; the justifications; a methods paragraph. And what
a chat report says of the ACUTE studies linked to it.

The unit of every test is the pair of conversations (``schema.judgment_view``): the sign test counts pairs of
conversations won on balance, the ranking's bootstrap resamples them, agreement and position bias count them. A pair
of conversations shares a conversation with the pairs of the same conversation against other systems; the ranking's
intervals do not cluster those (they are read as the A/B kind's are).

A rater is flagged when she picked the control partner on its target question in more than half of her control pairs
(``MIN_CONTROL_PASS_RATE``); unless told to keep them, the report leaves flagged raters out of every comparison (the
control table lists every rater).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from empeval.analysis.kinds import AnalysisKind, LinkedStudy, ReportRefused, ReportRequest, register
from empeval.analysis.kinds.acute.schema import ACUTE_COLUMNS

# The A/B kind's part, imported first so that it is registered before this one whatever imports what: an export is
# recognised by the kind registered last first (analysis.report.study.export_kind), and this table holds the A/B one's
# columns.
from empeval.analysis.kinds.pairwise.part import common_system, pairwise_summary_lines, renamed_judgments
from empeval.analysis.report.document import Block, BulletList, Heading, Paragraph, Table
from empeval.analysis.report.qualification import qualification_sentence
from empeval.analysis.report.sections import Report, Section
from empeval.analysis.report.systems import display_names, renamed, shown

N_BOOT = 1000
MIN_CONTROL_PASS_RATE = 0.5
JUSTIFICATION_EXAMPLES = 3
# The report's CSV tables: file stem -> AcuteTables attribute (those of the A/B tables under `pairwise`).
ACUTE_TABLES = {"acute_ab_table": "ab", "acute_ranking": "ranking", "acute_agreement": "agreement",
                "acute_position_bias": "position", "acute_controls": "controls"}
ACUTE_SIGN_TEST_CAPTION = (
    "Win / Lose: shares of all judgments of the pair of systems, from the first system's side (description; "
    "ACUTE-Eval has no tie). Test: per pair of conversations, because the k judgments of one pair are not "
    "independent; each pair of conversations counts once, for the system picked more often among its judgments; "
    "pairs picked as often each way are left out; exact two-sided sign test over the remaining pairs; p adjusted "
    "by Holm over the pairs of systems of each question. Control pairs are left out."
)
ACUTE_RANKING_CAPTION = (
    "Ranking: log strengths (mean zero) of a Bradley-Terry model fitted by maximum likelihood to the non-control "
    "judgments of each question, with percentile bootstrap intervals over pairs of conversations; rank 1 is the "
    "strongest."
)
ACUTE_AGREEMENT_CAPTION = (
    "Agreement on the picks, per question, with each pick mapped to the system picked, never to the screen side; a "
    "unit is one pair of conversations. Fleiss' kappa uses the units with the most common number of judgments; "
    "Krippendorff's alpha (nominal) every unit with two or more. Control pairs left out."
)
_UNITS_COLUMN = ("contexts (won / lost / even)", "pairs of conversations (won / lost / even)")


@dataclass
class AcuteTables:
    """Every table of the ACUTE report: the A/B kind's tables over the kept judgments (`pairwise`; its `controls`
    scored over every rater), the raters the controls flag, and the justifications' counts."""

    pairwise: Any  # analysis.kinds.pairwise.tables.PairwiseTables
    flagged: list[str]
    justifications: pd.DataFrame
    judgments: pd.DataFrame  # the validated ACUTE table the tables were computed from (late ones left out if asked)
    kept: pd.DataFrame  # its rows the comparisons use (flagged raters left out if asked)


def flagged_by_controls(controls: pd.DataFrame, *, min_pass_rate: float = MIN_CONTROL_PASS_RATE) -> list[str]:
    """The raters whose control pairs passed less often than `min_pass_rate` (analysis.kinds.pairwise.tables.
    control_scores: passed when the real partner was picked on the control's target), sorted.

    >>> flagged_by_controls(pd.DataFrame({"annotator": ["a", "b"], "pass_rate": [0.0, 0.5]}))
    ['a']
    """
    if controls.empty:
        return []
    return sorted(controls.loc[controls["pass_rate"] < min_pass_rate, "annotator"])


def justification_counts(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per question, how many justifications the (non-control) judgments have and their median length in
    characters.

    >>> from empeval.analysis.kinds.acute.schema import acute_rows, validate_acute
    >>> justification_counts(validate_acute(acute_rows([(1, 1, "a", 4, 2, "b", 4, "left")]))).values.tolist()
    [['empathy', 1, 29.0]]
    """
    real = judgments.loc[~judgments["is_control"]]
    if real.empty:
        return pd.DataFrame(columns=["criterion", "justifications", "median_characters"])
    lengths = real["justification"].str.len()
    counts = lengths.groupby(real["criterion"], sort=False).agg(["size", "median"]).reset_index()
    counts.columns = ["criterion", "justifications", "median_characters"]
    return counts.astype({"justifications": int, "median_characters": float})


def acute_tables(judgments: pd.DataFrame, *, focus: str | None = None, include_late: bool = True,
                 exclude_flagged: bool = True, control_systems: set[str] | None = None, n_boot: int = N_BOOT,
                 seed: int = 0) -> AcuteTables:
    """The ACUTE tables of a judgment table (analysis.kinds.acute.schema): the A/B kind's ``pairwise_tables`` over
    its judgment view (the pair of conversations as the unit), without the raters the control pairs flag
    (``flagged_by_controls``) when `exclude_flagged`, their captions worded for pairs of conversations; the
    control scores of every rater; the justifications' counts. ``include_late=False`` leaves out judgments
    submitted after their assignment expired.

    Returns
    -------
    tables : AcuteTables

    Examples
    --------
    >>> from empeval.analysis.kinds.acute.schema import acute_rows
    >>> rows = acute_rows([(1, 1, "a", 4, 2, "b", 4, "left", "r1"), (1, 2, "b", 4, 1, "a", 4, "right", "r2"),
    ...                    (2, 3, "b", 5, 4, "a", 5, "left", "r1")])
    >>> tables = acute_tables(pd.DataFrame(rows), n_boot=10)
    >>> tables.pairwise.ab[["system_a", "wins", "losses", "contexts_won", "contexts_lost"]].values.tolist()
    [['a', 2, 1, 1, 1]]
    """
    from empeval.analysis.kinds.acute.schema import judgment_view, validate_acute
    from empeval.analysis.kinds.pairwise.tables import control_scores, pairwise_tables

    table = validate_acute(judgments)
    if not include_late:
        table = table.loc[~table["late"]].reset_index(drop=True)
    view = judgment_view(table)
    scores = control_scores(view, control_systems=control_systems)
    flagged = flagged_by_controls(scores)
    kept = table.loc[~table["annotator"].isin(flagged)] if exclude_flagged and flagged else table
    tables = pairwise_tables(judgment_view(kept), focus=focus, control_systems=control_systems, n_boot=n_boot,
                             seed=seed)
    tables.controls = scores
    tables.ab_caption = ACUTE_SIGN_TEST_CAPTION
    if tables.ranking is not None:
        tables.ranking_caption = ACUTE_RANKING_CAPTION
    return AcuteTables(pairwise=tables, flagged=flagged, justifications=justification_counts(kept), judgments=table,
                       kept=kept.reset_index(drop=True))


def ab_display_acute(ab: pd.DataFrame) -> pd.DataFrame:
    """The A/B kind's display of its win table (analysis.kinds.pairwise.blocks.ab_display) in ACUTE's words: no tie
    column, the unit counted a pair of conversations."""
    from empeval.analysis.kinds.pairwise.blocks import ab_display

    return ab_display(ab).drop(columns="Tie %").rename(columns=dict([_UNITS_COLUMN]))


def result_blocks(tables: Any) -> list[Block]:
    """The A/B kind's result blocks (analysis.kinds.pairwise.blocks.pairwise_blocks) in ACUTE's words."""
    from empeval.analysis.kinds.pairwise.blocks import AGREEMENT_CAPTION, pairwise_blocks

    blocks = pairwise_blocks(tables, title="Results")
    for block in blocks:
        if isinstance(block, Table) and _UNITS_COLUMN[0] in block.frame.columns:
            block.frame = block.frame.drop(columns="Tie %").rename(columns=dict([_UNITS_COLUMN]))
        elif isinstance(block, Table) and block.caption == AGREEMENT_CAPTION:
            block.caption = ACUTE_AGREEMENT_CAPTION
    return blocks


def beside_chat(kept: pd.DataFrame, chat: pd.DataFrame | None) -> pd.DataFrame | None:
    """Each system's share of the ACUTE picks per question (its non-control judgments) beside its mean conversation
    score per criterion in the linked chat study (its export's `chat` table, controls left out): one row per
    system. None without the chat study's ratings.

    >>> from empeval.analysis.kinds.acute.schema import acute_rows, validate_acute
    >>> kept = validate_acute(acute_rows([(1, 1, "a", 4, 2, "b", 4, "left")]))
    >>> chat = pd.DataFrame({"system": ["a", "b"], "criterion": "empathy", "score": [4, 2], "is_control": False})
    >>> beside_chat(kept, chat).values.tolist()
    [['a', 100.0, 4.0], ['b', 0.0, 2.0]]
    """
    if chat is None or chat.empty or not {"system", "criterion", "score", "is_control"} <= set(chat.columns):
        return None
    real = kept.loc[~kept["is_control"]]
    rows: dict[str, dict[str, Any]] = {}
    for criterion, part in real.groupby("criterion", sort=False):
        for system in sorted(set(part["system_left"]) | set(part["system_right"])):
            theirs = part.loc[(part["system_left"] == system) | (part["system_right"] == system)]
            rows.setdefault(system, {"system": system})[f"picked % ({criterion})"] = (
                100.0 * float((theirs["preferred"] == system).mean()))
    ratings = chat.loc[~chat["is_control"].astype(str).str.lower().isin({"true", "1"})]
    ratings = ratings.assign(score=pd.to_numeric(ratings["score"], errors="coerce"))
    for (system, criterion), score in ratings.groupby(["system", "criterion"], sort=True)["score"].mean().items():
        if system in rows:
            rows[system][f"chat mean ({criterion})"] = float(score)
    return pd.DataFrame(list(rows.values())).sort_values("system").reset_index(drop=True) if rows else None


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _summary(done: AcuteTables, focus: str | None, late: int, include_late: bool, exclude_flagged: bool) -> str:
    table = done.judgments
    real = table.loc[~table["is_control"]]
    shown = table.drop_duplicates(["assignment_id", "comparison_id"])
    pairs = real.drop_duplicates("comparison_id")
    conversations = set(zip(real["chat_assignment_left"], real["conversation_left"], strict=True)) | set(
        zip(real["chat_assignment_right"], real["conversation_right"], strict=True))
    text = (f"{len(table)} choices ({table['criterion'].nunique()} questions) on {len(shown)} shown pairs of "
            f"conversations ({int(shown['is_control'].sum())} of them control pairs) in "
            f"{_count(table['assignment_id'].nunique(), 'assignment')} by "
            f"{_count(table['annotator'].nunique(), 'rater')}: "
            f"{_count(len(pairs), 'pair')} of {_count(len(conversations), 'conversation')} with "
            f"{_count(len(set(real['system_left']) | set(real['system_right'])), 'system')}, "
            f"{int(pairs['same_prompt'].sum())} of the pairs on a shared prompt.")
    if focus:
        text += f" Rows read **{focus}** against each other system (Win % is {focus}'s)."
    if late:
        text += (f" {_count(late, 'assignment')} were submitted after they had expired; "
                 + ("they are included." if include_late else "they are left out of every table."))
    if done.flagged:
        action = "left out of the comparisons" if exclude_flagged else "kept (exclude_flagged off)"
        text += (f" {_count(len(done.flagged), 'rater')} picked the control partner in most control pairs and "
                 f"{'was' if len(done.flagged) == 1 else 'were'} {action}: {', '.join(done.flagged)}.")
    return text


def _linked_blocks(chat_name: str | None, chat: pd.DataFrame | None, done: AcuteTables) -> list[Block]:
    if chat_name is None:
        return []
    blocks: list[Block] = [Paragraph(f"The conversations compared are those of the chat study **{chat_name}** "
                                     "(compare_with): its raters talked with the systems, these raters read their "
                                     "conversations two at a time.")]
    side = beside_chat(done.kept, chat)
    if side is None:
        blocks.append(Paragraph(f"The chat study {chat_name!r} has no conversation ratings to put beside the picks."))
        return blocks
    from empeval.analysis.report.tables import fmt

    shown = side.copy()
    for column in shown.columns[1:]:
        shown[column] = [fmt(v, 1) if column.startswith("picked") else fmt(v) for v in shown[column]]
    blocks.append(Table(shown.rename(columns={"system": "System"}).fillna("n/a"),
                        caption="Each system's share of the ACUTE picks per question (its non-control judgments) "
                                "beside the mean score its conversations got from the raters who had them in the chat "
                                "study, per criterion (controls left out)."))
    return blocks


def _controls_blocks(done: AcuteTables, exclude_flagged: bool) -> list[Block]:
    blocks: list[Block] = [Heading("Control pairs", level=3)]
    if done.pairwise.controls.empty:
        return [*blocks, Paragraph("No control pair was judged.")]
    if done.flagged:
        action = ("left out of the comparisons above" if exclude_flagged
                  else "kept in the comparisons (exclude_flagged off)")
        blocks.append(Paragraph(f"Flagged (control pairs passed less than {MIN_CONTROL_PASS_RATE:.0%} of the time): "
                                f"{', '.join(done.flagged)} ({action})."))
    else:
        blocks.append(Paragraph("No rater picked the control partner in most of her control pairs."))
    return blocks


def _justification_section(done: AcuteTables, seed: int) -> Section:
    blocks: list[Block] = [Heading("Justifications", level=3)]
    counts = done.justifications
    if counts.empty:
        return Section("justifications", [*blocks, Paragraph("No justification of a real pair to show.")],
                       tables={"acute_justifications": counts})
    blocks.append(Table(pd.DataFrame({"Question": counts["criterion"], "Justifications":
                                      counts["justifications"].astype(str),
                                      "Median characters": [f"{v:.0f}" for v in counts["median_characters"]]}),
                        caption="How many justifications each question got and how long they were (every one is in "
                                "the export's justification column)."))
    real = done.kept.loc[~done.kept["is_control"]]
    for criterion, part in real.groupby("criterion", sort=False):
        drawn = part.sample(n=min(JUSTIFICATION_EXAMPLES, len(part)), random_state=seed).sort_values("comparison_id")
        blocks.append(Paragraph(f"Examples for {criterion}:"))
        blocks.append(BulletList([f"{row.preferred} over "
                                  f"{row.system_right if row.choice == 'left' else row.system_left}: "
                                  f"{row.justification}" for row in drawn.itertuples(index=False)], literal=True))
    return Section("justifications", blocks, tables={"acute_justifications": counts})


def _methods(meta: dict[str, Any], done: AcuteTables, *, n_boot: int) -> str:
    k = meta.get("k")
    sentences = [
        "Following ACUTE-Eval (Li, Weston & Roller 2019), raters read two whole conversations side by side, each "
        "between a speaker (a rater of the chat study, who played the speaker of an EmpatheticDialogues prompt) and "
        "a listener (a system, not named; which was on which side was balanced and hidden), and for each question "
        "picked the listener on the left or on the right, with a short justification"
        + (f" of at least {meta['min_justification']} characters" if meta.get("min_justification") else "")
        + "; there was no tie."]
    design = []
    if k:
        design.append(f"each pair of conversations was judged by {k} different raters")
    design.append("two conversations were paired on the same prompt wherever the chat study had one of each system "
                  "on it" + ("" if meta.get("same_prompt_only") else ", across prompts otherwise"))
    design.append("a rater never read the same prompt twice, nor one she had talked about in the chat study")
    sentences.append("; ".join(design).capitalize() + ".")
    sentences.append(
        "The analysis is the A/B kind's with the pair of conversations as its unit: the win table counts judgments; "
        "its test counts pairs of conversations (an exact two-sided sign test over the pairs one system won on "
        "balance, Holm-adjusted over the pairs of systems of each question); with more than two systems a "
        f"Bradley-Terry model ranks them, with {n_boot} bootstrap resamples of pairs of conversations; agreement maps "
        "each pick to the system picked; position bias tests the share of picks that went to the left.")
    if not done.pairwise.controls.empty:
        sentences.append(
            "Control pairs put a real system's conversation beside a control partner's (a known-bad listener) and "
            f"were scored on the control's target question; a rater who passed less than {MIN_CONTROL_PASS_RATE:.0%} "
            f"of hers was flagged ({len(done.flagged)} of {done.judgments['annotator'].nunique()}).")
    sentences.append(qualification_sentence(meta))  # ACUTE-Eval's onboarding, when the study had one
    return " ".join(sentence for sentence in sentences if sentence)


def acute_report(judgments: pd.DataFrame, *, name: str, chat: pd.DataFrame | None = None,
                 chat_name: str | None = None, meta: dict[str, Any] | None = None, include_late: bool = True,
                 exclude_flagged: bool = True, seed: int = 0, n_boot: int = N_BOOT, latex: bool = False) -> Report:
    """The ACUTE report of a judgment table (acute_tables) as sections: summary, the linked chat study (`chat`, its
    conversation ratings, beside the picks), the results (the A/B kind's blocks), the control pairs, the
    justifications and the methods; each table also a CSV (ACUTE_TABLES) and the win table a LaTeX table when asked.
    ReportRefused when every assignment was late and late ones are left out."""
    from empeval.analysis.kinds.acute.schema import validate_acute

    meta = meta or {}
    names = display_names(meta)
    # Every system under its display name (analysis.report.systems): tables, CSVs, LaTeX and sentences alike.
    table = renamed_judgments(validate_acute(judgments), names)
    chat = renamed(chat, names) if chat is not None else None
    late = int(table.loc[table["late"], "assignment_id"].nunique())
    if not include_late and len(table) and table["late"].all():
        raise ReportRefused(f"all {late} assignment(s) of {name!r} were submitted late: nothing to report without "
                            "them (leave out --without-late)")
    focus = common_system(table)
    controls = {shown(c, names) for c in meta["controls"]} if meta.get("controls") else None
    done = acute_tables(table, focus=focus, include_late=include_late, exclude_flagged=exclude_flagged,
                        control_systems=controls, n_boot=n_boot, seed=seed)
    csv = {stem: getattr(done.pairwise, attribute) for stem, attribute in ACUTE_TABLES.items()
           if getattr(done.pairwise, attribute) is not None}
    report = Report(title=f"Human evaluation report: {name} (ACUTE-Eval, pairs of conversations)", sections=[
        Section("summary", [Paragraph(_summary(done, focus, late, include_late, exclude_flagged))])])
    linked = _linked_blocks(chat_name, chat, done)
    if linked:
        side = beside_chat(done.kept, chat)
        report.add(Section("linked", linked, tables={"acute_beside_chat": side} if side is not None else {}))
    tex = {}
    if latex and not done.pairwise.ab.empty:
        from empeval.analysis.report.latex import booktabs

        tex["acute_ab_table"] = booktabs(ab_display_acute(done.pairwise.ab), caption=done.pairwise.ab_caption,
                                         label="tab:acute")
    report.add(Section("results", result_blocks(done.pairwise), tables=csv, latex=tex),
               Section("controls", _controls_blocks(done, exclude_flagged)),
               _justification_section(done, seed),
               Section("methods", [Heading("Methods"), Paragraph(_methods(meta, done, n_boot=n_boot))]))
    return report


@register
class AcuteAnalysisKind(AnalysisKind):
    name: ClassVar[str] = "acute"
    label: ClassVar[str] = "ACUTE-Eval (pairs of conversations)"
    columns: ClassVar[tuple[str, ...]] = ACUTE_COLUMNS

    def recognises(self, columns: Sequence[str]) -> bool:
        return {"comparison_id", "justification", "preferred"} <= set(columns)

    def read_export(self, path: Path) -> pd.DataFrame:
        from empeval.analysis.kinds.acute.schema import read_acute

        return read_acute(path)

    def report(self, request: ReportRequest) -> Report:
        named = [linked for linked in request.linked if not linked.names_this]
        chat = next((linked for linked in named if linked.kind == "chat"), None)
        return acute_report(request.table, name=request.name, chat=chat.table if chat is not None else None,
                            chat_name=chat.name if chat is not None else request.meta.get("chat_study"),
                            meta=request.meta, include_late=request.include_late,
                            exclude_flagged=request.exclude_flagged, seed=request.seed, latex=request.latex,
                            n_boot=request.resamples(N_BOOT))

    def summary_lines(self, paths: dict[str, Path], criteria: Sequence[str]) -> list[str]:
        if "table_acute_ab_table" not in paths:
            return []
        return ["ACUTE-Eval (win / lose / tie % of the picks; * significant after Holm):",
                *pairwise_summary_lines(pd.read_csv(paths["table_acute_ab_table"]))]

    def flagged_raters(self, table: pd.DataFrame, meta: dict[str, Any]) -> set[str]:
        """The raters whose control pairs passed less than MIN_CONTROL_PASS_RATE of the time."""
        from empeval.analysis.kinds.acute.schema import judgment_view, validate_acute
        from empeval.analysis.kinds.pairwise.tables import control_scores

        if table.empty:
            return set()
        controls = set(meta["controls"]) if meta.get("controls") else None
        view = judgment_view(validate_acute(table, source=f"study {meta.get('name', '')}".strip()))
        return set(flagged_by_controls(control_scores(view, control_systems=controls)))

    def linked_section(self, request: ReportRequest, linked: list[LinkedStudy]) -> Section:
        """The ACUTE studies whose compare_with names the reported (chat) study: each one's win table so far (the
        raters its controls flag left out), from the A/B kind's code."""
        from empeval.analysis.kinds.acute.schema import judgment_view, validate_acute
        from empeval.analysis.kinds.pairwise.tables import ab_table, control_scores

        blocks: list[Block] = [Heading("Linked ACUTE-Eval studies")]
        for other in linked:
            if other.table is None or other.table.empty:
                blocks.append(Paragraph(f"**{other.name}**, an ACUTE-Eval study of this study's conversations (its "
                                        f"compare_with names {request.name}), has no choices yet."))
                continue
            table = validate_acute(other.table, source=f"study {other.name!r}")
            flagged = flagged_by_controls(control_scores(judgment_view(table)))
            kept = table.loc[~table["annotator"].isin(flagged)]
            ab = ab_table(judgment_view(kept))
            blocks.append(Paragraph(
                f"**{other.name}**, an ACUTE-Eval study of this study's conversations (its compare_with names "
                f"{request.name}): {len(table)} choices on {table['comparison_id'].nunique()} pairs of conversations "
                f"by {table['annotator'].nunique()} raters so far"
                + (f", {len(flagged)} flagged by the control pairs and left out" if flagged else "")
                + f". Its report (empeval report {other.name}) has the ranking, agreement and position bias."))
            if not ab.empty:
                blocks.append(Table(ab_display_acute(ab), caption=ACUTE_SIGN_TEST_CAPTION))
        return Section("linked_acute", blocks)
