"""The A/B report's methods paragraph, with the study's own numbers: what was collected (choices, shown pairs, control
pairs, contexts, systems, annotators, assignments, judgments per pair), the design, the test and what it found, the
agreement on the choices, position bias, the control pairs, late answers, recruitment and pay, and the
qualification. Every number comes from the judgment table the report analysed and the tables it shows
(analysis.kinds.pairwise.tables), so the paragraph and the tables cannot disagree.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from empeval.analysis.kinds.pairwise.tables import PairwiseTables
from empeval.analysis.report.qualification import qualification_sentence
from empeval.analysis.report.recruitment import recruitment_sentence


def methods_paragraph(table: pd.DataFrame, tables: PairwiseTables, meta: dict[str, Any], *, systems: Sequence[str],
                      criteria: Sequence[str], n_boot: int, include_late: bool, alpha: float = 0.05,
                      exclusion: dict[str, Any] | None = None) -> str:
    """The methods paragraph of an A/B report: ``table`` the validated judgments it read (late ones included, as
    given), ``tables`` the tables it shows, ``systems`` and ``criteria`` in the report's order, ``meta`` the study's
    (k, ties, items_per_assignment, recruitment and pay, qualification; each sentence left out when it says
    nothing); ``exclusion`` the rater quality checks' outcome ("quality": analysis.kinds.pairwise.quality's table,
    "flagged", "exclude_flagged", "timed"), said with its numbers."""
    late = table["late"].astype(bool)
    used = table if include_late else table.loc[~late]
    sentences = [_collected(used, meta, systems, criteria), _design(meta), _exclusion(used, exclusion),
                 _test(tables.ab, criteria, alpha), _agreement(tables.agreement, criteria, n_boot),
                 _position(tables.position), _controls(tables.controls, used), _late(table, include_late),
                 _ranking(tables, n_boot), recruitment_sentence(meta), qualification_sentence(meta)]
    return " ".join(sentence for sentence in sentences if sentence)


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def _collected(used: pd.DataFrame, meta: dict[str, Any], systems: Sequence[str], criteria: Sequence[str]) -> str:
    real = used.loc[~used["is_control"].astype(bool)]
    shown = used.drop_duplicates(["assignment_id", "context_id", "pair"])
    n_control = int(shown["is_control"].astype(bool).sum())
    per_pair = real.drop_duplicates(["annotator", "context_id", "pair"]).groupby(["context_id", "pair"]).size()
    if per_pair.empty:
        judged = ""
    elif per_pair.min() == per_pair.max():
        judged = f"; each real pair on a context was judged by {_count(int(per_pair.iloc[0]), 'annotator')}"
    else:
        judged = (f"; each real pair on a context was judged by a median of {float(per_pair.median()):g} annotators "
                  f"(range {int(per_pair.min())}–{int(per_pair.max())})")
    k = meta.get("k")
    design = f" (design: {k} per pair)" if k and judged else ""
    return (f"We collected {_count(len(used), 'choice')} on {_count(len(criteria), 'criterion', 'criteria')} "
            f"({', '.join(criteria)}) for {_count(len(shown), 'shown pair')} of responses "
            f"({len(shown) - n_control} of real systems, {_count(n_control, 'control pair')}) over "
            f"{_count(int(real['context_id'].nunique()), 'dialogue context')} and "
            f"{_count(len(systems), 'system')} ({', '.join(systems)}), from "
            f"{_count(int(used['annotator'].nunique()), 'annotator')} in "
            f"{_count(int(used['assignment_id'].nunique()), 'assignment')}{judged}{design}.")


def _design(meta: dict[str, Any]) -> str:
    design = []
    if meta.get("items_per_assignment"):
        design.append(f"assignments held up to {meta['items_per_assignment']} pairs, control pairs included")
    if meta.get("ties") is not None:
        design.append("a tie was " + ("allowed" if meta["ties"] else "not allowed"))
    sentence = ("Annotators saw a conversation and two responses side by side (A on the left, B on the right; "
                "which system was on which side was counterbalanced and hidden) and chose the better one on each "
                "criterion")
    return sentence + (("; " + "; ".join(design) + ".") if design else ".")


def _test(ab: pd.DataFrame, criteria: Sequence[str], alpha: float) -> str:
    text = ("The A/B table counts judgments; its test counts contexts (an exact two-sided sign test over the "
            "contexts one system won on balance, Holm-adjusted over the pairs of each criterion).")
    if ab.empty:
        return text
    decided = ab.loc[(ab["contexts_won"] + ab["contexts_lost"]) > 0]
    significant = decided.loc[decided["significant"].astype(bool)]
    n_pairs = int(ab[["system_a", "system_b"]].drop_duplicates().shape[0])
    found = (f" Of the {_count(len(ab), 'comparison')} ({_count(n_pairs, 'pair')} of systems × "
             f"{_count(int(ab['criterion'].nunique()), 'criterion', 'criteria')}), "
             f"{len(significant)} differed significantly (p adj. < {alpha:g})")
    if significant.empty:
        return text + found + "."
    parts = []
    for criterion in [c for c in criteria if c in set(significant["criterion"])]:
        rows = significant.loc[significant["criterion"] == criterion]
        parts.append(f"{criterion}: " + ", ".join(
            f"{r.system_a if r.contexts_won > r.contexts_lost else r.system_b} over "
            f"{r.system_b if r.contexts_won > r.contexts_lost else r.system_a} "
            f"({r.contexts_won if r.contexts_won > r.contexts_lost else r.contexts_lost} of "
            f"{r.contexts_won + r.contexts_lost} decisive contexts, p adj. {_p(r.p_adj)})" for r in rows.itertuples()))
    return text + found + ": " + "; ".join(parts) + "."


def _exclusion(used: pd.DataFrame, exclusion: dict[str, Any] | None) -> str:
    """The quality rules, how many raters each flagged and what was done with them, with the choices they gave."""
    if exclusion is None:
        return ""
    from empeval.analysis.kinds.pairwise.quality import FLAG_RULES, rules_sentence

    quality, flagged = exclusion["quality"], exclusion["flagged"]
    text = rules_sentence(timed=exclusion["timed"])
    if not flagged:
        return text + f" None of the {_count(len(quality), 'annotator')} was flagged."
    by_rule = [f"{int(quality[column].sum())} for {words}" for column, words in FLAG_RULES.items()
               if quality[column].any()]
    choices = int(used["annotator"].isin(flagged).sum())
    verb = (f"{'was' if len(flagged) == 1 else 'were'} excluded with their {_count(choices, 'choice')}, leaving "
            f"{_count(int(used['annotator'].nunique()) - len(flagged), 'annotator')} and "
            f"{_count(len(used) - choices, 'choice')} in every analysis but the control pairs'"
            if exclusion["exclude_flagged"] else f"{'was' if len(flagged) == 1 else 'were'} kept (on request)")
    return (f"{text} {len(flagged)} of {len(quality)} annotators were flagged ({', '.join(by_rule)}) and {verb}; "
            "the report shows the A/B table and the agreement with and without them.")


def _agreement(agreement: pd.DataFrame, criteria: Sequence[str], n_boot: int) -> str:
    alphas = agreement.loc[(agreement["coefficient"] == "krippendorff_alpha") & agreement["estimate"].notna()]
    if alphas.empty:
        return ""
    by_criterion = {r.criterion: r for r in alphas.itertuples()}

    def interval(row: Any) -> str:
        low, high = getattr(row, "ci_low", np.nan), getattr(row, "ci_high", np.nan)
        return f" [{low:.2f}, {high:.2f}]" if np.isfinite(low) and np.isfinite(high) else ""

    parts = [f"{c} {by_criterion[c].estimate:.2f}{interval(by_criterion[c])} "
             f"({_count(int(by_criterion[c].units), 'unit')})" for c in criteria if c in by_criterion]
    return ("Agreement on the choices, each mapped to the system chosen or a tie (a unit: one pair on one context), "
            f"was Krippendorff's α (nominal) {'; '.join(parts)} (95% percentile bootstrap intervals over units, "
            f"{n_boot} resamples); Fleiss' κ is reported alongside.")


def _position(position: pd.DataFrame) -> str:
    pooled = position.loc[position["criterion"] == "all"]
    if pooled.empty or not np.isfinite(pooled["share_left"].iloc[0]):
        return ""
    row = pooled.iloc[0]
    interval = (f" [{row['ci_low']:.2f}, {row['ci_high']:.2f}]" if np.isfinite(row["ci_low"])
                and np.isfinite(row["ci_high"]) else "")
    decisive = _count(int(row["decisive"]), "decisive shown pair")
    return (f"Over all criteria, a share of {row['share_left']:.2f}{interval} of {decisive} went to the left "
            f"response (exact binomial test of 1/2, p {_p(row['p'])}).")


def _controls(controls: pd.DataFrame, used: pd.DataFrame) -> str:
    if controls.empty:
        return ""
    total, passed = int(controls["controls"].sum()), int(controls["passed"].sum())
    share = passed / total if total else np.nan
    return (f"Control pairs (a real response beside one built to lose on one criterion) were passed in {passed} of "
            f"{_count(total, 'judgment')} ({share:.0%}), by {_count(len(controls), 'annotator')}, and kept out of "
            "every comparison.")


def _late(table: pd.DataFrame, include_late: bool) -> str:
    late = table.loc[table["late"].astype(bool)]
    if late.empty:
        return ""
    n = int(late["assignment_id"].nunique())
    return (f"{_count(n, 'assignment')} ({_count(len(late), 'choice')}) {'was' if n == 1 else 'were'} submitted after "
            "expiring; " + ("they are analysed with the others." if include_late else "they are left out."))


def _ranking(tables: PairwiseTables, n_boot: int) -> str:
    if tables.ranking is None:
        return ""
    return (f"The ranking fits Bradley-Terry (Davidson's model with ties) with {n_boot} bootstrap resamples of "
            "contexts.")


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"= {p:.3f}"
