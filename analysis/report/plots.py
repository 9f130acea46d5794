"""Figures for the report and notebooks, drawn on matplotlib ``Figure`` objects.

No pyplot: a bare ``Figure`` renders through the Agg canvas whatever backend is configured, so nothing here
touches global plotting state or needs a display.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from empeval.analysis.kinds.likert.load import DEFAULT_SCALE


def score_distributions(
    ratings: pd.DataFrame, *, scale: tuple[int, int] = DEFAULT_SCALE, criteria: list[str] | None = None
) -> Figure:
    """One panel per criterion: the share of each score per system (non-control ratings), as grouped bars."""
    data = ratings.loc[~ratings["is_control"].astype(bool)]
    criteria = list(criteria) if criteria is not None else sorted(data["criterion"].unique())
    systems = sorted(data["system"].unique())
    values = np.arange(scale[0], scale[1] + 1)
    figure = Figure(figsize=(4.2 * max(len(criteria), 1), 3.4), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, max(len(criteria), 1), sharey=True))
    width = 0.8 / max(len(systems), 1)
    for axis, criterion in zip(axes, criteria, strict=False):  # one idle axis when there are no criteria
        on_criterion = data.loc[data["criterion"] == criterion]
        for index, system in enumerate(systems):
            scores = on_criterion.loc[on_criterion["system"] == system, "score"]
            shares = scores.value_counts(normalize=True).reindex(values, fill_value=0.0)
            offset = (index - (len(systems) - 1) / 2) * width
            axis.bar(values + offset, shares.to_numpy(), width=width, label=f"{system} (n={scores.size})")
        axis.set_title(criterion.capitalize())
        axis.set_xticks(values)
        axis.set_xlabel("score")
        axis.legend(fontsize="x-small", frameon=False)
    axes[0].set_ylabel("share of ratings")
    return figure


def system_order(means: pd.DataFrame) -> list[str]:
    """The systems of ``means`` (``compare.system_means``), best first by their mean over the criteria (ties by
    name): the one order every panel of the report's figures shares."""
    overall = means.groupby("system")["mean"].mean()
    return sorted(overall.index, key=lambda system: (-overall[system], system))


def system_means_plot(means: pd.DataFrame, *, criteria: list[str] | None = None,
                      systems: list[str] | None = None, ci_level: float = 0.95) -> Figure:
    """One panel per criterion (in ``criteria`` order; sorted by default): each system's mean with its CI
    (output of ``compare.system_means``). Every panel lists the systems in the same order, ``systems`` (default
    ``system_order``), the first at the top; a system without a mean on a criterion keeps its row, empty."""
    criteria = list(criteria) if criteria is not None else sorted(means["criterion"].unique())
    systems = list(systems) if systems is not None else system_order(means)
    figure = Figure(figsize=(4.2 * max(len(criteria), 1), 1.0 + 0.35 * max(len(systems), 3)), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, max(len(criteria), 1), sharex=True, sharey=True))
    row = {system: len(systems) - 1 - i for i, system in enumerate(systems)}  # the first system on top
    for axis, criterion in zip(axes, criteria, strict=False):  # one idle axis when there are no criteria
        part = means.loc[(means["criterion"] == criterion) & means["system"].isin(systems)]
        positions = part["system"].map(row).to_numpy(dtype=float)
        errors = np.vstack([part["mean"] - part["ci_low"], part["ci_high"] - part["mean"]])
        axis.errorbar(part["mean"], positions, xerr=errors, fmt="o", capsize=3)
        axis.set_yticks(np.arange(len(systems)), list(reversed(systems)))
        axis.set_ylim(-0.5, len(systems) - 0.5)
        axis.set_title(criterion.capitalize())
        axis.set_xlabel(f"mean score ({ci_level:.0%} CI)")
    return figure


def stacked_score_shares(ratings: pd.DataFrame, *, scale: tuple[int, int] = DEFAULT_SCALE,
                         criteria: list[str] | None = None, systems: list[str] | None = None) -> Figure:
    """Stacked Likert bars: one panel per criterion, one horizontal bar per system (in ``systems`` order, the
    first on top, the same in every panel; sorted by default), split into the share of each score of its real
    (non-control) ratings, lowest score on the left. Each score is one bar container, in scale order, with the
    systems' bars in ``systems`` order; a system not rated on a criterion gets an empty bar."""
    data = ratings.loc[~ratings["is_control"].astype(bool)]
    criteria = list(criteria) if criteria is not None else sorted(data["criterion"].unique())
    systems = list(systems) if systems is not None else sorted(data["system"].unique())
    values = np.arange(scale[0], scale[1] + 1)
    colours = _diverging(len(values))
    figure = Figure(figsize=(4.2 * max(len(criteria), 1), 1.2 + 0.35 * max(len(systems), 3)), layout="constrained")
    # Not sharey: each panel's tick labels carry its own n.
    axes = np.atleast_1d(figure.subplots(1, max(len(criteria), 1)))
    rows = np.arange(len(systems))[::-1]  # the first system on top
    for axis, criterion in zip(axes, criteria, strict=False):  # one idle axis when there are no criteria
        on_criterion = data.loc[data["criterion"] == criterion]
        counts = (on_criterion.groupby("system")["score"].value_counts().unstack(fill_value=0)
                  .reindex(index=systems, columns=values, fill_value=0))
        totals = counts.sum(axis=1).to_numpy(dtype=float)
        shares = counts.to_numpy(dtype=float) / np.where(totals > 0, totals, 1.0)[:, None]
        left = np.zeros(len(systems))
        for column, value in enumerate(values):
            axis.barh(rows, shares[:, column], left=left, color=colours[column], label=str(value), height=0.7)
            left += shares[:, column]
        axis.set_yticks(rows, [f"{system} (n={int(total)})" for system, total in zip(systems, totals, strict=True)])
        axis.set_xlim(0, 1)
        axis.set_ylim(-0.5, len(systems) - 0.5)
        axis.set_title(criterion.capitalize())
        axis.set_xlabel("share of ratings")
    axes[-1].legend(title="score", fontsize="x-small", frameon=False, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return figure


def _diverging(n: int) -> list:
    """``n`` colours from red (lowest score) through yellow to green (highest), matplotlib's RdYlGn."""
    from matplotlib import colormaps

    return [colormaps["RdYlGn"](x) for x in np.linspace(0.1, 0.9, max(n, 1))]


def figure_png(figure: Figure, *, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
