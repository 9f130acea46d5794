"""The study report: what reviewers read. Markdown plus a self-contained HTML, with CSV tables and figures.

``write_report`` runs the whole analysis on a tidy ratings table (``analysis.load``): rater quality and
exclusions, system means with CIs, pairwise tests with the declared correction, Friedman tests, agreement
with CIs, the rater-aware check, results with and without the flagged annotators side by side, figures, and a
methods paragraph filled with the study's own numbers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis import plots
from analysis.agreement import ALL_SYSTEMS, COEFFICIENT_LABELS, agreement_table
from analysis.compare import compare_pairs, friedman_test, system_means
from analysis.document import Block, BulletList, Document, Heading, Image, Paragraph, Table, to_html, to_markdown
from analysis.exclusions import ALL_RATERS, EXCLUDING_FLAGGED, exclude_annotators
from analysis.load import DEFAULT_SCALE, require_columns, tidy_from_export
from analysis.quality import (
    FLAG_RULES,
    control_summary,
    controls_beside_systems,
    flagged_annotators,
    rater_quality,
)
from analysis.rater_aware import rater_aware_check
from analysis.threads import single_threaded_blas

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

SIGNIFICANCE_MARK = "†"

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
    n_boot: int = 2000,
    ci_level: float = 0.95,
    scale: tuple[int, int] = DEFAULT_SCALE,
    quality_thresholds: dict | None = None,
    random_effects: tuple[str, ...] = ("annotator", "item"),
    seed: int = 0,
    include_late: bool = True,
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
    ``study_meta`` may carry name, pay_per_assignment, currency, platform_fee (a fraction such as 0.2, or an
    amount per assignment when above 1),
    items_per_assignment and k (ratings per response); pay figures appear in the methods only when given.

    Returns a dict with the paths: "markdown", "html", one "figure_<name>" per figure and one "table_<name>"
    per CSV.
    """
    with single_threaded_blas():
        return _write_report(ratings, out_dir, study_meta=study_meta, exclude_flagged=exclude_flagged,
                             correction=correction, family=family, alpha=alpha, n_boot=n_boot, ci_level=ci_level,
                             scale=scale, quality_thresholds=quality_thresholds, random_effects=random_effects,
                             seed=seed, include_late=include_late)


