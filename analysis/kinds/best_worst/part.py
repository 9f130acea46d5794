"""The best-worst scaling kind's part in the analysis: its choice table (analysis.kinds.best_worst.schema) and its
report: a summary, the linked Likert study named beside it, the scores with a figure, the Bradley-Terry ranking,
the reliability (split-half, beside the Likert study's), the order shown, the control tuples and a methods
paragraph; and what a Likert report says of the best-worst studies linked to it.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from empeval.analysis.kinds import AnalysisKind, LinkedStudy, ReportRefused, ReportRequest, register
from empeval.analysis.kinds.best_worst.schema import BEST_WORST_COLUMNS
from empeval.analysis.report.document import Block, Heading, Image, Paragraph, Table
from empeval.analysis.report.sections import Report, Section

N_BOOT = 1000
N_SPLITS = 100
# The report's CSV tables: file stem -> BestWorstTables attribute.
BEST_WORST_TABLES = {"bws_scores": "scores", "bws_ranking": "ranking", "bws_reliability": "reliability",
                     "bws_position": "position", "bws_controls": "controls", "likert_beside_bws": "likert"}


def _number(value: Any, digits: int = 1) -> str:
    return "" if pd.isna(value) else f"{value:.{digits}f}"


def _interval(low: Any, high: Any, digits: int = 1) -> str:
    return "" if pd.isna(low) or pd.isna(high) else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _p(value: float) -> str:
    return "" if pd.isna(value) else "< 0.001" if value < 0.001 else f"{value:.3f}"


def scores_display(scores: pd.DataFrame) -> pd.DataFrame:
    """The score table as the report prints it."""
    return pd.DataFrame({
        "Criterion": scores["criterion"], "Rank": scores["rank"].astype(str), "System": scores["system"],
        "Best - worst (pp)": [_number(v) for v in scores["score"]],
        "95% CI": [_interval(lo, hi) for lo, hi in zip(scores["ci_low"], scores["ci_high"], strict=True)],
        "Best %": [_number(v) for v in scores["best_pct"]], "Worst %": [_number(v) for v in scores["worst_pct"]],
        "Shown": scores["shown"].astype(str)})


def best_worst_summary_lines(scores: pd.DataFrame, likert: pd.DataFrame | None = None) -> list[str]:
    """The scores in a line per criterion, best first, with the linked Likert study's means beside when given."""
    lines = []
    means = ({} if likert is None else
             {(row.criterion, row.system): row.likert_mean for row in likert.itertuples(index=False)})
    for criterion, group in scores.groupby("criterion", sort=False):
        ranked = group.sort_values("rank")
        parts = []
        for row in ranked.itertuples(index=False):
            beside = means.get((criterion, row.system))
            parts.append(f"{row.system} {row.score:+.1f}" + (f" (Likert {beside:.2f})" if beside is not None else ""))
        lines.append(f"  {criterion:<10} " + ", ".join(parts))
    return lines


def _summary(table: pd.DataFrame, meta: dict[str, Any], late: int, include_late: bool) -> str:
    real = table.loc[~table["is_control"]]
    shown = table.drop_duplicates(["assignment_id", "context_id", "tuple"])
    size = int(real["shown"].str.count(r"\|").max() + 1) if len(real) else meta.get("tuple_size", 0)
    systems = sorted({s for value in real["tuple"] for s in value.split("|")})
    text = (f"{len(table)} best-worst choices ({table['criterion'].nunique()} criteria) on {len(shown)} shown "
            f"tuples of {size} responses ({int(shown['is_control'].sum())} of them control tuples) in "
            f"{table['assignment_id'].nunique()} assignments by {table['annotator'].nunique()} annotators, over "
            f"{real['context_id'].nunique()} contexts and {len(systems)} systems.")
    if late:
        text += (f" {late} assignment(s) were submitted after they had expired; "
                 + ("they are included." if include_late else "they are left out of every table."))
    return text


