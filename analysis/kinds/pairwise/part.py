"""The pairwise (A/B) kind's part in the analysis: its judgment table (analysis.kinds.pairwise.schema) and its report:
a summary, the linked Likert study named beside it, the A/B tables (analysis.kinds.pairwise.blocks over
analysis.kinds.pairwise.tables) and a methods paragraph; what a Likert report says of the A/B studies linked to it.

The report reads the judgments with the anchor as "ours" (the study's, or for an export file the one system every
real pair holds, when there is exactly one) and puts the Likert study the A/B study names in compare_with beside its
table, without the raters that study's quality checks flag (as in its own report) unless asked to keep them. The A/B
study's own raters are checked by analysis.kinds.pairwise.quality (control pairs, one screen side, ties throughout,
speed); the flagged ones are left out of every table but the control pairs' unless asked to keep them, and a section
shows the A/B table and the agreement with and without them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from empeval.analysis.kinds import AnalysisKind, JudgeRequest, LinkedStudy, ReportRefused, ReportRequest, register
from empeval.analysis.kinds.pairwise.schema import EXPORT_COLUMNS
from empeval.analysis.report.document import Heading, Paragraph
from empeval.analysis.report.sections import Report, Section

# The pairwise report's CSV tables: file stem -> PairwiseTables attribute.
PAIRWISE_TABLES = {"ab_table": "ab", "choice_agreement": "agreement", "position_bias": "position",
                   "control_pairs": "controls", "ranking": "ranking", "likert_beside_ab": "likert"}
N_BOOT = 1000


def common_system(judgments: pd.DataFrame) -> str | None:
    """The system in every real pair of a judgment table when there is exactly one and more than one pair (a
    study with an anchor: "ours vs each baseline"), else None."""
    real = judgments.loc[~judgments["is_control"].astype(bool)]
    pairs = {tuple(pair.split("|", 1)) for pair in real["pair"].unique()}
    if len(pairs) < 2:
        return None
    shared = set.intersection(*(set(pair) for pair in pairs))
    return shared.pop() if len(shared) == 1 else None


def pairwise_summary_lines(ab: pd.DataFrame) -> list[str]:
    """The A/B table in a few terminal lines: per criterion and pair, win / lose / tie % and the decision."""
    lines = []
    for row in ab.itertuples(index=False):
        p = "< 0.001" if row.p_adj < 0.001 else f"{row.p_adj:.3f}"
        decision = f"p adj. {p}" + (" *" if row.significant else "")
        lines.append(f"  {row.criterion:<10} {row.system_a} vs {row.system_b}: win {row.win_pct:.1f}%  "
                     f"lose {row.lose_pct:.1f}%  tie {row.tie_pct:.1f}%  ({decision})")
    return lines


def _likert_ratings(likert: pd.DataFrame | None, *, include_late: bool,
                    exclude_flagged: bool) -> tuple[pd.DataFrame | None, list[str]]:
    """A linked Likert study's ratings as the tidy table, late ones and flagged raters left out as its own
    report leaves them out; and who was left out."""
    if likert is None:
        return None, []
    from empeval.analysis.kinds.likert.load import tidy_from_export
    from empeval.analysis.kinds.likert.quality import flagged_annotators, rater_quality
    from empeval.analysis.stats.exclusions import exclude_annotators

    ratings = tidy_from_export(likert) if "item" not in likert.columns else likert
    if not include_late and "late" in ratings.columns:
        ratings = ratings.loc[~ratings["late"].astype(bool)].reset_index(drop=True)
    if not exclude_flagged or ratings.empty:
        return ratings, []
    flagged = flagged_annotators(rater_quality(ratings))
    return exclude_annotators(ratings, flagged), flagged


def _summary(table: pd.DataFrame, focus: str | None, include_late: bool, late: int, flagged: list[str],
             exclude_flagged: bool) -> str:
    real = table.loc[~table["is_control"]]
    shown = table.drop_duplicates(["assignment_id", "context_id", "pair"])
    text = (f"{len(table)} choices ({table['criterion'].nunique()} criteria) on {len(shown)} shown pairs "
            f"({int(shown['is_control'].sum())} of them control pairs) in {table['assignment_id'].nunique()} "
            "assignments by "
            f"{table['annotator'].nunique()} annotators, over {real['context_id'].nunique()} contexts and "
            f"{real['pair'].nunique()} pairs of systems.")
    if focus:
        text += f" Rows read **{focus}** against each other system (Win % is {focus}'s)."
    if late:
        text += (f" {late} assignment(s) were submitted after they had expired; "
                 + ("they are included." if include_late else "they are left out of every table."))
    if flagged:
        action = ("left out of every table but the control pairs' (see Rater quality)" if exclude_flagged
                  else "kept in every table (--keep-flagged; see Rater quality)")
        text += f" The quality checks flag {len(flagged)} of {table['annotator'].nunique()} annotators: {action}."
    return text


def renamed_judgments(table: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """The judgment table with its systems under their display names (analysis.report.systems), each ``pair``
    rebuilt from the renamed sides (the names of a pair are kept in sorted order); the ACUTE report renames its
    judgments with it too.

    >>> from empeval.analysis.kinds.pairwise.schema import judgment_rows
    >>> table = renamed_judgments(pd.DataFrame(judgment_rows([(1, "moel", "gold", "left")])), {"moel": "MoEL"})
    >>> table[["pair", "system_left", "preferred"]].values.tolist()
    [['MoEL|gold', 'MoEL', 'MoEL']]
    """
    if not names:
        return table
    from empeval.analysis.kinds.pairwise.schema import TIE, pair_name
    from empeval.analysis.report.systems import renamed

    table = renamed(table, names, ("system_left", "system_right"))
    table["preferred"] = [p if p == TIE else names.get(p, p) for p in table["preferred"]]
    table["pair"] = [pair_name(a, b) for a, b in zip(table["system_left"], table["system_right"], strict=True)]
    return table


def pairwise_report(judgments: pd.DataFrame, *, name: str, focus: str | None = None,
                    likert: pd.DataFrame | None = None, likert_name: str | None = None, note: str = "",
                    meta: dict[str, Any] | None = None, include_late: bool = True, exclude_flagged: bool = True,
                    seed: int = 0, n_boot: int = N_BOOT, judge: JudgeRequest | None = None) -> Report:
    """The A/B report of a judgment table (analysis.kinds.pairwise.tables.pairwise_tables, `focus` as "ours") as
    sections: summary, the linked Likert study named (`likert`, its export or tidy table, whose means go beside the
    A/B table, flagged raters left out when `exclude_flagged`), `note`, the A/B tables (each also a CSV:
    PAIRWISE_TABLES; the A/B table a LaTeX table when asked) and the methods paragraph with the study's numbers
    (analysis.kinds.pairwise.methods). Systems go by their display names (`meta` "display_names") everywhere, the
    document's tables in the report's one order: criteria as `meta` "criteria" lists them, pairs by the places of
    their systems in `meta` "systems" (analysis.report.systems); the CSVs keep the analysis's own order. With a
    `judge` of differences' verdicts (`judge.pair_scores`), the model-assisted net preferences follow the results
    (analysis.kinds.pairwise.judged; tables/ab_model_assisted.csv).
    ValueError when every assignment was late and late ones are left out."""
    from empeval.analysis.kinds.pairwise.blocks import ab_display, pairwise_blocks
    from empeval.analysis.kinds.pairwise.methods import methods_paragraph
    from empeval.analysis.kinds.pairwise.schema import validate_judgments
    from empeval.analysis.kinds.pairwise.tables import in_report_order, pairwise_tables
    from empeval.analysis.report.latex import booktabs
    from empeval.analysis.report.systems import display_names, shown, system_order
    from empeval.analysis.report.tables import criteria_in_order

    names = display_names(meta)
    table = renamed_judgments(validate_judgments(judgments), names)
    focus = shown(focus, names) if focus is not None else None
    late = int(table.loc[table["late"], ["assignment_id"]].drop_duplicates().shape[0])
    if not include_late and late and table["late"].all():
        raise ReportRefused(f"all {late} assignment(s) of {name!r} were submitted late: nothing to report without them "
                         "(leave out --without-late)")
    from empeval.analysis.kinds.pairwise.quality import flagged_annotators, rater_quality

    quality = rater_quality(table if include_late else table.loc[~table["late"]])
    flagged = flagged_annotators(quality)
    analysed = table.loc[~table["annotator"].isin(flagged)] if exclude_flagged and flagged else table
    likert_tidy, excluded = _likert_ratings(likert, include_late=include_late, exclude_flagged=exclude_flagged)
    if likert_tidy is not None:
        from empeval.analysis.report.systems import renamed

        likert_tidy = renamed(likert_tidy, names)
    real = table.loc[~table["is_control"]]
    systems = system_order(set(real["system_left"]) | set(real["system_right"]),
                           declared=[shown(s, names) for s in (meta or {}).get("systems") or ()])
    computed = pairwise_tables(analysed, focus=focus, include_late=include_late, n_boot=n_boot, seed=seed,
                               likert=likert_tidy)
    if analysed is not table:  # the control pairs' table lists every rater: it is where the flags come from
        from empeval.analysis.kinds.pairwise.tables import control_scores

        computed = replace(computed, controls=control_scores(table if include_late else table.loc[~table["late"]]))
    # The CSVs are the analysis's own frames; the document and LaTeX show them in the report's one order.
    tables = in_report_order(computed, criteria=(meta or {}).get("criteria"), systems=systems)
    csv = {stem: getattr(computed, attribute) for stem, attribute in PAIRWISE_TABLES.items()
           if getattr(computed, attribute) is not None}
    report = Report(title=f"Human evaluation report: {name} (pairwise A/B)", sections=[
        Section("summary", [Paragraph(_summary(table, focus, include_late, late, flagged, exclude_flagged))])])
    if likert_name is not None:
        without = (f" (without the {len(excluded)} rater(s) its quality checks flag, as in its own report: "
                   f"{', '.join(excluded)})" if excluded else "")
        report.add(Section("linked", [Paragraph(f"Linked Likert study: **{likert_name}** (compare_with). Its "
                                                f"means{without} stand beside the A/B table below.")]))
    if tables.ab.empty and analysed is not table and not real.empty:
        note = (note + " " if note else "") + (
            "Every annotator who judged a real pair is flagged by the quality checks and left out, so the tables below "
            "are empty (see Rater quality for why); run the report with --keep-flagged to see their results, or "
            "collect judgments from more annotators.")
    if note:
        report.add(Section("note", [Paragraph(note)]))
    latex = ({} if tables.ab.empty else
             {"ab_table": booktabs(ab_display(tables.ab), caption=tables.ab_caption, label="tab:ab")})
    criteria = criteria_in_order(table["criterion"].unique(), (meta or {}).get("criteria"))
    both = (_with_and_without(table if include_late else table.loc[~table["late"]], flagged, focus=focus,
                              n_boot=n_boot, seed=seed) if flagged else None)
    exclusion = {"quality": quality, "flagged": flagged, "exclude_flagged": exclude_flagged,
                 "timed": "seconds_on_item" in table.columns and bool(table["seconds_on_item"].notna().any())}
    report.add(Section("results", pairwise_blocks(tables, title="Results"), tables=csv, latex=latex))
    if judge is not None and judge.pair_scores is not None:
        from empeval.analysis.kinds.pairwise.judged import model_assisted_net_preferences, model_assisted_section_blocks

        verdicts = judge.pair_scores.assign(system_a=[shown(s, names) for s in judge.pair_scores["system_a"]],
                                            system_b=[shown(s, names) for s in judge.pair_scores["system_b"]])
        # The judgments the results use: flagged raters left out as asked, late ones too with --without-late.
        used = analysed if include_late else analysed.loc[~analysed["late"]]
        assisted = model_assisted_net_preferences(used, verdicts, judge.design_sample, focus=focus)
        report.add(Section("model_assisted", model_assisted_section_blocks(
            assisted, judge=judge.pair_judge or judge.name, design_sample=judge.design_sample),
            tables={"ab_model_assisted": assisted}))
    report.add(
               _quality_section(exclusion, both, criteria=criteria, systems=systems),
               Section("methods", [Heading("Methods"), Paragraph(methods_paragraph(
                   table, tables, meta or {}, systems=systems, n_boot=n_boot, include_late=include_late,
                   criteria=criteria, exclusion=exclusion))]))
    return report


def _with_and_without(everyone: pd.DataFrame, flagged: Sequence[str], *, focus: str | None, n_boot: int,
                      seed: int) -> dict[str, pd.DataFrame]:
    """The A/B table and the agreement of the judgments ``everyone`` (late ones already left out when they are)
    with all raters and without ``flagged``, stacked with a first column ``raters`` (analysis.stats.exclusions
    ALL_RATERS, EXCLUDING_FLAGGED) as the Likert report stacks its own."""
    from empeval.analysis.kinds.pairwise.tables import ab_table, choice_agreement
    from empeval.analysis.stats.exclusions import ALL_RATERS, EXCLUDING_FLAGGED

    stacked: dict[str, list[pd.DataFrame]] = {"ab": [], "agreement": []}
    kept = everyone.loc[~everyone["annotator"].isin(set(flagged))]
    for label, part in ((ALL_RATERS, everyone), (EXCLUDING_FLAGGED, kept)):
        stacked["ab"].append(ab_table(part, focus=focus).assign(raters=label))
        stacked["agreement"].append(choice_agreement(part, n_boot=n_boot, seed=seed).assign(raters=label))
    return {name: _raters_first(pd.concat(frames, ignore_index=True)) for name, frames in stacked.items()}


def _raters_first(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[["raters", *[c for c in frame.columns if c != "raters"]]]


def _quality_section(exclusion: dict[str, Any], both: dict[str, pd.DataFrame] | None, *, criteria: Sequence[str],
                     systems: Sequence[str]) -> Section:
    """Rater quality: the rules, who they flag and why, what was done with them, and (when any is flagged) the A/B
    table and the agreement with and without them; the quality table as a CSV (rater_quality), the stacked ones
    too (ab_side_by_side, agreement_side_by_side)."""
    from empeval.analysis.kinds.pairwise.blocks import side_by_side_blocks
    from empeval.analysis.kinds.pairwise.quality import rules_sentence
    from empeval.analysis.report.document import BulletList

    quality, flagged = exclusion["quality"], exclusion["flagged"]
    action = ("excluded from the main results" if exclusion["exclude_flagged"]
              else "kept in the main results (--keep-flagged)")
    blocks: list[Any] = [Heading("Rater quality"), Paragraph(
        f"{rules_sentence(timed=exclusion['timed'])} {len(flagged)} of {len(quality)} annotators flagged, {action}.")]
    if flagged:
        blocks.append(BulletList([f"{row.annotator}: {row.reasons}" for row in quality.loc[quality["flagged"]]
                                  .itertuples()]))
    tables = {"rater_quality": quality}
    if both is not None:
        blocks.extend(side_by_side_blocks(both["ab"], both["agreement"], criteria=criteria, systems=systems))
        tables.update(ab_side_by_side=both["ab"], agreement_side_by_side=both["agreement"])
    return Section("rater_quality", blocks, tables=tables)


@register
class PairwiseAnalysisKind(AnalysisKind):
    name: ClassVar[str] = "pairwise"
    label: ClassVar[str] = "pairwise (A/B)"
    columns: ClassVar[tuple[str, ...]] = EXPORT_COLUMNS  # the judgment contract and the comment on the pair

    def recognises(self, columns: Sequence[str]) -> bool:
        return "preferred" in columns

    def read_export(self, path: Path) -> pd.DataFrame:
        from empeval.analysis.kinds.pairwise.schema import read_judgments

        return read_judgments(path)

    def report(self, request: ReportRequest) -> Report:
        meta = request.meta
        named = [linked for linked in request.linked if not linked.names_this]
        likert_study = next((linked for linked in named if linked.kind == "likert"), None)
        note = ""
        if likert_study is not None and likert_study.table is None:
            note = f"The linked Likert study {likert_study.name!r} has no ratings yet."
        elif named and likert_study is None:
            note = (f"The linked study {named[0].name!r} is not a Likert study: only a Likert study's means go beside "
                    "the A/B table.")
        likert = likert_study.table if likert_study is not None else None
        focus = meta.get("anchor") or (None if "anchor" in meta else common_system(request.table))
        return pairwise_report(request.table, name=request.name, focus=focus or None, likert=likert,
                               likert_name=likert_study.name if likert is not None and likert_study else None,
                               note=note, meta=meta, include_late=request.include_late,
                               exclude_flagged=request.exclude_flagged, seed=request.seed,
                               n_boot=request.resamples(N_BOOT), judge=request.judge)

    def summary_lines(self, paths: dict[str, Path], criteria: Sequence[str]) -> list[str]:
        if "table_ab_table" not in paths:
            return []
        return ["A/B (win / lose / tie % of the judgments; * significant after Holm):",
                *pairwise_summary_lines(pd.read_csv(paths["table_ab_table"]))]

    def flagged_raters(self, table: pd.DataFrame, meta: dict) -> set[str] | None:
        """The raters analysis.kinds.pairwise.quality flags (the report's rules and thresholds)."""
        from empeval.analysis.kinds.pairwise.quality import flagged_annotators, rater_quality

        if table.empty:
            return set()
        return set(flagged_annotators(rater_quality(table)))

    def linked_section(self, request: ReportRequest, linked: list[LinkedStudy]) -> Section:
        """The A/B studies whose compare_with names the reported study, and their choices so far."""
        blocks: list[Any] = [Heading("Linked pairwise (A/B) studies")]
        for other in linked:
            choices = 0 if other.table is None else len(other.table)
            blocks.append(Paragraph(
                f"**{other.name}**, a pairwise (A/B) study, is linked to this one (its compare_with names "
                f"{request.name}): {choices} choices so far. Its report (empeval report {other.name}) puts this "
                "study's means beside its A/B table."))
        return Section("linked_pairwise", blocks)