def _write_report(ratings, out_dir, *, study_meta, exclude_flagged, correction, family, alpha, n_boot, ci_level,
                  scale, quality_thresholds, random_effects, seed, include_late) -> dict[str, Path]:
    if "item" not in ratings.columns and "item_id" in ratings.columns:
        ratings = tidy_from_export(ratings, scale=scale)  # the store's export as it comes
    require_columns(ratings, REPORT_COLUMNS, what="write_report")
    if ratings.empty:
        raise ValueError("the ratings table is empty: nothing to report")
    if "late" not in ratings.columns:
        ratings = ratings.assign(late=False)  # a tidy table from before the export carried it: all on time
    is_late = ratings["late"].astype(bool)
    late = _late_counts(ratings.loc[is_late])
    if not include_late:
        ratings = ratings.loc[~is_late].reset_index(drop=True)
        if ratings.empty:
            raise ValueError(f"all {late['n_ratings']} ratings were submitted late: nothing to report without "
                             "them (include_late=True keeps them)")
    out_dir = Path(out_dir)
    (out_dir / "figures").mkdir(parents=True, exist_ok=True)
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    meta = dict(study_meta or {})

    quality = rater_quality(ratings, **(quality_thresholds or {}))
    flagged = flagged_annotators(quality)
    analysed = exclude_annotators(ratings, flagged) if exclude_flagged else ratings
    options = {"n_boot": n_boot, "ci_level": ci_level, "seed": seed}

    means = system_means(analysed, **options)
    pairs = compare_pairs(analysed, family=family, correction=correction, alpha=alpha, **options)
    friedman = friedman_test(analysed)
    agreement = agreement_table(analysed, scale=scale, **options)
    rater_check = rater_aware_check(analysed, raw=pairs, alpha=alpha, correction=correction, family=family,
                                    random_effects=random_effects, n_boot=n_boot, seed=seed)
    if flagged:
        # One half of each side-by-side table is the main result already computed: reuse it, run the other.
        other = ratings if exclude_flagged else exclude_annotators(ratings, flagged)
        means_both = _stacked(means, system_means(other, **options), exclude_flagged)
        pairs_both = _stacked(pairs, compare_pairs(other, family=family, correction=correction, alpha=alpha,
                                                   **options), exclude_flagged)
        agreement_both = _stacked(agreement, agreement_table(other, scale=scale, **options), exclude_flagged)
    else:
        means_both = pairs_both = agreement_both = None

    figures = {
        "score_distributions": plots.score_distributions(analysed, scale=scale),
        "system_means": plots.system_means_plot(means),
    }
    paths: dict[str, Path] = {}
    pngs: dict[str, bytes] = {}
    for name, figure in figures.items():
        pngs[name] = plots.figure_png(figure)
        path = out_dir / "figures" / f"{name}.png"
        path.write_bytes(pngs[name])
        paths[f"figure_{name}"] = path

    tables = {"system_means": means, "pairwise_tests": pairs, "friedman": friedman, "agreement": agreement,
              "rater_quality": quality, "rater_aware_check": rater_check}
    if flagged:
        tables.update(system_means_side_by_side=means_both, pairwise_tests_side_by_side=pairs_both,
                      agreement_side_by_side=agreement_both)
    for name, table in tables.items():
        path = out_dir / "tables" / f"{name}.csv"
        table.to_csv(path, index=False)
        paths[f"table_{name}"] = path

    study_name = meta.get("name") or ", ".join(sorted(map(str, ratings["study"].unique())))
    facts = _facts(ratings, analysed, quality, flagged, exclude_flagged)
    facts.update(late=late, include_late=include_late)
    document = Document(title=f"Human evaluation report: {study_name}")
    document.add(Paragraph(_summary_sentence(facts, exclude_flagged) + " " + _late_sentence(late, include_late)))
    document.add(Heading("Results"))
    document.add(Table(paper_table(means, pairs, alpha=alpha, ci_level=ci_level), caption=_paper_caption(
        correction, family, alpha, ci_level, n_boot)))
    document.add(Paragraph("Ranking per criterion (by mean; '>' marks a significant difference between neighbours "
                           "after correction, '~' one that is not):"))
    document.add(BulletList([f"{criterion}: {ranking}" for criterion, ranking in rankings(means, pairs).items()]))
    document.add(Image(pngs["system_means"], "figures/system_means.png",
                       caption=f"Mean score per system with {ci_level:.0%} bootstrap CIs over items."))
    document.add(Heading("Pairwise comparisons", level=3))
    document.add(Table(_pairs_table(pairs), caption=(
        f"Wilcoxon signed-rank tests on item-level means paired by context; p adj.: "
        f"{CORRECTION_NAMES.get(correction, correction)} correction over {_family_words(family)}; paired t-test "
        f"beside it; effect sizes with {ci_level:.0%} CIs.")))
    document.add(Table(_friedman_table(friedman), caption="Friedman tests across all systems (contexts as blocks)."))
    document.add(Heading("Rater-aware check", level=3))
    document.add(*_rater_check_blocks(rater_check, random_effects))
    document.add(Heading("Agreement"))
    document.add(Table(_agreement_table(agreement), caption=(
        f"Inter-annotator agreement per criterion, {ci_level:.0%} percentile bootstrap CIs over items "
        f"(B = {n_boot}); control items left out.")))
    notes = _agreement_notes(agreement)
    if notes:
        document.add(BulletList(notes))
    document.add(Heading("Score distributions"))
    document.add(Image(pngs["score_distributions"], "figures/score_distributions.png",
                       caption="Share of each score per system, one panel per criterion (control items left out)."))
    document.add(Heading("Rater quality"))
    document.add(*_quality_blocks(ratings, quality, flagged, exclude_flagged))
    if flagged:
        document.add(Heading("With and without the flagged annotators"))
        document.add(*_side_by_side_blocks(means_both, pairs_both, agreement_both, alpha))
    document.add(Heading("Methods"))
    document.add(Paragraph(methods_paragraph(
        facts, agreement=agreement, pairs=pairs, friedman=friedman, rater_check=rater_check, meta=meta,
        correction=correction, family=family, alpha=alpha, n_boot=n_boot, ci_level=ci_level, scale=scale,
        exclude_flagged=exclude_flagged)))

    markdown_path = out_dir / "report.md"
    html_path = out_dir / "report.html"
    markdown_path.write_text(to_markdown(document), encoding="utf-8")
    html_path.write_text(to_html(document), encoding="utf-8")
    return {"markdown": markdown_path, "html": html_path, **paths}