def _methods(meta: dict[str, Any], *, n_boot: int, n_splits: int) -> str:
    design = []
    if meta.get("tuple_size"):
        design.append(f"each tuple held the responses of {meta['tuple_size']} systems to one context")
    if meta.get("k"):
        design.append(f"each tuple was answered by {meta['k']} different annotators")
    sentence = ("Annotators saw a conversation and the responses of several systems, labelled A, B, ... in an "
                "order that rotated over a tuple's placements (which system wrote which was hidden), and picked "
                "the best and the worst on each criterion (best-worst scaling; Louviere, Flynn & Marley 2015)")
    sentence += ("; " + "; ".join(design) + ".") if design else "."
    return (sentence + " A system's score is the share of the times its response was shown that it was picked "
            "best minus the share it was picked worst (Orme 2009; Kiritchenko & Mohammad 2017), with percentile "
            f"bootstrap intervals from {n_boot} resamples of contexts. The ranking fits a Bradley-Terry model to the "
            "comparisons the answers imply (the best beats each other response, each other response beats the "
            "worst), its intervals from the same resampling of contexts. Reliability is split-half: the "
            f"answers about each tuple split at random into two halves, {n_splits} times, the two halves' response "
            "scores correlated (Spearman) and the mean correlation stepped up by the Spearman-Brown formula, as "
            "Kiritchenko & Mohammad compare best-worst scaling with rating scales; a linked Likert study's mean "
            "ratings get the same measure. Control tuples (a control response built to be the worst on one "
            "criterion among real ones) are scored on that criterion only and kept out of every other table.")


def _likert_tidy(linked: LinkedStudy | None, *, include_late: bool,
                 exclude_flagged: bool) -> tuple[pd.DataFrame | None, list[str]]:
    """A linked Likert study's ratings as the tidy table, late ones and flagged raters left out as its own report
    leaves them out; and who was left out."""
    if linked is None or linked.table is None:
        return None, []
    from empeval.analysis.kinds.likert.load import tidy_from_export
    from empeval.analysis.kinds.likert.quality import flagged_annotators, rater_quality
    from empeval.analysis.stats.exclusions import exclude_annotators

    ratings = tidy_from_export(linked.table) if "item" not in linked.table.columns else linked.table
    if not include_late and "late" in ratings.columns:
        ratings = ratings.loc[~ratings["late"].astype(bool)].reset_index(drop=True)
    if not exclude_flagged or ratings.empty:
        return ratings, []
    flagged = flagged_annotators(rater_quality(ratings))
    return exclude_annotators(ratings, flagged), flagged


def renamed_choices(table: pd.DataFrame, names: dict[str, str]) -> pd.DataFrame:
    """The choice table with its systems under their display names (analysis.report.systems): ``best``, ``worst``,
    ``control_system``, the systems of ``shown`` (in the order shown) and ``tuple`` rebuilt from them (sorted).

    >>> from empeval.analysis.kinds.best_worst.schema import validate_choices
    >>> row = {"study": "bws", "assignment_id": 1, "annotator": "a", "context_id": 7, "criterion": "empathy",
    ...        "tuple": "gold|mime|moel", "shown": "moel|gold|mime", "best": "gold", "worst": "mime",
    ...        "position": 0, "is_control": "false", "control_system": "", "control_target": "", "late": False}
    >>> table = renamed_choices(validate_choices([row]), {"gold": "Human", "moel": "MoEL"})
    >>> table[["tuple", "shown", "best"]].values.tolist()
    [['Human|MoEL|mime', 'MoEL|Human|mime', 'Human']]
    """
    from empeval.analysis.kinds.best_worst.schema import SEPARATOR, tuple_name
    from empeval.analysis.report.systems import renamed

    if not names:
        return table
    table = renamed(table, names, ("best", "worst", "control_system"))
    shown = [[names.get(system, system) for system in value.split(SEPARATOR)] for value in table["shown"]]
    return table.assign(shown=[SEPARATOR.join(systems) for systems in shown],
                        tuple=[tuple_name(systems) for systems in shown])


