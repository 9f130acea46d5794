"""The report's model-assisted section: an automatic judge's scores combined with the human ratings by
prediction-powered inference (``empeval.analysis.stats.ppi``), in the report's words and layout.

``judged_tables`` runs the analysis on the ratings the report analyses (late ratings and flagged raters left
out as in its main results) and one judge's scores of the study's items; ``judged_blocks`` turns the tables
into document blocks. Per system and criterion: the human-only mean and CI, the judge-only mean (biased: the
judge's own scale, uncorrected), the PPI++ mean (power-tuned; Angelopoulos, Duchi and Zrnic 2023) with its CI,
lambda, and the human-rated contexts the judge was worth; paired system differences per context with PPI++,
corrected as the Likert comparisons are (``analysis.stats.significance.adjust_by_family``); judge-human agreement
against the label the estimates use (the mean of an item's k ratings): Krippendorff's alpha (interval) with a
bootstrap CI, Spearman's rho, a calibration plot; the items the judge failed on. A learned judge, trained on
the study's own ratings with cross-fitting, gets cross-prediction-powered inference (Zrnic and Candès 2024)
instead of PPI++.

A judge of differences (a pairwise judge asked which of two responses is better, in both orders, or a learned
difference judge; ``pair_scores``) predicts each context's difference itself: when the study has its verdicts, the
paired differences are PPI++ with its differences as the predictor (``empeval.analysis.stats.ppi.differences``)
instead of the per-item scores differenced, and the section prints the judge-human correlation of differences
beside the one of scores (a judge that scores responses one at a time mostly sees what two responses to one
context share, which cancels in their difference).

The estimates run only when every item has a score from the judge; ``allow_missing`` drops the items it failed
on and the section says how many (``JudgeCoverageError`` otherwise, before anything is written).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from empeval.analysis.kinds import ReportRefused
from empeval.analysis.report.document import Block, Heading, Image, Paragraph, Table
from empeval.analysis.report.tables import fmt, fmt_p, in_criterion_order, interval
from empeval.analysis.stats.ppi.active import (
    ACTIVE_PPI,
    MAX_PROBABILITY_STRATA,
    MIN_RATED_PER_STRATUM,
    is_actively_sampled,
    model_assisted_estimates,
)
from empeval.analysis.stats.ppi.agreement import ALL_SYSTEMS, calibration_table, judge_agreement
from empeval.analysis.stats.ppi.crossfit import crossppi_paired_differences, crossppi_system_means
from empeval.analysis.stats.ppi.differences import difference_correlations, item_score_differences, ppi_pair_differences
from empeval.analysis.stats.ppi.estimates import ppi_paired_differences, ppi_system_means
from empeval.analysis.stats.ppi.tables import ITEM_KEYS, item_labels, judge_failures

PPI = "ppi"
CROSS_PPI = "crossppi"
PAIR_PPI = "pairppi"  # paired differences by PPI++ with a judge of differences as the predictor
ESTIMATOR_NAMES = {PPI: "PPI++", CROSS_PPI: "cross-PPI", PAIR_PPI: "PPI++",
                   ACTIVE_PPI: "active PPI++ (inverse-probability weighted)"}
#: Why a cross-fitted (learned) judge gets no model-assisted estimates in an actively sampled study.
ACTIVE_CROSS_FIT_REFUSED = (
    "this study's contexts were drawn by active sampling, with unequal probabilities, and the cross-fitted "
    "estimator of a learned judge (cross-PPI) does not weight by them, so its estimates would be biased; report "
    "with a judge that does not learn from the ratings (e.g. --judge length or an http-judge), whose estimates are "
    "inverse-probability weighted")

#: Failures listed in the document; the CSV holds them all.
FAILURES_SHOWN = 30


@dataclass
class DesignSample:
    """How the study chose the contexts people rate, beside what was rated: ``share`` and ``seed`` of the
    design's human share (None: people were to rate every context), the study's contexts, the sampled ones,
    the sampled ones with no usable human rating yet, and rated contexts outside the sample."""

    share: float | None
    seed: int | None
    n_contexts: int
    n_sampled: int
    n_sampled_unrated: int
    n_rated_outside: int
    active: bool = False  # drawn by active sampling with recorded probabilities (design.sampling = "active")


def design_sample_summary(design_sample: pd.DataFrame, human: pd.DataFrame) -> DesignSample:
    """Compare the design's sample of contexts (``context_id``, ``sampled``) with the contexts that have human
    ratings in ``human`` (``context_id``).

    Examples
    --------
    >>> sample = pd.DataFrame({"context_id": [1, 2, 3, 4], "sampled": [True, True, False, False]})
    >>> sample.attrs.update(human_share=0.5, human_share_seed=7)
    >>> design_sample_summary(sample, pd.DataFrame({"context_id": ["1"]}))
    DesignSample(share=0.5, seed=7, n_contexts=4, n_sampled=2, n_sampled_unrated=1, n_rated_outside=0, active=False)
    """
    contexts = design_sample["context_id"].astype(str)
    sampled = set(contexts[design_sample["sampled"].astype(bool).to_numpy()])
    rated = set(human["context_id"].astype(str))
    return DesignSample(share=design_sample.attrs.get("human_share"), seed=design_sample.attrs.get("human_share_seed"),
                        n_contexts=len(set(contexts)), n_sampled=len(sampled),
                        n_sampled_unrated=len(sampled - rated), n_rated_outside=len(rated - sampled),
                        active=is_actively_sampled(design_sample))


class JudgeCoverageError(ReportRefused):
    """The judge has no score for some items and missing items were not allowed: nothing is estimated."""

    def __init__(self, message: str, n_failed: int) -> None:
        super().__init__(message)
        self.n_failed = n_failed


@dataclass
class JudgedTables:
    """What the section shows, as the analysis functions return it (written to ``tables/judge_*.csv``)."""

    judge: str
    version: str | None
    estimator: str  # PPI or CROSS_PPI
    means: pd.DataFrame | None
    pairs: pd.DataFrame | None
    agreement: pd.DataFrame
    calibration: pd.DataFrame
    failures: pd.DataFrame  # criterion, system, context_id, reason, error
    n_dropped: int
    allow_missing: bool
    criteria: list[str]
    not_judged: list[str] = field(default_factory=list)  # criteria rated by people the judge did not score
    why_not_estimated: str = ""
    n_folds: int = 0
    n_refitted: int = 0  # learned judge: items whose human-rated status changed since it was fitted
    design: DesignSample | None = None  # the design's human sample, when the store recorded one
    systems: list[str] = field(default_factory=list)  # the report's one system order (empty: as computed)
    pairs_estimator: str = ""  # how ``pairs`` was made (default: ``estimator``); PAIR_PPI with a judge of differences
    pair_judge: str | None = None  # the judge of differences whose verdicts made ``pairs``
    pairs_note: str = ""  # why the judge of differences' verdicts were not used, when they were given
    target_note: str = ""  # what the model-assisted intervals generalise to, when narrower than --generalize asks
    #: Judge-human correlation per criterion: of scores (items), of the item scores differenced, and of the judge
    #: of differences' verdicts, with the contexts each rests on.
    correlations: pd.DataFrame = field(default_factory=pd.DataFrame)

    def __post_init__(self) -> None:
        self.pairs_estimator = self.pairs_estimator or self.estimator

    def csv_tables(self) -> dict[str, pd.DataFrame]:
        tables = {"judge_agreement": self.agreement, "judge_calibration": self.calibration,
                  "judge_failures": self.failures, "judge_correlations": self.correlations}
        if self.means is not None:
            tables["judge_means"] = self.means
        if self.pairs is not None:
            tables["judge_pairs"] = self.pairs
        return tables


def judged_tables(
    ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    *,
    judge: str,
    version: str | None = None,
    cross_fitted: bool = False,
    allow_missing: bool = False,
    criteria: list[str] | None = None,
    correction: str = "holm",
    family: str = "criterion",
    alpha: float = 0.05,
    ci_level: float = 0.95,
    n_boot: int = 1000,
    seed: int = 0,
    cluster_by: str = "assignment_id",
    design_sample: pd.DataFrame | None = None,
    pair_scores: pd.DataFrame | None = None,
    pair_judge: str | None = None,
    generalize: str = "items",
) -> JudgedTables:
    """The model-assisted analysis of one judge over the tidy ``ratings`` (``analysis.kinds.likert.load``; controls left
    out) and the judge's ``judge_scores`` (one row per item and criterion: ``context_id``, ``system``,
    ``criterion``, ``judge_score``, NaN where it failed, optionally ``error``; with ``cross_fitted``, also the
    learned judge's ``fold`` and ``fold_score_*`` columns). Only criteria the judge scored are analysed.

    Estimator: PPI++ (``ppi_system_means``, ``ppi_paired_differences``), or with ``cross_fitted``
    cross-prediction-powered inference (``crossppi_system_means``, ``crossppi_paired_differences``), both with
    the shared-rater correction over ``cluster_by`` and the paired p-values corrected by ``correction`` over
    ``family`` as ``analysis.stats.significance.compare_pairs`` corrects the Likert comparisons. Agreement and
    calibration
    are ``empeval.analysis.stats.ppi.agreement``'s on the human-rated items.

    Raises ``JudgeCoverageError`` when the judge has no score for an item and not ``allow_missing``. A design
    the estimates cannot run on (a system with fewer than two human-rated contexts, or none left for the judge
    alone) leaves ``means`` and ``pairs`` None and says why in ``why_not_estimated``.

    ``design_sample`` (the store's record of the design's human share, ``JudgeRequest.design_sample``) is
    compared with the contexts actually rated (``DesignSample``), so the section can say how the rated contexts
    were drawn and warn when sampled contexts are still unrated: the estimates take the rated contexts for a
    uniform random sample, which holds only while the missing ones are missing at random.

    ``pair_scores`` (a judge of differences' verdicts, ``pair_judge``: ``criterion``, ``context_id``,
    ``system_a``, ``system_b``, ``judge_diff``, optionally ``error``; ``server.backend.judges.pair_scores``) make the
    paired differences PPI++ with the judge's differences as the predictor
    (``empeval.analysis.stats.ppi.differences.ppi_pair_differences``; its failures dropped and counted when
    ``allow_missing``), and add its correlation with the human differences to ``correlations``. When they cannot
    be used (failures not allowed, too few compared contexts) the per-item judge's pairs stay, and
    ``pairs_note`` says why.
    """
    human = ratings.loc[~ratings["is_control"].astype(bool)] if "is_control" in ratings.columns else ratings
    human = human.rename(columns={"context": "context_id"})
    human = human.assign(context_id=human["context_id"].astype(str))
    scores = judge_scores.assign(context_id=judge_scores["context_id"].astype(str))
    judged = [str(c) for c in scores["criterion"].unique()]
    order = [c for c in (criteria or []) if c in judged] + sorted(c for c in judged if c not in (criteria or []))
    not_judged = sorted(set(map(str, human["criterion"].unique())) - set(judged))
    human = human.loc[human["criterion"].isin(judged)].reset_index(drop=True)
    if "assignment_id" not in human.columns and "assignment" in human.columns:
        human = human.rename(columns={"assignment": "assignment_id"})

    failures = judge_failures(scores[ITEM_KEYS + ["judge_score"]], human)
    errors = scores.set_index(ITEM_KEYS)["error"] if "error" in scores.columns else None
    failures["error"] = [_error_of(errors, key) if reason == "no score" else "the judge never scored it"
                         for key, reason in zip(map(tuple, failures[ITEM_KEYS].to_numpy()), failures["reason"],
                                                strict=True)]
    if len(failures) and not allow_missing:
        first = failures.iloc[0]
        raise JudgeCoverageError(
            f"judge {judge!r} has no score for {len(failures)} item(s) of the study (first: criterion "
            f"{first['criterion']!r}, system {first['system']!r}, context {first['context_id']!r}: "
            f"{first['error'] or first['reason']}); the model-assisted estimates need a score for every item: "
            "run the judge again to retry its failures, or allow missing items (empeval report --allow-missing) "
            "to drop them, which the report then lists and counts", len(failures))
    usable = scores.loc[scores["judge_score"].notna()].reset_index(drop=True)
    if len(failures):  # the human ratings of a dropped item go with it (as judged_items drops them)
        dropped = failures[ITEM_KEYS].assign(_drop=True)
        keep = human.merge(dropped, on=ITEM_KEYS, how="left")["_drop"].isna().to_numpy()
        human = human.loc[keep].reset_index(drop=True)

    tables = JudgedTables(judge=judge, version=version, estimator=CROSS_PPI if cross_fitted else PPI, means=None,
                          pairs=None, agreement=pd.DataFrame(), calibration=pd.DataFrame(), failures=failures,
                          n_dropped=len(failures), allow_missing=allow_missing, criteria=order, not_judged=not_judged)
    if design_sample is not None:
        tables.design = design_sample_summary(design_sample, human)
    plain = usable[ITEM_KEYS + ["judge_score"]]
    tables.agreement = judge_agreement(human, plain, n_boot=n_boot, ci_level=ci_level, seed=seed)
    tables.calibration = calibration_table(human, plain, ci_level=ci_level)
    try:
        if cross_fitted and design_sample is not None and is_actively_sampled(design_sample):
            # Cross-PPI weighs every rated context alike; under active sampling the contexts were drawn with
            # unequal recorded probabilities, so its estimates would be biased towards the contexts drawn most.
            raise ValueError(ACTIVE_CROSS_FIT_REFUSED)
        if cross_fitted:
            cross, tables.n_folds, tables.n_refitted = _cross_fit_table(usable, human)
            tables.means = crossppi_system_means(cross, human_ratings=human, cluster_by=cluster_by, ci_level=ci_level,
                                                 generalize=generalize)
            pairs = crossppi_paired_differences(cross, human_ratings=human, cluster_by=cluster_by, ci_level=ci_level,
                                                family=family, correction=correction, alpha=alpha,
                                                generalize=generalize)
            tables.pairs = pairs.merge(_judge_differences(usable), on=["criterion", "system_a", "system_b"],
                                       how="left")
        elif design_sample is not None and is_actively_sampled(design_sample):
            # Contexts drawn with recorded probabilities: the inverse-probability-weighted estimators (active.py).
            chosen = model_assisted_estimates(human, plain, design_sample, cluster_by=cluster_by, ci_level=ci_level,
                                              family=family, correction=correction, alpha=alpha, generalize=generalize)
            tables.means, tables.pairs, tables.estimator = chosen.means, chosen.pairs, chosen.estimator
        else:
            tables.means = ppi_system_means(human, plain, cluster_by=cluster_by, ci_level=ci_level,
                                            generalize=generalize)
            tables.pairs = ppi_paired_differences(human, plain, cluster_by=cluster_by, ci_level=ci_level,
                                                  family=family, correction=correction, alpha=alpha,
                                                  generalize=generalize)
    except ValueError as error:
        tables.means = tables.pairs = None
        tables.why_not_estimated = str(error)
    pairs_of_judge = None
    if pair_scores is not None:
        in_study = pair_scores.loc[pair_scores["criterion"].isin(judged)]
        try:
            pairs_of_judge = ppi_pair_differences(human, in_study, cluster_by=cluster_by, ci_level=ci_level,
                                                  family=family, correction=correction, alpha=alpha,
                                                  allow_missing=allow_missing, generalize=generalize)
        except ValueError as error:
            named = f" {pair_judge}" if pair_judge else ""
            tables.pairs_note = (f"the verdicts of the judge of differences{named} were not used for the paired "
                                 f"differences (the item scores differenced were): {error}")
        if pairs_of_judge is not None and tables.means is not None:
            tables.pairs, tables.pairs_estimator, tables.pair_judge = pairs_of_judge, PAIR_PPI, pair_judge
    tables.correlations = judge_correlations(human, plain, in_study if pair_scores is not None else None)
    tables.target_note = _target_note(tables, generalize)
    return tables


def _target_note(tables: JudgedTables, generalize: str) -> str:
    """What the model-assisted intervals generalise to when --generalize takes the raters as a sample: every
    estimator (PPI++, cross-PPI, active PPI++, a judge of differences' PPI++) then clusters by rater with the
    raters' small-sample correction and t on the raters less one, and the section says so by name; empty for
    "items" (the methods' wording covers it) or when nothing was estimated."""
    if generalize == "items" or tables.means is None:
        return ""
    names = sorted({ESTIMATOR_NAMES[e] for e in (tables.estimator, tables.pairs_estimator)})
    return (f"the model-assisted intervals ({' and '.join(names)}) take the raters as a sample too, as "
            f"--generalize {generalize} asks: they generalise to new raters and new contexts (clustered by rater "
            "with the small-sample correction, t with the raters less one degrees of freedom)")


def judge_correlations(human: pd.DataFrame, judge_scores: pd.DataFrame,
                       pair_scores: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per criterion, Pearson's r between the judge and people on the human-rated contexts: of the item scores
    with the item labels (systems pooled), of the item scores differenced with the label differences, and (with
    ``pair_scores``) of a judge of differences' verdicts with the label differences, every pair of systems pooled.

    Returns
    -------
    correlations : pandas.DataFrame
        ``criterion``, ``n_items``, ``score_r``, ``n_contexts``, ``item_difference_r``, ``n_pair_contexts``,
        ``pair_difference_r`` (NaN without ``pair_scores`` or with fewer than three rated contexts).
    """
    labels = item_labels(human)[ITEM_KEYS + ["label"]]
    items = judge_scores.assign(context_id=judge_scores["context_id"].astype(str)).merge(
        labels.assign(context_id=labels["context_id"].astype(str)), on=ITEM_KEYS)
    items = items.loc[items["judge_score"].notna()]
    differenced = difference_correlations(human, item_score_differences(judge_scores))
    paired = difference_correlations(human, pair_scores) if pair_scores is not None else None
    rows = []
    for criterion in sorted(set(items["criterion"]) | set(differenced["criterion"])):
        part = items.loc[items["criterion"] == criterion]
        row = {"criterion": criterion, "n_items": len(part),
               "score_r": float(np.corrcoef(part["judge_score"], part["label"])[0, 1])
               if len(part) > 2 and part["judge_score"].std() > 0 and part["label"].std() > 0 else np.nan}
        for prefix, table, n_name in (("item_difference", differenced, "n_contexts"),
                                      ("pair_difference", paired, "n_pair_contexts")):
            overall = (table.loc[(table["criterion"] == criterion) & (table["system_a"] == "all pairs")]
                       if table is not None else pd.DataFrame())
            row[n_name] = int(overall["n_contexts"].iloc[0]) if len(overall) else 0
            row[f"{prefix}_r"] = float(overall["pearson"].iloc[0]) if len(overall) else np.nan
        rows.append(row)
    return pd.DataFrame(rows, columns=["criterion", "n_items", "score_r", "n_contexts", "item_difference_r",
                                       "n_pair_contexts", "pair_difference_r"])


def _error_of(errors: pd.Series | None, key: tuple) -> str:
    """The stored error message of a failed item, or "" when the scores carry none."""
    if errors is None or key not in errors.index:
        return ""
    message = errors.loc[key]
    return "" if message is None or (isinstance(message, float) and np.isnan(message)) else str(message)


def _cross_fit_table(scores: pd.DataFrame, human: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """A learned judge's stored scores as ``cross_fit_judge``'s output, labelled with the report's ratings.

    Its folds were drawn over the contexts people had rated when it was fitted. An item rated since (fold -1,
    now labelled) keeps its score, the mean of the fold models', none of which saw its ratings; an item that
    had ratings then but has no label now (its raters excluded) is scored by its own fold's model, which did not
    see it, for every fold. Returns the table, the number of folds and how many items changed status.
    """
    fold_columns = sorted((c for c in scores.columns if c.startswith("fold_score_")), key=lambda c: int(c[11:]))
    labels = item_labels(human)[ITEM_KEYS + ["label"]]
    table = scores.merge(labels, on=ITEM_KEYS, how="left")
    rated_now = table["label"].notna()
    rated_then = table["fold"].astype(int) >= 0
    lost = rated_then & ~rated_now
    for column in fold_columns:
        table.loc[lost, column] = table.loc[lost, "judge_score"]
    gained = rated_now & ~rated_then
    # A gained item keeps each fold model's score (none saw its ratings): a context rated since for one system
    # only then still has every model's difference (crossfit._fold_differences).
    table.loc[rated_now & rated_then, fold_columns] = np.nan
    table.loc[gained, "fold"] = 0
    table.loc[lost, "fold"] = -1
    columns = ["criterion", "system", "context_id", "label", "fold", "judge_score", *fold_columns]
    return table[columns], len(fold_columns), int(lost.sum() + gained.sum())


def _judge_differences(scores: pd.DataFrame) -> pd.DataFrame:
    """The judge's own mean per-context difference a - b (biased) per criterion and pair of systems."""
    rows = []
    for criterion, part in scores.groupby("criterion", sort=True):
        wide = part.pivot(index="context_id", columns="system", values="judge_score")
        for a, b in itertools.combinations(sorted(wide.columns), 2):
            rows.append({"criterion": criterion, "system_a": a, "system_b": b,
                         "judge_diff_biased": float((wide[a] - wide[b]).dropna().mean())})
    return pd.DataFrame(rows, columns=["criterion", "system_a", "system_b", "judge_diff_biased"])


def calibration_plot(calibration: pd.DataFrame, *, criteria: list[str] | None = None,
                     ci_level: float = 0.95) -> Figure:
    """One panel per criterion: the mean human label (the mean of an item's ratings) of each bin of judge
    scores against the bin's mean judge score, with the label's CI (``calibration_table``), and the identity
    line a calibrated judge would lie on."""
    criteria = list(criteria) if criteria is not None else sorted(calibration["criterion"].unique())
    figure = Figure(figsize=(3.6 * max(len(criteria), 1), 3.6), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, max(len(criteria), 1)))
    for axis, criterion in zip(axes, criteria, strict=False):
        part = calibration.loc[calibration["criterion"] == criterion]
        errors = np.vstack([part["label_mean"] - part["label_ci_low"], part["label_ci_high"] - part["label_mean"]])
        axis.errorbar(part["judge_mean"], part["label_mean"], yerr=np.nan_to_num(errors), fmt="o", capsize=3,
                      label="bins of judge scores")
        values = pd.concat([part["judge_mean"], part["label_ci_low"], part["label_ci_high"]]).dropna()
        low, high = (float(values.min()), float(values.max())) if len(values) else (1.0, 5.0)
        axis.plot([low, high], [low, high], linestyle="--", color="grey", label="identity (calibrated)")
        axis.set_title(criterion.capitalize())
        axis.set_xlabel("judge score (bin mean)")
        axis.set_ylabel(f"mean human label ({ci_level:.0%} CI)")
        axis.legend(fontsize="x-small", frameon=False)
    return figure


def judged_blocks(tables: JudgedTables, *, figure_png: bytes | None, figure_path: str, correction_name: str,
                  family_words: str, alpha: float, ci_level: float, n_boot: int) -> list[Block]:
    """The section's blocks: estimates, differences, agreement, calibration figure, failures, methods."""
    name = ESTIMATOR_NAMES[tables.estimator]
    title = f"Model-assisted estimates (judge {tables.judge}" + (f", version {tables.version}" if tables.version
                                                                  else "") + ")"
    blocks: list[Block] = [Heading(title)]
    intro = (f"The judge **{tables.judge}** scored every item; people rated a sample of contexts. {name} combines "
             "the two into estimates of the human mean label that stay unbiased whatever the judge's quality; a "
             "judge that tracks people narrows the intervals. The judge-only figures are the judge's own "
             "(uncorrected, biased): shown to see how far they are from the human ones, not to be reported.")
    if tables.not_judged:
        intro += f" Criteria the judge did not score, left out here: {', '.join(tables.not_judged)}."
    blocks.append(Paragraph(intro))
    if tables.design is not None:
        blocks.append(Paragraph(design_text(tables.design)))
    if tables.n_dropped:
        blocks.append(Paragraph(f"**{tables.n_dropped} item(s) the judge failed on were dropped** (allow missing: "
                                "their human ratings are left out of this section too); they are listed below."))
    if tables.means is None:
        blocks.append(Paragraph(f"Estimates not computed: {tables.why_not_estimated}."))
    else:
        blocks.append(Table(means_table(tables), caption=means_caption(tables, ci_level)))
        if tables.pairs is not None and not tables.pairs.empty:
            predictor = (f" with the judge of differences {tables.pair_judge}'s verdicts as the predictor"
                         if tables.pairs_estimator == PAIR_PPI else "")
            pair_name = ESTIMATOR_NAMES[tables.pairs_estimator]
            blocks.append(Table(_pairs_text(tables, alpha), caption=(
                f"Paired differences a − b per context: human-only on the contexts people rated for both, "
                f"judge-only (biased), and {pair_name}{predictor} with its {ci_level:.0%} interval; p adj.: "
                f"{correction_name} correction over {family_words} (as the Likert comparisons), sig.: p adj. < "
                f"{alpha:g}; a note says why a figure is n/a.")))
        if tables.pairs_note:
            blocks.append(Paragraph(tables.pairs_note[0].upper() + tables.pairs_note[1:] + "."))
        if tables.target_note:
            blocks.append(Paragraph(tables.target_note[0].upper() + tables.target_note[1:] + "."))
        if wider := wider_than_human_only(tables):
            blocks.append(Paragraph(wider))
    blocks.append(Heading("How far to trust the judge", level=3))
    if not tables.correlations.empty:
        blocks.append(Table(correlations_text(tables), caption=(
            "Judge-human correlation (Pearson's r) on the human-rated contexts: of the judge's scores with the item "
            "labels, and of differences between two systems' responses to one context with the people's "
            "differences, which a decision between systems rests on and which narrow its interval; the item "
            "scores differenced, and the judge of differences' own verdicts when the study has them.")))
    blocks.append(Table(_agreement_text(tables), caption=(
        "Judge-human agreement on the human-rated items against the label the estimates use (the mean of an "
        f"item's ratings): Krippendorff's α (interval) with a {ci_level:.0%} percentile bootstrap CI over items "
        f"(B = {n_boot}), Spearman's ρ; a gap between the label and judge means is the judge's bias.")))
    if figure_png is not None:
        blocks.append(Image(figure_png, figure_path, caption=(
            "Calibration: mean human label per bin of judge scores (equal-count bins, or one per distinct score), "
            "with the identity line a calibrated judge lies on.")))
    blocks.append(Heading("Items the judge failed on", level=3))
    if tables.failures.empty:
        blocks.append(Paragraph("None: the judge scored every item."))
    else:
        shown = tables.failures.head(FAILURES_SHOWN)
        more = len(tables.failures) - len(shown)
        blocks.append(Table(pd.DataFrame({
            "Context": shown["context_id"].astype(str), "System": shown["system"], "Criterion": shown["criterion"],
            "Error": [error or reason for error, reason in zip(shown["error"], shown["reason"], strict=True)],
        }), caption=f"{len(tables.failures)} item(s) without a judge score, dropped from this section"
                    + (f"; the first {len(shown)} shown, all in tables/judge_failures.csv." if more else ".")))
    blocks.append(Heading("How the model-assisted figures were made", level=3))
    blocks.append(Paragraph(judged_methods(tables, correction_name=correction_name, family_words=family_words,
                                           alpha=alpha, ci_level=ci_level, n_boot=n_boot)))
    return blocks


def design_text(design: DesignSample) -> str:
    """What the section says about the contexts people rated: how the design drew them and how many of them
    have ratings, with a warning when some sampled contexts have none or rated contexts lie outside the sample.

    Examples
    --------
    >>> design_text(DesignSample(None, None, 3, 3, 0, 0))
    "People were to rate every one of the study's 3 contexts (no human share); all 3 have human ratings."
    >>> running = design_text(DesignSample(0.4, None, 10, 4, 1, 0, active=True))
    >>> "3 have human ratings so far" in running and "a uniform subsample of the drawn ones" in running
    True
    """
    if design.share is None:
        text = f"People were to rate every one of the study's {design.n_contexts} contexts (no human share)"
    elif design.active:
        text = (f"By design (human share {design.share:g}, active sampling), people rate {design.n_sampled} of the "
                f"study's {design.n_contexts} contexts, each drawn with a probability that follows the judges' "
                "uncertainty about it, mixed with uniform, and recorded when drawn; the estimates weight each rated "
                "context by the inverse of its probability")
    else:
        text = (f"By design (human share {design.share:g}, seed {design.seed}), people rate a seeded uniform random "
                f"sample of {design.n_sampled} of the study's {design.n_contexts} contexts")
    rated = design.n_sampled - design.n_sampled_unrated
    taken_for = ("a uniform subsample of the drawn ones (each probability scaled by the share rated so far)"
                 if design.active else "a uniform random sample of the study")
    text += (f"; all {rated} have human ratings." if not design.n_sampled_unrated else
             f"; {rated} have human ratings so far. **{design.n_sampled_unrated} sampled context(s) have no usable "
             f"human rating**: the estimates take the rated contexts for {taken_for}, which holds only if these are "
             "missing at random (finish the study before reporting).")
    if design.n_rated_outside:
        text += (f" **{design.n_rated_outside} context(s) outside the design's sample have human ratings**: the "
                 "human-rated contexts are then not the design's random sample.")
    return text


def judged_methods(tables: JudgedTables, *, correction_name: str, family_words: str, alpha: float,
                   ci_level: float, n_boot: int) -> str:
    """The section's methods paragraph: which estimator, with its references, and how every figure was made."""
    if tables.estimator == CROSS_PPI:
        estimator = (f"The judge {tables.judge} is a learned judge, trained on this study's own human ratings with "
                     f"{tables.n_folds}-fold cross-fitting over contexts, so that no item was scored by a model that "
                     "saw its context's ratings; the estimates are cross-prediction-powered inference (Zrnic and "
                     "Candès, PNAS 2024), which accounts for the judge having been trained on the same ratings, not "
                     "plain prediction-powered inference (Angelopoulos et al., Science 2023), whose theory assumes a "
                     "judge fixed before the labels were seen.")
        if tables.n_refitted:
            estimator += (f" {tables.n_refitted} item(s) changed human-rated status since the judge was fitted "
                          "(ratings added, or raters excluded): each is scored by models that never saw its ratings; "
                          "refitting the judge (empeval judge) brings its folds up to date.")
    else:
        estimator = ("The estimates are prediction-powered inference (Angelopoulos et al., Science 2023) with power "
                     "tuning, PPI++ (Angelopoulos, Duchi and Zrnic 2023): the judge's mean over every context "
                     "corrected by the mean difference between the human label and the judge on the human-rated "
                     "contexts, the judge's weight λ chosen to minimise the variance.")
    if tables.estimator == ACTIVE_PPI:
        estimator += (" The contexts were drawn with recorded probabilities that follow the judges' uncertainty "
                      "(active statistical inference, Zrnic and Candès, ICML 2024): each rated context is weighted by "
                      "the inverse of its probability, and λ and an offset are tuned apart in up to "
                      f"{MAX_PROBABILITY_STRATA} strata of that probability, each with at least "
                      f"{MIN_RATED_PER_STRATUM} rated contexts (stratified PPI, Fisch et al., NeurIPS 2024), so that "
                      "the judge gets more weight on the contexts it is sure of; λ in the tables is their mean over "
                      "the contexts, and the variance is widened by n / (n − 2 (S − 1)) for the S strata's extra "
                      "weights tuned on the same n rated contexts.")
    if tables.pairs_estimator == PAIR_PPI:
        estimator += (f" The paired differences use the judge of differences {tables.pair_judge}, which compared the "
                      "two systems' responses to each context (a pairwise judge is asked in both orders and its two "
                      "verdicts averaged, so that a preference for the response read first cancels): PPI++ on the "
                      "per-context differences with its verdicts as the predictor, λ power-tuned and not capped at 1, "
                      "since its verdicts are on a scale of their own.")
    return (
        f"{estimator} The label of an item is the mean of its human ratings (the unit of the Likert analysis); "
        "intervals are CLT intervals (ppi_py) widened by a two-way cluster-robust term over items and assignments "
        "(Cameron, Gelbach and Miller 2011), since the items of one assignment share a rater; the human-only "
        "intervals beside them get the same term. The effective number of human-rated contexts is "
        "n × (human-only width / model-assisted width)², equivalently n times the ratio of the two variances: "
        "the contexts a human-only study would need to match the width. Paired differences are per context, "
        "with p-values from the z-test of no difference, corrected by the "
        f"{correction_name} method over {family_words} (α = {alpha:g}), as the Likert comparisons are. "
        f"Agreement is measured on the human-rated items against that label: Krippendorff's α (interval; "
        f"{ci_level:.0%} percentile bootstrap CI, B = {n_boot}), Spearman's ρ and a calibration plot. "
        + ("Items the judge failed on were dropped with their ratings (allow missing): "
           f"{tables.n_dropped}." if tables.allow_missing else
           "Every item had a score from the judge (the estimates run only then, unless missing items are allowed).")
    )


def wider_than_human_only(tables: JudgedTables) -> str:
    """A sentence naming the estimates whose model-assisted interval is wider than the human-only one on the same
    labels (width ratio above 1: the judge cost precision instead of adding it), and which to report; "" when
    there is none. Power tuning makes this rare (lambda = 0 is the human-only estimate), but lambda is itself
    estimated from few labels."""
    names = {ESTIMATOR_NAMES[tables.estimator], ESTIMATOR_NAMES[tables.pairs_estimator]}
    name = names.pop() if len(names) == 1 else "model-assisted"
    wider = []
    for frame, label in ((tables.means, lambda r: f"{r.criterion} {r.system}"),
                         (tables.pairs, lambda r: f"{r.criterion} {r.system_a} − {r.system_b}")):
        if frame is None or frame.empty or "width_ratio" not in frame.columns:
            continue
        wider += [label(r) for r in frame.itertuples(index=False) if r.width_ratio > 1]
    if not wider:
        return ""
    return (f"**The {name} interval is wider than the human-only one for {', '.join(wider)}**: there the judge "
            "added noise rather than precision, so report the human-only estimate and interval for these (they "
            "rest on the same human ratings and are valid as they are).")


def means_caption(tables: JudgedTables, ci_level: float) -> str:
    """The caption of ``means_table``: what each column is."""
    name = ESTIMATOR_NAMES[tables.estimator]
    return (f"Mean label per system: human-only (CLT interval over the human-rated contexts), judge-only (biased: "
            f"the judge's mean over every context, uncorrected) and {name} with its {ci_level:.0%} interval; "
            "λ: the weight given to the judge, power-tuned (0: ignored, 1: full weight); effective n: the "
            f"human-rated contexts a human-only study would need for an interval as narrow as the {name} one.")


def _in_system_order(frame: pd.DataFrame, tables: JudgedTables, columns: tuple[str, ...]) -> pd.DataFrame:
    """``frame`` (in criterion order) with each criterion's rows in the report's system order, when it has one."""
    if not tables.systems or frame.empty:
        return frame
    from empeval.analysis.report.systems import in_system_order

    return in_system_order(frame, tables.systems, ("criterion", *columns))


def means_table(tables: JudgedTables) -> pd.DataFrame:
    """The section's table of means as text cells (criteria in the study's order), for the document and LaTeX."""
    means = _in_system_order(in_criterion_order(tables.means, tables.criteria), tables, ("system",))
    estimate = "crossppi" if tables.estimator == CROSS_PPI else "ppi"
    name = ESTIMATOR_NAMES[tables.estimator]
    return pd.DataFrame({
        "Criterion": means["criterion"], "System": means["system"],
        "n human-rated": means["n_human"].astype(int).astype(str),
        "n judge-only": means["n_judge_only"].astype(int).astype(str),
        "human-only mean [CI]": [fmt(m) + interval(lo, hi) for m, lo, hi in
                                 zip(means["human_mean"], means["human_ci_low"], means["human_ci_high"], strict=True)],
        "judge-only mean (biased)": [fmt(v) for v in means["judge_mean_biased"]],
        f"{name} mean [CI]": [fmt(m) + interval(lo, hi) for m, lo, hi in
                              zip(means[f"{estimate}_mean"], means[f"{estimate}_ci_low"], means[f"{estimate}_ci_high"],
                                  strict=True)],
        "λ": [fmt(v) for v in means["lam"]] if "lam" in means.columns else "n/a",
        "effective n human": [fmt(v, 0) for v in means["effective_n_human"]],
    })


def correlations_text(tables: JudgedTables) -> pd.DataFrame:
    """The judge-human correlations of scores and of differences as text cells, criteria in the study's order."""
    table = in_criterion_order(tables.correlations, tables.criteria)

    def cell(r, n):
        return f"{fmt(r)} (n = {int(n)})" if n else "n/a"

    columns = {"Criterion": table["criterion"],
               "scores r": [cell(r, n) for r, n in zip(table["score_r"], table["n_items"], strict=True)],
               "differences r, item scores differenced": [
                   cell(r, n) for r, n in zip(table["item_difference_r"], table["n_contexts"], strict=True)]}
    if (table["n_pair_contexts"] > 0).any():
        columns["differences r, judge of differences"] = [
            cell(r, n) for r, n in zip(table["pair_difference_r"], table["n_pair_contexts"], strict=True)]
    return pd.DataFrame(columns)


def why_not_available(row, estimate: str) -> str:
    """Why a paired difference's model-assisted interval or p-value (columns ``{estimate}_ci_low`` ...) is n/a,
    from its row; "" when it has numbers."""
    if np.isfinite(getattr(row, f"{estimate}_ci_low")) and np.isfinite(row.p_adj):
        return ""
    if row.n_human < 2:
        return f"{int(row.n_human)} context(s) rated for both systems: an interval needs 2"
    if not row.n_judge_only:
        return "no context left for the judge alone"
    if row.human_ci_low == row.human_ci_high:
        return "every context rated for both gives the same difference: no variance to estimate"
    return "the judge's scores of these contexts are incomplete"


def _pairs_text(tables: JudgedTables, alpha: float) -> pd.DataFrame:
    pairs = _in_system_order(in_criterion_order(tables.pairs, tables.criteria), tables, ("system_a", "system_b"))
    estimate = "crossppi" if tables.pairs_estimator == CROSS_PPI else "ppi"
    p_column = "p_crossppi" if tables.pairs_estimator == CROSS_PPI else "p_ppi"
    name = ESTIMATOR_NAMES[tables.pairs_estimator]
    table = pd.DataFrame({
        "Criterion": pairs["criterion"], "Pair (a − b)": [f"{a} − {b}" for a, b in
                                                          zip(pairs["system_a"], pairs["system_b"], strict=True)],
        "n human-rated": pairs["n_human"].astype(int).astype(str),
        "human-only Δ [CI]": [fmt(m) + interval(lo, hi) for m, lo, hi in
                              zip(pairs["human_diff"], pairs["human_ci_low"], pairs["human_ci_high"], strict=True)],
        "judge-only Δ (biased)": [fmt(v) for v in pairs["judge_diff_biased"]],
        f"{name} Δ [CI]": [fmt(m) + interval(lo, hi) for m, lo, hi in
                           zip(pairs[f"{estimate}_diff"], pairs[f"{estimate}_ci_low"], pairs[f"{estimate}_ci_high"],
                               strict=True)],
        "p": [fmt_p(v) for v in pairs[p_column]], "p adj.": [fmt_p(v) for v in pairs["p_adj"]],
        "sig.": ["yes" if v < alpha else "" for v in pairs["p_adj"]],
    })
    notes = [why_not_available(row, estimate) for row in pairs.itertuples(index=False)]
    if any(notes):
        table["note"] = notes
    return table


def _agreement_text(tables: JudgedTables) -> pd.DataFrame:
    agreement = _in_system_order(in_criterion_order(tables.agreement, tables.criteria), tables, ("system",))
    return pd.DataFrame({
        "Criterion": agreement["criterion"],
        "System": ["all systems" if s == ALL_SYSTEMS else s for s in agreement["system"]],
        "n items": agreement["n_items"].astype(int).astype(str),
        "α (interval) [CI]": [fmt(a) + interval(lo, hi) for a, lo, hi in
                              zip(agreement["alpha_interval"], agreement["alpha_ci_low"], agreement["alpha_ci_high"],
                                  strict=True)],
        "Spearman ρ": [fmt(v) for v in agreement["spearman"]],
        "label mean": [fmt(v) for v in agreement["label_mean"]],
        "judge mean": [fmt(v) for v in agreement["judge_mean"]],
        "note": agreement["note"].fillna(""),
    })