def _stacked(main: pd.DataFrame, other: pd.DataFrame, exclude_flagged: bool) -> pd.DataFrame:
    """The table ``exclusions.side_by_side`` would build, from the main result and the other one."""
    everyone, kept = (other, main) if exclude_flagged else (main, other)
    table = pd.concat([everyone.assign(raters=ALL_RATERS), kept.assign(raters=EXCLUDING_FLAGGED)], ignore_index=True)
    return table[["raters", *[c for c in table.columns if c != "raters"]]]


# --- tables ---------------------------------------------------------------------------------------------


def paper_table(
    means: pd.DataFrame, pairs: pd.DataFrame, *, alpha: float = 0.05, ci_level: float = 0.95
) -> pd.DataFrame:
    """System x criterion table of "mean ± half-CI-width", the best system per criterion in bold, and
    SIGNIFICANCE_MARK on systems significantly different from that best system (corrected p < alpha)."""
    criteria = sorted(means["criterion"].unique())
    systems = sorted(means["system"].unique())
    best = {c: means.loc[means["criterion"] == c].sort_values("mean", ascending=False)["system"].iloc[0]
            for c in criteria}
    rows = []
    for system in systems:
        row = {"System": system}
        for criterion in criteria:
            match = means.loc[(means["criterion"] == criterion) & (means["system"] == system)]
            if match.empty:
                row[criterion.capitalize()] = "–"
                continue
            entry = match.iloc[0]
            half = (entry["ci_high"] - entry["ci_low"]) / 2
            text = f"{entry['mean']:.2f} ± {half:.2f}"
            if system == best[criterion]:
                text = f"**{text}**"
            elif _significant(pairs, criterion, system, best[criterion], alpha):
                text += f" {SIGNIFICANCE_MARK}"
            row[criterion.capitalize()] = text
        rows.append(row)
    return pd.DataFrame(rows)


def rankings(means: pd.DataFrame, pairs: pd.DataFrame, *, alpha: float = 0.05) -> dict[str, str]:
    """Per criterion, systems from best to worst mean, joined by '>' where neighbours differ significantly and
    '~' where they do not, e.g. "gold (3.92) > moel (3.44) ~ baseline (3.30)"."""
    result = {}
    for criterion in sorted(means["criterion"].unique()):
        ordered = means.loc[means["criterion"] == criterion].sort_values("mean", ascending=False)
        text = ""
        previous = None
        for entry in ordered.itertuples(index=False):
            if previous is not None:
                text += " > " if _significant(pairs, criterion, previous, entry.system, alpha) else " ~ "
            text += f"{entry.system} ({entry.mean:.2f})"
            previous = entry.system
        result[criterion] = text
    return result


def _significant(pairs: pd.DataFrame, criterion: str, one: str, other: str, alpha: float) -> bool:
    match = pairs.loc[(pairs["criterion"] == criterion)
                      & (((pairs["system_a"] == one) & (pairs["system_b"] == other))
                         | ((pairs["system_a"] == other) & (pairs["system_b"] == one)))]
    return bool(not match.empty and match["p_adj"].iloc[0] < alpha)


def _paper_caption(correction: str, family: str, alpha: float, ci_level: float, n_boot: int) -> str:
    return (f"Mean score per system (1 = worst) ± half the width of the {ci_level:.0%} percentile bootstrap CI "
            f"over items (B = {n_boot}). Bold: best system on the criterion. {SIGNIFICANCE_MARK}: significantly "
            f"different from the best system (two-sided Wilcoxon signed-rank test on item-level means, "
            f"{CORRECTION_NAMES.get(correction, correction)} correction over {_family_words(family)}, "
            f"p < {alpha:g}).")


