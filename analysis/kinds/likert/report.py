"""The study report: what reviewers read. Markdown plus a self-contained HTML, with CSV tables and figures.

``write_report`` runs the whole analysis on a tidy ratings table (``analysis.kinds.likert.load``): rater quality and
exclusions, system means with CIs, pairwise tests with the declared correction, Friedman tests, agreement
with CIs and a reading of alpha beside AC2, the rater-aware check, results with and without the flagged
annotators side by side, figures, the annotators' comments, and a methods paragraph filled with the study's own
numbers (recruitment and pay included). Criteria appear in the study's order (``study_meta["criteria"]``).
What a small or degenerate study does not allow (one system, every annotator flagged, too few contexts) is
listed at the top and named in its section instead of a table. With ``latex`` the main results also go to
``latex/`` as a booktabs table (``empeval.analysis.report.latex``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from empeval.analysis.kinds import ReportRefused
from empeval.analysis.kinds.likert.load import DEFAULT_SCALE, require_columns, tidy_from_export
from empeval.analysis.kinds.likert.quality import (
    FLAG_RULES,
    control_summary,
    controls_beside_systems,
    flagged_annotators,
    rater_quality,
)
from empeval.analysis.report import plots
from empeval.analysis.report.comments import comments_section, with_export_comments
from empeval.analysis.report.document import (
    Block,
    BulletList,
    Heading,
    Image,
    Paragraph,
    Table,
)
from empeval.analysis.report.latex import booktabs
from empeval.analysis.report.qualification import qualification_sentence
from empeval.analysis.report.recruitment import recruitment_sentence
from empeval.analysis.report.sections import Report, Section
from empeval.analysis.report.sections import write_report as write_sections
from empeval.analysis.report.systems import (
    display_names,
    in_system_order,
    order_option,
    renamed,
    shown,
    system_order,
)
from empeval.analysis.report.tables import (
    SIGNIFICANCE_MARK,
    criteria_in_order,
    fmt,
    fmt_p,
    friedman_table,
    in_criterion_order,
    interval,
    pairs_table,
    paper_table,
    rankings,
    rater_check_table,
    wilcoxon_variants,
)
from empeval.analysis.report.tables import agreement_table as agreement_table_text
from empeval.analysis.stats.agreement import ALL_SYSTEMS, COEFFICIENT_LABELS, agreement_table
from empeval.analysis.stats.agreement_reading import alpha_beside_ac2
from empeval.analysis.stats.conclusions import DEFINITION as CONCLUSION_DEFINITION
from empeval.analysis.stats.conclusions import conclusion_changes
from empeval.analysis.stats.exclusions import ALL_RATERS, EXCLUDING_FLAGGED, exclude_annotators
from empeval.analysis.stats.generalize import TARGET_WORDS, check_target
from empeval.analysis.stats.rater_aware import rater_aware_check
from empeval.analysis.stats.significance import compare_pairs, friedman_test, system_means
from empeval.analysis.stats.threads import single_threaded_blas

if TYPE_CHECKING:  # the model-assisted section imports ppi_py (and numba): only when a judge is asked for
    from empeval.analysis.kinds import JudgeRequest

# Bootstrap resamples of the report's intervals and agreement unless asked otherwise (`report --n-boot`).
N_BOOT = 2000

CORRECTION_NAMES = {
    "holm": "Holm-Bonferroni",
    "bonferroni": "Bonferroni",
    "fdr_bh": "Benjamini-Hochberg (FDR)",
    "fdr_by": "Benjamini-Yekutieli (FDR)",
    "sidak": "Sidak",
    "holm-sidak": "Holm-Sidak",
    "hommel": "Hommel",
    "none": "no",
}

REPORT_COLUMNS = ("study", "item", "context", "system", "annotator", "criterion", "score", "is_control",
                  "control_kind", "control_target", "assignment", "started_at", "submitted_at", "seconds_on_item")


def write_report(
    ratings: pd.DataFrame,
    out_dir: Path,
    *,
    study_meta: dict | None = None,
    exclude_flagged: bool = True,
    correction: str = "holm",
    family: str = "criterion",
    alpha: float = 0.05,
    n_boot: int = N_BOOT,
    ci_level: float = 0.95,
    scale: tuple[int, int] = DEFAULT_SCALE,
    quality_thresholds: dict | None = None,
    random_effects: tuple[str, ...] = ("annotator", "item"),
    seed: int = 0,
    include_late: bool = True,
    latex: bool = False,
    judge: JudgeRequest | None = None,
    generalize: str | None = None,
) -> dict[str, Path]:
    """Analyse ``ratings`` (the tidy table, or the store's export, which is validated and converted first) and
    write ``report.md``, ``report.html`` (self-contained, figures as base64 PNG),
    ``figures/*.png`` and ``tables/*.csv`` under ``out_dir``.

    ``include_late``: keep the ratings submitted after their assignment had expired (the tidy table's ``late``
    column; a table without it counts every rating as on time); False leaves them out of every analysis.
    The report states how many there were and whether they were analysed.
    ``exclude_flagged``: drop the annotators flagged by ``rater_quality`` (thresholds overridable through
    ``quality_thresholds``) from the main results; results with everyone are shown side by side either way.
    ``correction`` and ``family`` declare the multiple-testing correction (see ``compare.compare_pairs``).
    ``study_meta`` may carry name, criteria (the study's criterion keys in the study file's order; others
    follow sorted), platform ("local", "prolific", "mturk": how raters were recruited), pay_per_assignment,
    currency, platform_fee (a fraction such as 0.2, or an amount per assignment when above 1),
    items_per_assignment and k (ratings per response); see ``empeval.analysis.report.recruitment`` for what the methods
    say of each platform and its pay. It may also carry systems (the system keys in the study file's order),
    display_names (system key -> the name a paper uses) and system_order ("study", the default, or "mean"): every
    table, figure, CSV and sentence then names a system by its display name, and every table and figure lists the
    systems in that one order (``empeval.analysis.report.systems``).

    A ``comment`` column (the export's, one comment per assignment repeated on its rows) is listed in a
    Comments section, once per assignment.

    With ``judge`` (``empeval.analysis.report.judged.JudgeRequest``: an automatic judge's scores of the study's items),
    a model-assisted section before the methods: human-only, judge-only (biased) and prediction-powered means,
    paired differences corrected as the Likert ones, judge-human agreement, a calibration figure
    (figures/judge_calibration.png), the items the judge failed on; its tables go to tables/judge_*.csv. When
    the judge failed on an item and ``judge.allow_missing`` is False, ``JudgeCoverageError`` is raised before
    anything is written.

    ``generalize`` ("items", "raters" or "both"; default ``study_meta["generalize"]``, else "items") says what the
    intervals and p-values of the system means and the pairwise comparisons generalise to
    (``empeval.analysis.stats.generalize``): "items" keeps the percentile bootstrap over items and the Wilcoxon tests
    (new contexts rated by this study's raters); "raters" and "both" replace them with the crossed random-effects
    intervals and t-tests for new raters (on this study's contexts, or on new ones too), the bootstrap intervals
    and the Wilcoxon p-values kept beside them in the CSV tables. The captions and the methods say which. With
    one rater, "raters" and "both" fall back to "items" and the report says so.

    Returns a dict with the paths: "markdown", "html", one "figure_<name>" per figure, one "table_<name>" per
    CSV and, with ``latex``, "latex_main_results" (latex/main_results.tex, a booktabs table). Figures and the
    tables of analyses that could not run are not written.
    """
    with single_threaded_blas():
        report = likert_report(ratings, study_meta=study_meta, exclude_flagged=exclude_flagged,
                               correction=correction, family=family, alpha=alpha, n_boot=n_boot, ci_level=ci_level,
                               scale=scale, quality_thresholds=quality_thresholds, random_effects=random_effects,
                               seed=seed, include_late=include_late, judge=judge, generalize=generalize)
    return write_sections(report, Path(out_dir), latex=latex)


@dataclass
class LikertAnalysis:
    """Everything the Likert report's sections read, computed once (analyse): the ratings as given and as analysed
    (flagged raters out unless kept), rater quality, what could not be computed and why, the tables of the analyses
    that ran (None where they could not), the judged tables of a judge, the facts of the methods paragraph, and the
    options."""

    ratings: pd.DataFrame
    analysed: pd.DataFrame
    quality: pd.DataFrame
    flagged: list[str]
    criteria: list[str]
    gaps: Gaps
    late: dict[str, int]
    meta: dict
    options: dict
    means: pd.DataFrame | None = None
    pairs: pd.DataFrame | None = None
    friedman: pd.DataFrame | None = None
    agreement: pd.DataFrame | None = None
    rater_check: pd.DataFrame | None = None
    both: dict[str, pd.DataFrame] | None = None
    judged: Any = None
    systems: list[str] = field(default_factory=list)  # the real systems in the report's one order

    def __getattr__(self, name: str) -> Any:  # the options by name: alpha, correction, n_boot, ...
        options = self.__dict__.get("options", {})
        if name in options:
            return options[name]
        raise AttributeError(name)


def analyse(ratings: pd.DataFrame, *, study_meta, exclude_flagged, correction, family, alpha, n_boot, ci_level, scale,
            quality_thresholds, random_effects, seed, include_late, judge, generalize=None) -> LikertAnalysis:
    """The analyses of the report on `ratings` (see write_report), before anything is written: a judge that failed
    on an item stops the report here (JudgeCoverageError)."""
    if "item" not in ratings.columns and "item_id" in ratings.columns:
        # The store's export as it comes.
        ratings = with_export_comments(tidy_from_export(ratings, scale=scale), ratings)
    require_columns(ratings, REPORT_COLUMNS, what="write_report")
    if ratings.empty:
        raise ReportRefused("the ratings table is empty: nothing to report")
    if "late" not in ratings.columns:
        ratings = ratings.assign(late=False)  # a tidy table from before the export carried it: all on time
    is_late = ratings["late"].astype(bool)
    late = _late_counts(ratings.loc[is_late])
    if not include_late:
        ratings = ratings.loc[~is_late].reset_index(drop=True)
        if ratings.empty:
            raise ReportRefused(f"all {late['n_ratings']} ratings were submitted late: nothing to report without "
                             "them (include_late=True keeps them)")
    meta = dict(study_meta or {})
    generalize = check_target(generalize or meta.get("generalize") or "items")
    names = display_names(meta)
    ratings = renamed(ratings, names)  # every table, figure and sentence then names a system the same way
    if judge is not None and names:
        judge = replace(judge, scores=renamed(judge.scores, names))
    quality = rater_quality(ratings, **(quality_thresholds or {}))
    flagged = flagged_annotators(quality)
    analysed = exclude_annotators(ratings, flagged) if exclude_flagged else ratings
    boot = {"n_boot": n_boot, "ci_level": ci_level, "seed": seed}
    is_real = ~analysed["is_control"].astype(bool)  # a mask, not a copy of the analysed table
    criteria = criteria_in_order(ratings["criterion"].unique(), meta.get("criteria"))
    done = LikertAnalysis(ratings=ratings, analysed=analysed, quality=quality, flagged=flagged, criteria=criteria,
                          gaps=Gaps(), late=late, meta=meta, options={
                              "exclude_flagged": exclude_flagged, "correction": correction, "family": family,
                              "alpha": alpha, "n_boot": n_boot, "ci_level": ci_level, "scale": scale,
                              "random_effects": random_effects, "seed": seed, "include_late": include_late,
                              "generalize": generalize, "target": "items"})
    if not is_real.any():
        done.gaps.add("results", _why_no_results(ratings, quality, flagged, exclude_flagged))
    else:
        done.means = system_means(analysed, **boot)
        done.pairs = compare_pairs(analysed, family=family, correction=correction, alpha=alpha, **boot)
        done.friedman = friedman_test(analysed)
        done.agreement = agreement_table(analysed, scale=scale, **boot)
        declared = [shown(s, names) for s in meta.get("systems") or ()]  # the study file's order
        present = analysed.loc[is_real, "system"].unique()
        done.systems = system_order(present, declared=declared, means=done.means, by_mean=order_option(meta) == "mean")
        systems = sorted(present)
        if len(systems) < 2:
            done.gaps.add("comparisons", f"only one system ({systems[0]}) has ratings: the pairwise tests, the "
                          "Friedman tests and the rater-aware check compare two or more systems rated on the same "
                          "contexts")
        elif done.pairs["p_wilcoxon"].notna().sum() == 0:
            reasons = sorted({str(note).split("; ")[0] for note in done.pairs["note"].dropna() if str(note)})
            done.gaps.add("comparisons", f"no pair of systems could be tested ({'; '.join(reasons)}), so neither "
                          "could the rater-aware check")
        else:
            done.rater_check = rater_aware_check(analysed, raw=done.pairs, alpha=alpha, correction=correction,
                                                 family=family, random_effects=random_effects, n_boot=n_boot,
                                                 seed=seed)
        if done.agreement["estimate"].notna().sum() == 0:
            done.gaps.add("agreement", _why_no_agreement(done.agreement))
        if generalize != "items":
            # After the rater-aware check, which compares the item-level tests with the mixed model.
            done.means, done.pairs, why = _for_target(analysed, done.means, done.pairs, generalize, criteria=criteria,
                                                      ci_level=ci_level, family=family, correction=correction,
                                                      alpha=alpha)
            if why:
                done.gaps.add("generalize", why)
            else:
                done.options["target"] = generalize
    if flagged and is_real.any() and done.means is not None:
        # One half of each side-by-side table is the main result already computed: reuse it, run the other.
        other = ratings if exclude_flagged else exclude_annotators(ratings, flagged)
        if (~other["is_control"].astype(bool)).any():
            other_means = system_means(other, **boot)
            other_pairs = compare_pairs(other, family=family, correction=correction, alpha=alpha, **boot)
            if done.target != "items":
                other_means, other_pairs, _ = _for_target(other, other_means, other_pairs, done.target,
                                                          criteria=criteria, ci_level=ci_level, family=family,
                                                          correction=correction, alpha=alpha)
            done.both = {
                "means": _stacked(done.means, other_means, exclude_flagged),
                "pairs": _stacked(done.pairs, other_pairs, exclude_flagged),
                "agreement": _stacked(done.agreement, agreement_table(other, scale=scale, **boot), exclude_flagged)}
    if judge is not None:
        from empeval.analysis.report.judged import judged_tables

        done.judged = judged_tables(analysed, judge.scores, judge=judge.name, version=judge.version,
                                    cross_fitted=judge.cross_fitted, allow_missing=judge.allow_missing,
                                    criteria=criteria, correction=correction, family=family, alpha=alpha,
                                    ci_level=ci_level, n_boot=n_boot, seed=seed, design_sample=judge.design_sample,
                                    pair_scores=judge.pair_scores, pair_judge=judge.pair_judge,
                                    generalize=done.target)
        done.judged.systems = list(done.systems)
    return done


def likert_report(ratings: pd.DataFrame, *, study_meta: dict | None = None, exclude_flagged: bool = True,
                  correction: str = "holm", family: str = "criterion", alpha: float = 0.05, n_boot: int = N_BOOT,
                  ci_level: float = 0.95, scale: tuple[int, int] = DEFAULT_SCALE,
                  quality_thresholds: dict | None = None,
                  random_effects: tuple[str, ...] = ("annotator", "item"), seed: int = 0, include_late: bool = True,
                  judge: JudgeRequest | None = None, generalize: str | None = None) -> Report:
    """The Likert report as sections (see write_report for what each option does), in the order a reader needs
    them: summary, what could not be computed, results, rater-aware check, agreement, score distributions, rater
    quality, with and without the flagged raters, comments, the model-assisted section (with a judge) and the
    methods."""
    done = analyse(ratings, study_meta=study_meta, exclude_flagged=exclude_flagged, correction=correction,
                   family=family, alpha=alpha, n_boot=n_boot, ci_level=ci_level, scale=scale,
                   quality_thresholds=quality_thresholds, random_effects=random_effects, seed=seed,
                   include_late=include_late, judge=judge, generalize=generalize)
    study_name = done.meta.get("name") or ", ".join(sorted(map(str, done.ratings["study"].unique())))
    report = Report(title=f"Human evaluation report: {study_name}", sections=[])
    report.add(*(section(done) for section in SECTIONS))
    return report


def _summary_section(done: LikertAnalysis) -> Section:
    facts = _facts_of(done)
    return Section("summary", [Paragraph(_summary_sentence(facts, done.exclude_flagged) + " "
                                         + _late_sentence(done.late, done.include_late))])


def _gaps_section(done: LikertAnalysis) -> Section | None:
    if not done.gaps:
        return None
    return Section("gaps", [Heading("What could not be computed"), BulletList(done.gaps.lines())])


def _figures(done: LikertAnalysis) -> dict[str, bytes]:
    """The two figures of the results, once per analysis (the results and the distributions show them)."""
    if "figures" not in done.__dict__:
        order = done.systems
        done.__dict__["figures"] = {
            "score_distributions": plots.figure_png(plots.stacked_score_shares(
                done.analysed, scale=done.scale, criteria=done.criteria, systems=order)),
            "system_means": plots.figure_png(plots.system_means_plot(done.means, criteria=done.criteria,
                                                                     systems=order, ci_level=done.ci_level))}
    return done.__dict__["figures"]


def _results_section(done: LikertAnalysis) -> Section:
    blocks: list[Block] = [Heading("Results")]
    if done.means is None:
        blocks.append(Paragraph(f"Not computed: {done.gaps.why('results')}."))
        return Section("results", blocks)
    means, pairs, alpha, criteria = done.means, done.pairs, done.alpha, done.criteria
    assert pairs is not None and done.friedman is not None and done.agreement is not None
    main = paper_table(means, pairs, alpha=alpha, criteria=criteria, systems=done.systems)
    caption = _paper_caption(done.correction, done.family, alpha, done.ci_level, done.n_boot, done.target)
    figures = _figures(done)
    blocks += [Table(main, caption=caption),
               Paragraph("Ranking per criterion (by mean; '>' marks a significant difference between neighbours "
                         "after correction, '~' one that is not):"),
               BulletList([f"{criterion}: {ranking}" for criterion, ranking in
                           rankings(means, pairs, alpha=alpha, criteria=criteria).items()]),
               Image(figures["system_means"], "figures/system_means.png", caption=(
                   f"Mean score per system with {interval_words(done.target, done.ci_level, done.n_boot)}; systems "
                   "in the "
                   f"order of every table of the report ({_order_words(done)}), the first at the top.")),
               Heading("Pairwise comparisons", level=3)]
    if "comparisons" in done.gaps:
        blocks.append(Paragraph(f"Not computed: {done.gaps.why('comparisons')}."))
    else:
        blocks.append(Table(pairs_table(pairs, criteria, systems=done.systems), caption=_pairs_caption(done, pairs)))
    blocks.append(Table(friedman_table(done.friedman, criteria),
                        caption="Friedman tests across all systems (contexts as blocks)."))
    return Section("results", blocks, tables={"system_means": means, "pairwise_tests": pairs,
                                              "friedman": done.friedman, "agreement": done.agreement},
                   figures={"system_means": figures["system_means"]},
                   latex={"main_results": booktabs(main, caption=caption, label="tab:main-results")})


def _rater_aware_section(done: LikertAnalysis) -> Section | None:
    if done.means is None:
        return None
    blocks: list[Block] = [Heading("Rater-aware check", level=3)]
    if done.rater_check is None:
        blocks.append(Paragraph(f"Not computed: {done.gaps.why('comparisons')}."))
        return Section("rater_aware", blocks)
    blocks += _rater_check_blocks(done.rater_check, done.random_effects, done.criteria, done.systems)
    return Section("rater_aware", blocks, tables={"rater_aware_check": done.rater_check})


def _agreement_section(done: LikertAnalysis) -> Section | None:
    if done.means is None:
        return None
    blocks: list[Block] = [Heading("Agreement")]
    if "agreement" in done.gaps:
        blocks.append(Paragraph(f"Not computed: {done.gaps.why('agreement')}."))
        return Section("agreement", blocks)
    assert done.agreement is not None
    blocks.append(Table(agreement_table_text(done.agreement, done.criteria), caption=(
        f"Inter-annotator agreement per criterion, {done.ci_level:.0%} percentile bootstrap CIs over items "
        f"(B = {done.n_boot}); control items left out. The ICC needs the same number of ratings on every item: "
        "where they differ it is computed on the largest balanced subset, named in the notes below.")))
    reading = alpha_beside_ac2(done.agreement, done.analysed, done.criteria)
    if reading:
        blocks.append(Paragraph(reading))
    notes = _agreement_notes(done.agreement, done.criteria)
    if notes:
        blocks.append(BulletList(notes))
    return Section("agreement", blocks)


def _distributions_section(done: LikertAnalysis) -> Section | None:
    if done.means is None:
        return None
    figure = _figures(done)["score_distributions"]
    return Section("distributions", [Heading("Score distributions"), Image(
        figure, "figures/score_distributions.png", caption=(
            "Share of each score per system (stacked, lowest score on the left; n: ratings), one panel per "
            "criterion, systems in the order of the figure above and the tables; control items left out."))],
        figures={"score_distributions": figure})


def _quality_section(done: LikertAnalysis) -> Section:
    return Section("quality", [Heading("Rater quality"),
                               *_quality_blocks(done.ratings, done.quality, done.flagged, done.exclude_flagged,
                                                done.criteria)],
                   tables={"rater_quality": done.quality})


def _side_by_side_section(done: LikertAnalysis) -> Section | None:
    if done.both is None:
        return None
    both = done.both
    return Section("side_by_side", [Heading("With and without the flagged annotators"),
                                    *_side_by_side_blocks(both["means"], both["pairs"], both["agreement"], done.alpha,
                                                          done.criteria, done.systems)],
                   tables={"system_means_side_by_side": both["means"], "pairwise_tests_side_by_side": both["pairs"],
                           "agreement_side_by_side": both["agreement"]})


def _comments_section(done: LikertAnalysis) -> Section | None:
    """Comments on assignments and on single items (analysis.report.comments), as written."""
    return comments_section(done.ratings)


def _judged_section(done: LikertAnalysis) -> Section | None:
    """The model-assisted section (an option: a judge's scores), from analysis.report.judged."""
    if done.judged is None:
        return None
    from empeval.analysis.report.judged import calibration_plot, judged_blocks, means_caption, means_table

    judged = done.judged
    figures: dict[str, bytes] = {}
    if not judged.calibration.empty:
        figures["judge_calibration"] = plots.figure_png(calibration_plot(
            judged.calibration, criteria=[c for c in judged.criteria if c in set(judged.calibration["criterion"])],
            ci_level=done.ci_level))
    latex = ({"judge_means": booktabs(means_table(judged), caption=means_caption(judged, done.ci_level),
                                      label="tab:judge-means")} if judged.means is not None else {})
    blocks = judged_blocks(judged, figure_png=figures.get("judge_calibration"),
                           figure_path="figures/judge_calibration.png",
                           correction_name=CORRECTION_NAMES.get(done.correction, done.correction),
                           family_words=_family_words(done.family), alpha=done.alpha, ci_level=done.ci_level,
                           n_boot=done.n_boot)
    return Section("judged", list(blocks), tables=judged.csv_tables(), figures=figures, latex=latex)


def _methods_section(done: LikertAnalysis) -> Section:
    return Section("methods", [Heading("Methods"), Paragraph(methods_paragraph(
        _facts_of(done), agreement=done.agreement, pairs=done.pairs, friedman=done.friedman,
        rater_check=done.rater_check, meta=done.meta, correction=done.correction, family=done.family,
        alpha=done.alpha, n_boot=done.n_boot, ci_level=done.ci_level, scale=done.scale,
        exclude_flagged=done.exclude_flagged, target=done.target,
        fallback=done.gaps.why("generalize") if "generalize" in done.gaps else ""))])


def _facts_of(done: LikertAnalysis) -> dict:
    facts = _facts(done.ratings, done.analysed, done.quality, done.flagged, done.exclude_flagged, done.criteria,
                   done.systems)
    facts.update(late=done.late, include_late=done.include_late)
    return facts


# The Likert report's sections, in order: each reads the one analysis and says nothing (None) when it has nothing to
# say. The model-assisted section is there by option (a judge's scores in the request).
SECTIONS = (_summary_section, _gaps_section, _results_section, _rater_aware_section, _agreement_section,
            _distributions_section, _quality_section, _side_by_side_section, _comments_section, _judged_section,
            _methods_section)


class Gaps:
    """What the report could not compute, by section, with why: listed at the top and named in each section."""

    LABELS = {"results": "System means, pairwise tests, agreement and figures",
              "generalize": "Intervals and tests for new raters",
              "comparisons": "Pairwise tests, Friedman tests and the rater-aware check",
              "agreement": "Agreement coefficients"}

    def __init__(self) -> None:
        self._why: dict[str, str] = {}

    def add(self, section: str, why: str) -> None:
        self._why[section] = why

    def why(self, section: str) -> str:
        return self._why[section]

    def __contains__(self, section: str) -> bool:
        return section in self._why

    def __bool__(self) -> bool:
        return bool(self._why)

    def lines(self) -> list[str]:
        return [f"{self.LABELS[section]}: not computed, {why}." for section, why in self._why.items()]


def _why_no_results(ratings: pd.DataFrame, quality: pd.DataFrame, flagged: list[str], exclude_flagged: bool) -> str:
    real = ratings.loc[~ratings["is_control"].astype(bool)]
    if real.empty:
        return "every rating is of a control item; results need ratings of the real systems' responses"
    if exclude_flagged and flagged:
        everyone = quality["annotator"].nunique()
        rated = real["annotator"].nunique()
        return (f"every annotator who rated a real response ({rated} of {everyone} annotators) was flagged by the "
                "quality checks, and flagged annotators are excluded (see Rater quality for why). Keep them "
                "(empeval report --keep-flagged) to see their results, or collect ratings from more annotators")
    return "no ratings of real responses are left"  # pragma: no cover - the two cases above are exhaustive


def _why_no_agreement(agreement: pd.DataFrame) -> str:
    notes = sorted({str(n) for n in agreement["note"].dropna() if str(n)})
    return "; ".join(notes[:2]) if notes else "too few ratings per item"


def _stacked(main: pd.DataFrame, other: pd.DataFrame, exclude_flagged: bool) -> pd.DataFrame:
    """The table ``exclusions.side_by_side`` would build, from the main result and the other one."""
    everyone, kept = (other, main) if exclude_flagged else (main, other)
    table = pd.concat([everyone.assign(raters=ALL_RATERS), kept.assign(raters=EXCLUDING_FLAGGED)], ignore_index=True)
    return table[["raters", *[c for c in table.columns if c != "raters"]]]


def _for_target(ratings: pd.DataFrame, means: pd.DataFrame, pairs: pd.DataFrame, target: str, *, criteria: list[str],
                ci_level: float, family: str, correction: str, alpha: float) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """The system means and the pairwise tests with the intervals and p-values of ``target`` ("raters" or "both";
    ``empeval.analysis.stats.generalize``): ``ci_low``/``ci_high`` of the means become the target's t interval (the
    bootstrap's kept as ``items_ci_low``/``items_ci_high``, with ``se``, ``df``, ``target``); the pairs gain
    ``diff_ci_low``/``diff_ci_high``, ``diff_se``, ``diff_df``, ``t_target``, ``p_target``, and
    ``p_adj``/``significant`` become the target's (the Wilcoxon ones kept as ``p_adj_wilcoxon`` and
    ``significant_wilcoxon``). When the target cannot be computed (one rater), the tables come back unchanged with
    why, in words, as the third value."""
    from empeval.analysis.stats.generalize import generalized_means, generalized_pairs

    rated = [c for c in criteria if c in set(means["criterion"])]
    try:
        target_means = generalized_means(ratings, target=target, criteria=rated, ci_level=ci_level)
        target_pairs = generalized_pairs(ratings, target=target, criteria=rated, ci_level=ci_level, family=family,
                                         correction=correction, alpha=alpha)
    except ValueError as error:
        return means, pairs, (f"{error}; the intervals and p-values shown are for {TARGET_WORDS['items']} (what "
                              f"--generalize items gives)")
    keys = ["criterion", "system"]
    means = means.rename(columns={"ci_low": "items_ci_low", "ci_high": "items_ci_high"}).merge(
        target_means[[*keys, "ci_low", "ci_high", "se", "df"]], on=keys, how="left").assign(target=target)
    keys = ["criterion", "system_a", "system_b"]
    target_pairs = target_pairs[[*keys, "ci_low", "ci_high", "se", "df", "t", "p", "p_adj", "significant"]].rename(
        columns={"ci_low": "diff_ci_low", "ci_high": "diff_ci_high", "se": "diff_se", "df": "diff_df",
                 "t": "t_target", "p": "p_target"})
    pairs = pairs.rename(columns={"p_adj": "p_adj_wilcoxon", "significant": "significant_wilcoxon"}).merge(
        target_pairs, on=keys, how="left").assign(target=target)
    pairs["significant"] = pairs["significant"].fillna(False).astype(bool)
    return means, pairs, ""


def interval_words(target: str, ci_level: float, n_boot: int) -> str:
    """What the intervals of the means are and what they are valid for, for a caption.

    >>> interval_words("items", 0.95, 2000)
    "95% percentile bootstrap CI over items, B = 2000, valid for new contexts rated by this study's raters"
    """
    if target == "items":
        return f"{ci_level:.0%} percentile bootstrap CI over items, B = {n_boot}, valid for {TARGET_WORDS['items']}"
    return (f"{ci_level:.0%} t interval from the crossed random-effects variance (contexts, responses, raters and "
            f"raters' system preferences as random), valid for {TARGET_WORDS[target]}")


def test_words(target: str) -> str:
    """The test behind the pairwise p-values, for a caption."""
    if target == "items":
        return "two-sided Wilcoxon signed-rank test on item-level means"
    return (f"two-sided t-test of the mean difference of item-level means with the crossed random-effects variance, "
            f"valid for {TARGET_WORDS[target]}")


# --- tables ---------------------------------------------------------------------------------------------


def _paper_caption(correction: str, family: str, alpha: float, ci_level: float, n_boot: int,
                   target: str = "items") -> str:
    return (f"Mean score per system (1 = worst) [{interval_words(target, ci_level, n_boot)}]. "
            f"n: responses rated (ratings per criterion). Bold: best system on the criterion. {SIGNIFICANCE_MARK}: "
            f"significantly different from the best system ({test_words(target)}, "
            f"{CORRECTION_NAMES.get(correction, correction)} correction over {_family_words(family)}, "
            f"p < {alpha:g}).")


def _pairs_caption(done: LikertAnalysis, pairs: pd.DataFrame) -> str:
    correction = CORRECTION_NAMES.get(done.correction, done.correction)
    if done.target == "items":
        return (f"Two-sided Wilcoxon signed-rank tests on item-level means paired by context "
                f"({wilcoxon_variants(pairs)}), valid for {TARGET_WORDS['items']}; p adj.: {correction} "
                f"correction over {_family_words(done.family)}; sig.: p adj. < {done.alpha:g}; effect sizes with "
                f"{done.ci_level:.0%} CIs. Raw p-values, W+ and the paired t-tests are in tables/pairwise_tests.csv.")
    return (f"Δ mean with its {done.ci_level:.0%} interval and p adj. from the {test_words(done.target)} "
            f"(Satterthwaite degrees of freedom); p adj.: {correction} correction over {_family_words(done.family)}; "
            f"sig.: p adj. < {done.alpha:g}; effect sizes with {done.ci_level:.0%} CIs. The Wilcoxon signed-rank "
            "tests (valid for this study's raters only) are in tables/pairwise_tests.csv beside them "
            "(p_adj_wilcoxon).")


def _order_words(done: LikertAnalysis) -> str:
    """How the report orders its systems, for a caption."""
    if order_option(done.meta) == "mean":
        return "best mean over the criteria first"
    return "the study file's order" if done.meta.get("systems") else "by name"


def _family_words(family: str) -> str:
    return "all pairs within each criterion" if family == "criterion" else "all pairwise tests of the study"


def _agreement_notes(agreement: pd.DataFrame, criteria: list[str]) -> list[str]:
    agreement = in_criterion_order(agreement, criteria)
    pooled = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & agreement["estimate"].isna()]
    notes = [f"{COEFFICIENT_LABELS[r.coefficient]}, {r.criterion}: n/a, {r.note}" for r in pooled.itertuples()]
    icc = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & (agreement["coefficient"] == "icc")
                        & agreement["estimate"].notna()]
    notes += [f"ICC, {r.criterion}: {r.note}" for r in icc.itertuples()]
    fleiss = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & (agreement["coefficient"] == "fleiss_kappa")
                           & agreement["estimate"].notna()]
    notes += [f"Fleiss' kappa, {r.criterion}: {r.note}" for r in fleiss.itertuples() if "left out" in r.note]
    return notes


def _rater_check_blocks(check: pd.DataFrame, random_effects: tuple[str, ...], criteria: list[str],
                        systems: list[str] | None = None) -> list[Block]:
    effects = " and ".join(random_effects)
    intro = Paragraph(
        f"Linear mixed model score ~ system with crossed random intercepts for {effects} (Gao & Owen 2017 "
        "moment estimates of the variances, REML on small designs; GLS fixed effects; Wald tests of each pair, "
        "same correction), and Wilcoxon tests on annotator-z-scored scores, compared with the item-level "
        "results above. A check disagrees with them on a pair when it reverses the pair's order or gains or "
        "loses significance.")
    disagreeing = check.loc[check["flagged"]]
    blocks: list[Block] = [intro]
    if disagreeing.empty:
        blocks.append(Paragraph("Neither check disagrees with the item-level tests on any pair."))
    else:
        verb = "disagrees" if len(disagreeing) == 1 else "disagree"
        blocks.append(Paragraph(f"**The checks {verb} with the item-level tests on "
                                f"{_count(len(disagreeing), 'pair')}:**"))
    blocks.append(Table(rater_check_table(check, criteria, systems)))
    notes = sorted({n for n in check["lmm_note"] if n} | {n for n in check["z_note"] if n})
    if notes:
        blocks.append(BulletList(notes))
    return blocks


def _quality_blocks(ratings: pd.DataFrame, quality: pd.DataFrame, flagged: list[str],
                    exclude_flagged: bool, criteria: list[str] | None = None) -> list[Block]:
    n = len(quality)
    action = "excluded from the main results" if exclude_flagged else "kept in the main results (exclude_flagged off)"
    blocks: list[Block] = [Paragraph(f"{len(flagged)} of {n} annotators flagged, {action}.")]
    if flagged:
        blocks.append(BulletList([f"{r.annotator}: {r.reasons}" for r in quality.loc[quality["flagged"]].itertuples()]))
    controls = control_summary(ratings)
    if not controls.empty:
        controls = in_criterion_order(controls, criteria_in_order(controls["criterion"].unique(), criteria))
        blocks.append(Table(pd.DataFrame({
            "Control targets": controls["criterion"], "controls rated": controls["n_controls"].astype(str),
            "scored below the real responses": controls["n_passed"].astype(int).astype(str),
            "pass rate": [f"{v:.0%}" for v in controls["pass_rate"]],
        }), caption="Control items, by the criterion each is built to fail (all annotators)."))
    beside = controls_beside_systems(ratings)
    if not beside.empty:
        beside = beside.rename(columns={"control_target": "criterion"})
        beside = in_criterion_order(beside, criteria_in_order(beside["criterion"].unique(), criteria)).rename(
            columns={"criterion": "control_target"})
        criteria = criteria_in_order([c.removeprefix("mean_") for c in beside.columns if c.startswith("mean_")],
                                     criteria)
        blocks.append(Table(pd.DataFrame({
            "Control": beside["control_kind"], "built to fail": beside["control_target"],
            **{c.capitalize(): [fmt(v) for v in beside[f"mean_{c}"]] for c in criteria},
            "lowest real system on that criterion": [f"{s} ({fmt(m)})" for s, m in
                                                     zip(beside["lowest_system"], beside["lowest_system_mean"],
                                                         strict=True)],
            "control last there": ["yes" if v else "NO" for v in beside["last_on_target"]],
        }), caption="Mean score of each control next to the real systems (all annotators): each control should "
                    "rank last on the criterion it is built to fail."))
    rows = []
    for q in quality.itertuples(index=False):
        rows.append({"Annotator": q.annotator, "items": str(q.n_items),
                     "controls passed": "n/a" if not q.n_controls else f"{q.control_pass_rate:.0%} of {q.n_controls}",
                     "straight-lined": _percent(q.straightline_rate), "halo": fmt(q.halo),
                     "median s/item": fmt(q.median_seconds, 1), "r with consensus": fmt(q.consensus_r),
                     "flagged": "yes" if q.flagged else ""})
    blocks.append(Table(pd.DataFrame(rows), caption=(
        "Per annotator: share of controls scored below the real responses on the targeted criterion; share of "
        "items with one score on every criterion; halo (mean Spearman correlation between criteria); median "
        "time per item; correlation with the leave-one-out consensus of the other annotators.")))
    return blocks


def _percent(value) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.0%}"


def _side_by_side_blocks(means_both, pairs_both, agreement_both, alpha: float, criteria: list[str],
                         systems: list[str]) -> list[Block]:
    wide = means_both.pivot_table(index=["criterion", "system"], columns="raters", values="mean").reset_index()
    rows = []
    wide = in_system_order(in_criterion_order(wide, criteria), systems, ("criterion", "system"))
    for entry in wide.itertuples(index=False):
        record = dict(zip(wide.columns, entry, strict=True))
        everyone, kept = record.get(ALL_RATERS, np.nan), record.get(EXCLUDING_FLAGGED, np.nan)
        rows.append({"Criterion": record["criterion"], "System": record["system"], "mean, all raters": fmt(everyone),
                     "mean, excluding flagged": fmt(kept), "change": fmt(kept - everyone)})
    blocks: list[Block] = [Table(pd.DataFrame(rows),
                                 caption="System means with all annotators and without the flagged ones.")]
    pair_rows = []
    keyed = pairs_both.set_index(["raters", "criterion", "system_a", "system_b"])
    keys = pairs_both[["criterion", "system_a", "system_b"]].drop_duplicates()
    keys = in_system_order(in_criterion_order(keys, criteria), systems, ("criterion", "system_a", "system_b"))
    for criterion, a, b in keys.itertuples(index=False):
        everyone, kept = (keyed.loc[(raters, criterion, a, b)] if (raters, criterion, a, b) in keyed.index else None
                          for raters in (ALL_RATERS, EXCLUDING_FLAGGED))
        pair_rows.append({
            "Criterion": criterion, "Pair (a vs b)": f"{a} vs {b}",
            "Δ, all": fmt(everyone["mean_diff"]) if everyone is not None else "n/a",
            "p adj., all": fmt_p(everyone["p_adj"]) if everyone is not None else "n/a",
            "Δ, excl.": fmt(kept["mean_diff"]) if kept is not None else "n/a",
            "p adj., excl.": fmt_p(kept["p_adj"]) if kept is not None else "n/a",
            "conclusion changes": "yes" if (everyone is not None and kept is not None and conclusion_changes(
                everyone["mean_diff"], everyone["p_adj"], kept["mean_diff"], kept["p_adj"], alpha=alpha)) else "no",
        })
    if pair_rows:
        blocks.append(Table(pd.DataFrame(pair_rows), caption=(
            f"Pairwise tests with all annotators and without the flagged ones. {CONCLUSION_DEFINITION}")))
    alpha_rows = agreement_both.loc[(agreement_both["system"] == ALL_SYSTEMS)
                                    & (agreement_both["coefficient"] == "alpha_ordinal")]
    agreement_rows = []
    for criterion in criteria_in_order(alpha_rows["criterion"].unique(), criteria):
        part = alpha_rows.loc[alpha_rows["criterion"] == criterion]
        cells = {r.raters: fmt(r.estimate) + interval(r.ci_low, r.ci_high) for r in part.itertuples()}
        agreement_rows.append({"Criterion": criterion, "alpha (ordinal), all": cells.get(ALL_RATERS, "n/a"),
                               "alpha (ordinal), excl.": cells.get(EXCLUDING_FLAGGED, "n/a")})
    blocks.append(Table(pd.DataFrame(agreement_rows),
                        caption="Krippendorff's alpha (ordinal) with and without the flagged annotators."))
    return blocks


# --- methods paragraph ----------------------------------------------------------------------------------


def _facts(ratings, analysed, quality, flagged, exclude_flagged, criteria: list[str],
           systems: list[str] | None = None) -> dict:
    real = analysed.loc[~analysed["is_control"].astype(bool), ["criterion", "item", "context", "system"]]
    rated = set(real["criterion"].unique())
    per_item = real.groupby(["item", "criterion"]).size()
    controls = ratings.loc[ratings["is_control"].astype(bool)]
    return {
        "n_ratings": int(len(real)),
        "n_items": int(real["item"].nunique()),
        "n_contexts": int(real["context"].nunique()),
        "systems": [s for s in systems if s in set(real["system"])] if systems else sorted(real["system"].unique()),
        "criteria": [c for c in criteria if c in rated],
        "n_annotators_total": int(ratings["annotator"].nunique()),
        "n_annotators": int(analysed["annotator"].nunique()),
        "k_median": float(per_item.median()) if not per_item.empty else np.nan,
        "k_min": int(per_item.min()) if not per_item.empty else 0,
        "k_max": int(per_item.max()) if not per_item.empty else 0,
        "n_control_items": int(controls["item"].nunique()),
        "control_kinds": sorted(controls["control_kind"].dropna().unique()),
        "n_flagged": len(flagged),
        "n_excluded_ratings": int(ratings["annotator"].isin(flagged).sum()) if exclude_flagged else 0,
        "flag_reasons": _reason_counts(quality),
        "median_seconds": float(analysed.groupby(["annotator", "item"])["seconds_on_item"].first().median()),
        "n_assignments": int(analysed["assignment"].nunique()),
    }


def _reason_counts(quality: pd.DataFrame) -> dict[str, int]:
    """How many annotators each rule flagged, by the rule's words (an annotator may count under several)."""
    return {label: int(quality[column].sum()) for column, label in FLAG_RULES.items() if quality[column].any()}


def _late_counts(late: pd.DataFrame) -> dict[str, int]:
    """How many ratings, assignments and annotators the late ratings ``late`` are."""
    return {"n_ratings": int(len(late)), "n_assignments": int(late["assignment"].nunique()),
            "n_annotators": int(late["annotator"].nunique())}


def _late_sentence(late: dict[str, int], include_late: bool) -> str:
    if not late["n_ratings"]:
        return "None of the ratings reported here was submitted after its assignment had expired."
    verb = "was" if late["n_ratings"] == 1 else "were"
    what = (f"{_count(late['n_ratings'], 'rating')} from {_count(late['n_assignments'], 'assignment')} "
            f"({_count(late['n_annotators'], 'annotator')}) {verb} submitted after the assignment had expired")
    return what + ("; they are analysed with the others." if include_late
                   else "; they are left out of every analysis.")


def _summary_sentence(facts: dict, exclude_flagged: bool) -> str:
    if not facts["n_ratings"]:
        flagged = facts["n_flagged"] if exclude_flagged else 0
        excluded = f", {flagged} of them flagged and excluded" if flagged else ""
        return (f"No rating of a real response is left to analyse ({_count(facts['n_annotators_total'], 'annotator')} "
                f"in all{excluded}).")
    text = (f"{facts['n_ratings']} ratings of {facts['n_items']} items "
            f"({_count(facts['n_contexts'], 'dialogue context')} × {_count(len(facts['systems']), 'system')}) on "
            f"{', '.join(facts['criteria'])}, from {_count(facts['n_annotators'], 'annotator')}")
    if facts["n_flagged"] and exclude_flagged:
        text += f" ({facts['n_flagged']} flagged annotators excluded)"
    return text + "."


def methods_paragraph(
    facts: dict,
    *,
    agreement: pd.DataFrame | None,
    pairs: pd.DataFrame | None,
    friedman: pd.DataFrame | None,
    rater_check: pd.DataFrame | None,
    meta: dict,
    correction: str,
    family: str,
    alpha: float,
    n_boot: int,
    ci_level: float,
    scale: tuple[int, int],
    exclude_flagged: bool,
    target: str = "items",
    fallback: str = "",
) -> str:
    """A methods paragraph with the study's real numbers, ready to adapt for a paper. The frames are None for
    what the report could not compute; their sentences are then left out (the report says why elsewhere).
    ``target`` (analysis.stats.generalize.TARGETS) is what the intervals and tests generalise to, said in a
    sentence; ``fallback`` is why intervals for new raters were asked for and could not be computed."""
    lo, hi = scale
    k = meta.get("k")
    k_text = (f"{facts['k_median']:g}" if facts["k_min"] == facts["k_max"]
              else f"a median of {facts['k_median']:g} (range {facts['k_min']}–{facts['k_max']})")
    sentences = [
        f"We collected {facts['n_ratings']} ratings of {facts['n_items']} responses "
        f"({_count(facts['n_contexts'], 'dialogue context')} × {_count(len(facts['systems']), 'system')}: "
        f"{', '.join(facts['systems'])}) on "
        f"{_count(len(facts['criteria']), 'criterion', 'criteria')} ({', '.join(facts['criteria'])}), each on a "
        f"{lo}–{hi} Likert scale, from "
        f"{_count(facts['n_annotators'], 'annotator')} in {_count(facts['n_assignments'], 'assignment')}; each "
        "response was rated by "
        f"{k_text} annotators" + (f" (design: {k} per response)" if k else "") + "."
    ] if facts["n_ratings"] else ["No rating of a real response was analysed (see what could not be computed)."]
    if facts["n_control_items"]:
        sentences.append(
            f"{facts['n_control_items']} control responses ({', '.join(facts['control_kinds'])}), each built to fail "
            "one criterion, were interleaved with the real ones.")
    if facts["late"]["n_ratings"]:
        sentences.append(_late_sentence(facts["late"], facts["include_late"]))
    if facts["n_flagged"]:
        reasons = ", ".join(f"{label}: {count}" for label, count in sorted(facts["flag_reasons"].items()))
        verb = (f"were excluded with their {facts['n_excluded_ratings']} ratings" if exclude_flagged
                else "were flagged but kept")
        verb = verb.replace("were", "was") if facts["n_flagged"] == 1 else verb
        sentences.append(f"{facts['n_flagged']} of {facts['n_annotators_total']} annotators {verb} ({reasons}); "
                         "results with all annotators are reported alongside.")
    else:
        sentences.append(f"No annotator was flagged by the quality checks ({facts['n_annotators_total']} checked).")
    alphas = (agreement.loc[(agreement["system"] == ALL_SYSTEMS) & (agreement["coefficient"] == "alpha_ordinal")
                            & agreement["estimate"].notna()] if agreement is not None else pd.DataFrame())
    if not alphas.empty:
        alphas = in_criterion_order(alphas, facts["criteria"])
        parts = [f"{r.criterion} {fmt(r.estimate)}{interval(r.ci_low, r.ci_high)}" for r in alphas.itertuples()]
        sentences.append(
            f"Inter-annotator agreement (Krippendorff's α, ordinal) was {'; '.join(parts)} ({ci_level:.0%} "
            f"percentile bootstrap CIs over items, B = {n_boot}); Gwet's AC2, Fleiss' κ, the ICC (on the largest "
            "balanced subset of items where their numbers of ratings differ) and raw agreement are reported "
            "alongside.")
    if pairs is not None and pairs["p_wilcoxon"].notna().any():
        n_tests = int(pairs["p_wilcoxon"].notna().sum())
        per_criterion = n_tests // max(len(facts["criteria"]), 1)
        per_family = (f"the {_count(per_criterion, 'pairwise comparison')} within each criterion"
                      if family == "criterion" else f"all {_count(n_tests, 'pairwise comparison')} of the study")
        methods = sorted(set(pairs["wilcoxon_method"].dropna()) - {"undefined"})
        if target == "items":
            sentences.append(
                "Systems were compared per criterion on item-level means (the annotators' scores of a response "
                "averaged), paired by dialogue context, with two-sided Wilcoxon signed-rank tests ("
                + "; ".join(methods) + "), paired t-tests beside them; p-values were corrected with the "
                f"{CORRECTION_NAMES.get(correction, correction)} method over {per_family} (α = {alpha:g}). Effect "
                "sizes are the matched-pairs rank-biserial correlation (bootstrap CI) and Cohen's d_z (noncentral-t "
                f"CI); system means carry {ci_level:.0%} bootstrap CIs over items.")
        else:
            sentences.append(
                "Systems were compared per criterion on item-level means (the annotators' scores of a response "
                "averaged), paired by dialogue context, with two-sided t-tests whose variance treats "
                + ("the raters" if target == "raters" else "the contexts, the responses and the raters")
                + " as random samples: the variance of the mean under the crossed random-effects model score = "
                "system + context + response + rater + rater × system + noise (variance components by the method "
                "of moments of Gao & Owen 2017), with Satterthwaite degrees of freedom; p-values were corrected "
                f"with the {CORRECTION_NAMES.get(correction, correction)} method over {per_family} (α = {alpha:g}), "
                "and Wilcoxon signed-rank tests (" + "; ".join(methods) + ") are reported beside them. Effect sizes "
                "are the matched-pairs rank-biserial correlation (bootstrap CI) and Cohen's d_z (noncentral-t CI); "
                f"system means carry {ci_level:.0%} t intervals from the same variance.")
    elif pairs is not None:
        sentences.append(f"System means carry {ci_level:.0%} "
                         + ("bootstrap CIs over items" if target == "items" else "t intervals for new raters")
                         + "; no pair of systems could be tested.")
    if pairs is not None:
        sentences.append(_target_sentence(target, fallback))
    tested = friedman.loc[friedman["p"].notna()] if friedman is not None else pd.DataFrame()
    if not tested.empty:
        tested = in_criterion_order(tested, facts["criteria"])
        sentences.append("Friedman tests across all systems: " + "; ".join(
            f"{r.criterion} χ²({r.n_systems - 1}) = {r.statistic:.2f}, p {_p_words(r.p)}, W = {r.kendalls_w:.2f}"
            for r in tested.itertuples()) + ".")
    if rater_check is not None:
        disagreeing = int(rater_check["flagged"].sum())
        outcome = ("agreed with the item-level tests on the order and significance of every pair" if disagreeing == 0
                   else f"disagreed with them in order or significance on {_count(disagreeing, 'pair')}, shown in "
                        "the report")
        sentences.append("A linear mixed model with crossed random intercepts for annotator and item (variance "
                         "components by the method of moments of Gao & Owen 2017, refined to REML on small designs; "
                         "fixed effects by generalised least squares as in Ghosh, Hastie & Owen 2022; Wald tests), "
                         f"and tests on annotator-z-scored scores, {outcome}.")
    sentences.append(recruitment_sentence(meta, facts.get("median_seconds")))
    sentences.append(qualification_sentence(meta))
    return " ".join(s for s in sentences if s)


def _target_sentence(target: str, fallback: str) -> str:
    """What the intervals and tests of the means and comparisons are valid for (analysis.stats.generalize)."""
    if target == "items":
        text = (f"These intervals and tests treat the contexts as a sample and this study's raters as fixed: they are "
                f"valid for {TARGET_WORDS['items']}, not for new raters")
        if fallback:
            return text + f" (intervals for new raters were asked for but could not be computed: {fallback})."
        return text + " (empeval report --generalize both gives intervals for new raters and new contexts)."
    return (f"The intervals and tests of the system means and comparisons are valid for {TARGET_WORDS[target]}"
            + (" (the contexts held fixed)." if target == "raters" else "."))


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _p_words(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"
