"""Figures for the report and notebooks, drawn on matplotlib ``Figure`` objects.

No pyplot: a bare ``Figure`` renders through the Agg canvas whatever backend is configured, so nothing here
touches global plotting state or needs a display.
"""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.load import DEFAULT_SCALE


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


def system_means_plot(means: pd.DataFrame) -> Figure:
    """One panel per criterion: each system's mean with its CI (output of ``compare.system_means``)."""
    criteria = sorted(means["criterion"].unique())
    figure = Figure(figsize=(4.2 * max(len(criteria), 1), 3.0), layout="constrained")
    axes = np.atleast_1d(figure.subplots(1, max(len(criteria), 1), sharex=True))
    for axis, criterion in zip(axes, criteria, strict=False):  # one idle axis when there are no criteria
        part = means.loc[means["criterion"] == criterion].sort_values("mean")
        positions = np.arange(len(part))
        errors = np.vstack([part["mean"] - part["ci_low"], part["ci_high"] - part["mean"]])
        axis.errorbar(part["mean"], positions, xerr=errors, fmt="o", capsize=3)
        axis.set_yticks(positions, part["system"])
        axis.set_title(criterion.capitalize())
        axis.set_xlabel("mean score (95% CI)")
    return figure


def figure_png(figure: Figure, *, dpi: int = 110) -> bytes:
    """The figure as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