def _family_words(family: str) -> str:
    return "all pairs within each criterion" if family == "criterion" else "all pairwise tests of the study"


def _fmt(value, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def _fmt_p(value) -> str:
    if value is None or not np.isfinite(value):
        return "n/a"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def _interval(low, high, digits: int = 2) -> str:
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    return f" [{low:.{digits}f}, {high:.{digits}f}]"


def _pairs_table(pairs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for p in pairs.itertuples(index=False):
        rows.append({
            "Criterion": p.criterion, "Pair (a vs b)": f"{p.system_a} vs {p.system_b}", "n": _fmt(p.n_pairs, 0),
            "Δ mean (a−b)": _fmt(p.mean_diff), "W+": _fmt(p.w_plus, 1), "p (Wilcoxon)": _fmt_p(p.p_wilcoxon),
            "p adj.": _fmt_p(p.p_adj), "test": p.wilcoxon_method if isinstance(p.wilcoxon_method, str) else "n/a",
            "t": _fmt(p.t), "p adj. (t)": _fmt_p(p.p_t_adj),
            "r (rank-biserial)": _fmt(p.rank_biserial) + _interval(p.rb_ci_low, p.rb_ci_high),
            "d_z": _fmt(p.d_z) + _interval(p.dz_ci_low, p.dz_ci_high),
            "sig.": "yes" if p.significant else "no",
        })
    return pd.DataFrame(rows)


def _friedman_table(friedman: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for f in friedman.itertuples(index=False):
        rows.append({"Criterion": f.criterion, "contexts": str(f.n_blocks), "systems": str(f.n_systems),
                     "χ²": _fmt(f.statistic), "p": _fmt_p(f.p), "Kendall's W": _fmt(f.kendalls_w),
                     "note": f.note})
    return pd.DataFrame(rows)


def _agreement_table(agreement: pd.DataFrame) -> pd.DataFrame:
    pooled = agreement.loc[agreement["system"] == ALL_SYSTEMS]
    rows = []
    for key, label in COEFFICIENT_LABELS.items():
        row = {"Coefficient": label}
        for criterion in sorted(pooled["criterion"].unique()):
            entry = pooled.loc[(pooled["criterion"] == criterion) & (pooled["coefficient"] == key)]
            if entry.empty:
                continue
            entry = entry.iloc[0]
            row[criterion.capitalize()] = _fmt(entry["estimate"]) + _interval(entry["ci_low"], entry["ci_high"])
        rows.append(row)
    return pd.DataFrame(rows)


def _agreement_notes(agreement: pd.DataFrame) -> list[str]:
    pooled = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & agreement["estimate"].isna()]
    notes = [f"{COEFFICIENT_LABELS[r.coefficient]}, {r.criterion}: n/a, {r.note}" for r in pooled.itertuples()]
    icc = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & (agreement["coefficient"] == "icc")
                        & agreement["estimate"].notna()]
    notes += [f"ICC, {r.criterion}: {r.note}" for r in icc.itertuples()]
    fleiss = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & (agreement["coefficient"] == "fleiss_kappa")
                           & agreement["estimate"].notna()]
    notes += [f"Fleiss' kappa, {r.criterion}: {r.note}" for r in fleiss.itertuples() if "left out" in r.note]
    return notes


def _rater_check_blocks(check: pd.DataFrame, random_effects: tuple[str, ...]) -> list[Block]:
    effects = " and ".join(random_effects)
    intro = Paragraph(
        f"Linear mixed model score ~ system with crossed random intercepts for {effects} (Gao & Owen 2017 "
        "moment estimates of the variances, REML on small designs; GLS fixed effects; Wald tests of each pair, "
        "same correction), and Wilcoxon tests on annotator-z-scored scores, compared with the item-level "
        "results above.")
    flagged = check.loc[check["flagged"]]
    blocks: list[Block] = [intro]
    if flagged.empty:
        blocks.append(Paragraph("No pair changes order or significance under either check."))
    else:
        verb = "changes" if len(flagged) == 1 else "change"
        blocks.append(Paragraph(f"**{_count(len(flagged), 'pair')} {verb} order or significance:**"))
    rows = []
    for c in check.itertuples(index=False):
        rows.append({"Criterion": c.criterion, "Pair (a vs b)": f"{c.system_a} vs {c.system_b}",
                     "Δ mean": _fmt(c.mean_diff), "p adj.": _fmt_p(c.p_adj), "LMM Δ": _fmt(c.lmm_diff),
                     "LMM p adj.": _fmt_p(c.lmm_p_adj), "z Δ": _fmt(c.z_diff), "z p adj.": _fmt_p(c.z_p_adj),
                     "changes": c.reason or "none"})
    blocks.append(Table(pd.DataFrame(rows)))
    notes = sorted({n for n in check["lmm_note"] if n} | {n for n in check["z_note"] if n})
    if notes:
        blocks.append(BulletList(notes))
    return blocks