def _blocks(tables: Any, figure: bytes | None) -> list[Block]:
    from empeval.analysis.kinds.best_worst.tables import RANKING_CAPTION, SCORES_CAPTION

    blocks: list[Block] = [Heading("Results", level=2)]
    if tables.scores.empty:
        return [*blocks, Paragraph("No answers about real tuples yet.")]
    blocks.append(Table(scores_display(tables.scores), caption=SCORES_CAPTION))
    if figure is not None:
        blocks.append(Image(figure, "figures/bws_scores.png", caption="Best-worst scores with 95% intervals."))
    if tables.likert is not None and not tables.likert.empty:
        likert = tables.likert
        blocks.append(Table(pd.DataFrame({
            "Criterion": likert["criterion"], "System": likert["system"],
            "Likert mean": [_number(v, 2) for v in likert["likert_mean"]],
            "Likert rank": likert["likert_rank"].astype(str),
            "Best - worst": [_number(v) for v in likert["bws_score"]], "BWS rank": likert["bws_rank"].astype(str),
            "BT rank": likert["bt_rank"].astype(str), "Spearman rho": [_number(v, 2) for v in likert["rho"]]}),
            caption="The linked Likert study beside the best-worst study: each system's mean rating (controls and "
                    "flagged raters left out) and rank, the best-worst score and its rank and the Bradley-Terry "
                    "rank; rho is the Spearman correlation of the Likert means and the best-worst scores over the "
                    "systems of each criterion."))
    if not tables.ranking.empty:
        ranks = tables.ranking
        blocks.append(Table(pd.DataFrame({
            "Criterion": ranks["criterion"], "Rank": ranks["rank"].astype(str), "System": ranks["system"],
            "Log strength": [_number(v, 2) for v in ranks["strength"]],
            "95% CI": [_interval(lo, hi, 2) for lo, hi in zip(ranks["ci_low"], ranks["ci_high"], strict=True)],
            "Implied wins": ranks["wins"].astype(str), "Implied losses": ranks["losses"].astype(str)}),
            caption=RANKING_CAPTION))
    reliability = tables.reliability
    blocks.append(Table(pd.DataFrame({
        "Criterion": reliability["criterion"], "Study": reliability["method"],
        "Responses": reliability["responses"].astype(str),
        "Split-half rho": [_number(v, 3) for v in reliability["spearman"]],
        "Spearman-Brown": [_number(v, 3) for v in reliability["spearman_brown"]],
        "Pearson": [_number(v, 3) for v in reliability["pearson"]],
        "Krippendorff alpha (interval)": [_number(v, 3) for v in reliability["alpha_interval"]]}),
        caption="Reliability: split-half correlations of response scores (mean over random splits of the answers "
                "about each unit into two halves) and their Spearman-Brown step-up; for the linked Likert study "
                "also Krippendorff's alpha (interval). Higher is more reliable."))
    position = tables.position
    blocks.append(Table(pd.DataFrame({
        "Criterion": position["criterion"], "Shown as": position["label"],
        "Best %": [_number(v) for v in position["best_pct"]], "Worst %": [_number(v) for v in position["worst_pct"]],
        "Expected %": [_number(v) for v in position["expected_pct"]], "p (best)": [_p(v) for v in position["p_best"]],
        "p (worst)": [_p(v) for v in position["p_worst"]]}),
        caption="Order shown: the share of the answers that picked the response shown at each place best and "
                "worst, against the share expected without an order effect (chi-square goodness of fit)."))
    if not tables.controls.empty:
        controls = tables.controls
        blocks.append(Table(pd.DataFrame({
            "Annotator": controls["annotator"], "Control tuples": controls["controls"].astype(str),
            "Passed": controls["passed"].astype(str), "Pass rate": [_number(100 * v) + "%"
                                                                   for v in controls["pass_rate"]]}),
            caption="Control tuples: a control response built to be the worst on one criterion among real "
                    "responses, scored on that criterion (passed: the control marked the worst)."))
    return blocks