def _quality_blocks(ratings: pd.DataFrame, quality: pd.DataFrame, flagged: list[str],
                    exclude_flagged: bool) -> list[Block]:
    n = len(quality)
    action = "excluded from the main results" if exclude_flagged else "kept in the main results (exclude_flagged off)"
    blocks: list[Block] = [Paragraph(f"{len(flagged)} of {n} annotators flagged, {action}.")]
    if flagged:
        blocks.append(BulletList([f"{r.annotator}: {r.reasons}" for r in quality.loc[quality["flagged"]].itertuples()]))
    controls = control_summary(ratings)
    if not controls.empty:
        blocks.append(Table(pd.DataFrame({
            "Control targets": controls["criterion"], "controls rated": controls["n_controls"].astype(str),
            "scored below the real responses": controls["n_passed"].astype(int).astype(str),
            "pass rate": [f"{v:.0%}" for v in controls["pass_rate"]],
        }), caption="Control items, by the criterion each is built to fail (all annotators)."))
    beside = controls_beside_systems(ratings)
    if not beside.empty:
        criteria = [c.removeprefix("mean_") for c in beside.columns if c.startswith("mean_")]
        blocks.append(Table(pd.DataFrame({
            "Control": beside["control_kind"], "built to fail": beside["control_target"],
            **{c.capitalize(): [_fmt(v) for v in beside[f"mean_{c}"]] for c in criteria},
            "lowest real system on that criterion": [f"{s} ({_fmt(m)})" for s, m in
                                                     zip(beside["lowest_system"], beside["lowest_system_mean"],
                                                         strict=True)],
            "control last there": ["yes" if v else "NO" for v in beside["last_on_target"]],
        }), caption="Mean score of each control next to the real systems (all annotators): each control should "
                    "rank last on the criterion it is built to fail."))
    rows = []
    for q in quality.itertuples(index=False):
        rows.append({"Annotator": q.annotator, "items": str(q.n_items),
                     "controls passed": "n/a" if not q.n_controls else f"{q.control_pass_rate:.0%} of {q.n_controls}",
                     "straight-lined": _percent(q.straightline_rate), "halo": _fmt(q.halo),
                     "median s/item": _fmt(q.median_seconds, 1), "r with consensus": _fmt(q.consensus_r),
                     "flagged": "yes" if q.flagged else ""})
    blocks.append(Table(pd.DataFrame(rows), caption=(
        "Per annotator: share of controls scored below the real responses on the targeted criterion; share of "
        "items with one score on every criterion; halo (mean Spearman correlation between criteria); median "
        "time per item; correlation with the leave-one-out consensus of the other annotators.")))
    return blocks


def _percent(value) -> str:
    return "n/a" if value is None or not np.isfinite(value) else f"{value:.0%}"


def _side_by_side_blocks(means_both, pairs_both, agreement_both, alpha: float) -> list[Block]:
    wide = means_both.pivot_table(index=["criterion", "system"], columns="raters", values="mean").reset_index()
    rows = []
    for entry in wide.itertuples(index=False):
        record = dict(zip(wide.columns, entry, strict=True))
        everyone, kept = record.get(ALL_RATERS, np.nan), record.get(EXCLUDING_FLAGGED, np.nan)
        rows.append({"Criterion": record["criterion"], "System": record["system"], "mean, all raters": _fmt(everyone),
                     "mean, excluding flagged": _fmt(kept), "change": _fmt(kept - everyone)})
    blocks: list[Block] = [Table(pd.DataFrame(rows),
                                 caption="System means with all annotators and without the flagged ones.")]
    pair_rows = []
    keyed = pairs_both.set_index(["raters", "criterion", "system_a", "system_b"])
    for (criterion, a, b), _ in pairs_both.groupby(["criterion", "system_a", "system_b"]):
        everyone, kept = (keyed.loc[(raters, criterion, a, b)] if (raters, criterion, a, b) in keyed.index else None
                          for raters in (ALL_RATERS, EXCLUDING_FLAGGED))
        pair_rows.append({
            "Criterion": criterion, "Pair (a vs b)": f"{a} vs {b}",
            "Δ, all": _fmt(everyone["mean_diff"]) if everyone is not None else "n/a",
            "p adj., all": _fmt_p(everyone["p_adj"]) if everyone is not None else "n/a",
            "Δ, excl.": _fmt(kept["mean_diff"]) if kept is not None else "n/a",
            "p adj., excl.": _fmt_p(kept["p_adj"]) if kept is not None else "n/a",
            "conclusion changes": "yes" if (everyone is not None and kept is not None and (
                bool(everyone["p_adj"] < alpha) != bool(kept["p_adj"] < alpha)
                or np.sign(everyone["mean_diff"]) != np.sign(kept["mean_diff"]))) else "no",
        })
    blocks.append(Table(pd.DataFrame(pair_rows),
                        caption="Pairwise tests with all annotators and without the flagged ones."))
    alpha_rows = agreement_both.loc[(agreement_both["system"] == ALL_SYSTEMS)
                                    & (agreement_both["coefficient"] == "alpha_ordinal")]
    agreement_rows = []
    for criterion, part in alpha_rows.groupby("criterion"):
        cells = {r.raters: _fmt(r.estimate) + _interval(r.ci_low, r.ci_high) for r in part.itertuples()}
        agreement_rows.append({"Criterion": criterion, "alpha (ordinal), all": cells.get(ALL_RATERS, "n/a"),
                               "alpha (ordinal), excl.": cells.get(EXCLUDING_FLAGGED, "n/a")})
    blocks.append(Table(pd.DataFrame(agreement_rows),
                        caption="Krippendorff's alpha (ordinal) with and without the flagged annotators."))
    return blocks


# --- methods paragraph ----------------------------------------------------------------------------------