def best_worst_report(choices: pd.DataFrame, *, name: str, likert: LinkedStudy | None = None, note: str = "",
                      meta: dict[str, Any] | None = None, include_late: bool = True, exclude_flagged: bool = True,
                      seed: int = 0, n_boot: int = N_BOOT, n_splits: int = N_SPLITS) -> Report:
    """The best-worst report of a choice table as sections: summary, the linked Likert study named (its ratings
    beside the scores and in the reliability table, flagged raters left out when `exclude_flagged`), `note`,
    the results (each table also a CSV: BEST_WORST_TABLES; the scores a figure and, when asked, a LaTeX table)
    and the methods. ReportRefused when every assignment was late and late ones are left out."""
    from empeval.analysis.kinds.best_worst.schema import validate_choices
    from empeval.analysis.kinds.best_worst.tables import best_worst_tables
    from empeval.analysis.report.latex import booktabs
    from empeval.analysis.report.plots import figure_png, system_means_plot
    from empeval.analysis.report.systems import display_names, renamed

    names = display_names(meta)
    table = renamed_choices(validate_choices(choices), names)
    late = int(table.loc[table["late"], ["assignment_id"]].drop_duplicates().shape[0])
    if not include_late and late and table["late"].all():
        raise ReportRefused(f"all {late} assignment(s) of {name!r} were submitted late: nothing to report without "
                            "them (leave out --without-late)")
    ratings, excluded = _likert_tidy(likert, include_late=include_late, exclude_flagged=exclude_flagged)
    ratings = renamed(ratings, names) if ratings is not None else None
    tables = best_worst_tables(table, include_late=include_late, likert=ratings, n_boot=n_boot, n_splits=n_splits,
                               seed=seed)
    figure = None
    if not tables.scores.empty:
        plot = system_means_plot(tables.scores.rename(columns={"score": "mean"}))
        for axis in plot.axes:
            axis.set_xlabel("best - worst, pp (95% CI)")
        figure = figure_png(plot)
    csv = {stem: getattr(tables, attribute) for stem, attribute in BEST_WORST_TABLES.items()
           if getattr(tables, attribute) is not None}
    report = Report(title=f"Human evaluation report: {name} (best-worst scaling)", sections=[
        Section("summary", [Paragraph(_summary(table, meta or {}, late, include_late))])])
    if likert is not None and ratings is not None:
        flagged = (f" (without the {len(excluded)} rater(s) its quality checks flag, as in its own report: "
                   f"{', '.join(excluded)})" if excluded else "")
        report.add(Section("linked", [Paragraph(
            f"Linked Likert study: **{likert.name}** (compare_with). Its means{flagged} stand beside the best-worst "
            "scores, and its reliability beside theirs.")]))
    if note:
        report.add(Section("note", [Paragraph(note)]))
    latex = ({} if tables.scores.empty else
             {"bws_scores": booktabs(scores_display(tables.scores), caption="Best-worst scores (percentage points).",
                                     label="tab:bws")})
    report.add(Section("results", _blocks(tables, figure), tables=csv,
                       figures={"bws_scores": figure} if figure is not None else {}, latex=latex),
               Section("methods", [Heading("Methods"), Paragraph(_methods(meta or {}, n_boot=n_boot,
                                                                         n_splits=n_splits))]))
    return report


@register
class BestWorstAnalysisKind(AnalysisKind):
    name: ClassVar[str] = "best_worst"
    label: ClassVar[str] = "best-worst scaling"
    columns: ClassVar[tuple[str, ...]] = BEST_WORST_COLUMNS

    def recognises(self, columns: Sequence[str]) -> bool:
        return "best" in columns and "worst" in columns

    def read_export(self, path: Path) -> pd.DataFrame:
        from empeval.analysis.kinds.best_worst.schema import read_choices

        return read_choices(path)

    def report(self, request: ReportRequest) -> Report:
        named = [linked for linked in request.linked if not linked.names_this]
        likert = next((linked for linked in named if linked.kind == "likert"), None)
        note = ""
        if likert is not None and likert.table is None:
            note = f"The linked Likert study {likert.name!r} has no ratings yet."
        elif named and likert is None:
            note = (f"The linked study {named[0].name!r} is not a Likert study: only a Likert study's means go beside "
                    "the best-worst scores.")
        return best_worst_report(request.table, name=request.name, likert=likert, note=note, meta=request.meta,
                                 include_late=request.include_late, exclude_flagged=request.exclude_flagged,
                                 seed=request.seed, n_boot=request.resamples(N_BOOT))

    def summary_lines(self, paths: dict[str, Path], criteria: Sequence[str]) -> list[str]:
        if "table_bws_scores" not in paths:
            return []
        likert = pd.read_csv(paths["table_likert_beside_bws"]) if "table_likert_beside_bws" in paths else None
        scores = pd.read_csv(paths["table_bws_scores"])
        order = {criterion: rank for rank, criterion in enumerate(criteria)}
        scores = scores.iloc[scores["criterion"].map(lambda c: order.get(c, len(order))).argsort(kind="stable")]
        return ["best-worst score per system (best - worst, percentage points; best first):",
                *best_worst_summary_lines(scores, likert)]

    def flagged_raters(self, table: pd.DataFrame, meta: dict) -> set[str] | None:
        """No quality rules flag a best-worst study's raters (its control tuples are reported per rater instead)."""
        return None

    def linked_section(self, request: ReportRequest, linked: list[LinkedStudy]) -> Section:
        """The best-worst studies whose compare_with names the reported study, and their answers so far."""
        blocks: list[Any] = [Heading("Linked best-worst scaling studies")]
        for other in linked:
            choices = 0 if other.table is None else len(other.table)
            blocks.append(Paragraph(
                f"**{other.name}**, a best-worst scaling study, is linked to this one (its compare_with names "
                f"{request.name}): {choices} best-worst choices so far. Its report (empeval report {other.name}) "
                "puts this study's means and reliability beside its scores."))
        return Section("linked_best_worst", blocks)