def _facts(ratings, analysed, quality, flagged, exclude_flagged) -> dict:
    real = analysed.loc[~analysed["is_control"].astype(bool)]
    per_item = real.groupby(["item", "criterion"]).size()
    controls = ratings.loc[ratings["is_control"].astype(bool)]
    return {
        "n_ratings": int(len(real)),
        "n_items": int(real["item"].nunique()),
        "n_contexts": int(real["context"].nunique()),
        "systems": sorted(real["system"].unique()),
        "criteria": sorted(real["criterion"].unique()),
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
    text = (f"{facts['n_ratings']} ratings of {facts['n_items']} items ({facts['n_contexts']} dialogue contexts × "
            f"{len(facts['systems'])} systems) on {', '.join(facts['criteria'])}, from {facts['n_annotators']} "
            f"annotators")
    if facts["n_flagged"] and exclude_flagged:
        text += f" ({facts['n_flagged']} flagged annotators excluded)"
    return text + "."


def methods_paragraph(
    facts: dict,
    *,
    agreement: pd.DataFrame,
    pairs: pd.DataFrame,
    friedman: pd.DataFrame,
    rater_check: pd.DataFrame,
    meta: dict,
    correction: str,
    family: str,
    alpha: float,
    n_boot: int,
    ci_level: float,
    scale: tuple[int, int],
    exclude_flagged: bool,
) -> str:
    """A methods paragraph with the study's real numbers, ready to adapt for a paper."""
    lo, hi = scale
    k = meta.get("k")
    k_text = (f"{facts['k_median']:g}" if facts["k_min"] == facts["k_max"]
              else f"a median of {facts['k_median']:g} (range {facts['k_min']}–{facts['k_max']})")
    sentences = [
        f"We collected {facts['n_ratings']} ratings of {facts['n_items']} responses ({facts['n_contexts']} dialogue "
        f"contexts × {len(facts['systems'])} systems: {', '.join(facts['systems'])}) on "
        f"{_count(len(facts['criteria']), 'criterion', 'criteria')} ({', '.join(facts['criteria'])}), each on a "
        f"{lo}–{hi} Likert scale, from "
        f"{facts['n_annotators']} annotators in {facts['n_assignments']} assignments; each response was rated by "
        f"{k_text} annotators" + (f" (design: {k} per response)" if k else "") + "."
    ]
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
    alphas = agreement.loc[(agreement["system"] == ALL_SYSTEMS) & (agreement["coefficient"] == "alpha_ordinal")]
    if not alphas.empty:
        parts = [f"{r.criterion} {_fmt(r.estimate)}{_interval(r.ci_low, r.ci_high)}" for r in alphas.itertuples()]
        sentences.append(
            f"Inter-annotator agreement (Krippendorff's α, ordinal) was {'; '.join(parts)} ({ci_level:.0%} "
            f"percentile bootstrap CIs over items, B = {n_boot}); Gwet's AC2, Fleiss' κ, the ICC where the design "
            "allows it and raw agreement are reported alongside.")
    n_tests = int(pairs["p_wilcoxon"].notna().sum())
    per_criterion = n_tests // max(len(facts["criteria"]), 1)
    per_family = (f"the {_count(per_criterion, 'pairwise comparison')} within each criterion"
                  if family == "criterion" else f"all {_count(n_tests, 'pairwise comparison')} of the study")
    methods = sorted(set(pairs["wilcoxon_method"].dropna()))
    sentences.append(
        "Systems were compared per criterion on item-level means (the annotators' scores of a response averaged), "
        "paired by dialogue context, with two-sided Wilcoxon signed-rank tests (" + "; ".join(methods) + "), "
        f"paired t-tests beside them; p-values were corrected with the {CORRECTION_NAMES.get(correction, correction)} "
        f"method over {per_family} (α = {alpha:g}). Effect sizes are the matched-pairs rank-biserial correlation "
        f"(bootstrap CI) and Cohen's d_z (noncentral-t CI); system means carry {ci_level:.0%} bootstrap CIs "
        "over items.")
    tested = friedman.loc[friedman["p"].notna()]
    if not tested.empty:
        sentences.append("Friedman tests across all systems: " + "; ".join(
            f"{r.criterion} χ²({r.n_systems - 1}) = {r.statistic:.2f}, p {_p_words(r.p)}, W = {r.kendalls_w:.2f}"
            for r in tested.itertuples()) + ".")
    changed = int(rater_check["flagged"].sum())
    outcome = ("left every pairwise conclusion unchanged" if changed == 0
               else f"changed the order or significance of {_count(changed, 'pair')}, flagged in the report")
    sentences.append("A linear mixed model with crossed random intercepts for annotator and item (variance "
                     "components by the method of moments of Gao & Owen 2017, refined to REML on small designs; "
                     "fixed effects by generalised least squares as in Ghosh, Hastie & Owen 2022; Wald tests), "
                     f"and tests on annotator-z-scored scores, {outcome}.")
    sentences.append(_pay_sentence(meta, facts))
    return " ".join(s for s in sentences if s)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _p_words(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"


def _pay_sentence(meta: dict, facts: dict) -> str:
    pay = meta.get("pay_per_assignment")
    if pay is None:
        return "Pay per assignment was not recorded for this report."
    currency = meta.get("currency", "USD")
    text = f"Annotators were paid {pay:.2f} {currency} per assignment"
    items = meta.get("items_per_assignment")
    if items:
        text += f" of {items} items ({pay / items:.3f} {currency} per item)"
        seconds = facts.get("median_seconds")
        if seconds and np.isfinite(seconds) and seconds > 0:
            hourly = pay / items / seconds * 3600
            text += f", about {hourly:.2f} {currency} per hour at the median {seconds:.0f} s per item"
    fee = meta.get("platform_fee")
    if fee is not None:
        # A fraction (0.2) is a rate on top of the pay; anything larger is an amount per assignment.
        text += (f"; the platform fee was {fee:.0%} on top" if fee <= 1
                 else f"; the platform fee was {fee:.2f} {currency} per assignment")
    return text + "."
