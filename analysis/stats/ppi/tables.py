"""The two input tables of model-assisted evaluation, checked, and the shapes the estimates work on.

An item is one system's response to one context, on one criterion. Its *label* is the mean of its k human
ratings (the unit ``analysis.stats.significance`` works on), so that an item rated by three people counts once. A
context is *human-rated* for a system when that system's item there has at least one rating; the judge
scores every item. Contexts, not items, are what the design samples for people (every system's response on
a sampled context), so paired differences have both sides.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

HUMAN_COLUMNS = ("context_id", "system", "criterion", "annotator", "score")
JUDGE_COLUMNS = ("context_id", "system", "criterion", "judge_score")
ITEM_KEYS = ["criterion", "system", "context_id"]

#: Fewest human-rated contexts per system and criterion an estimate runs on (a variance needs two).
MIN_HUMAN_CONTEXTS = 2


def check_human_share(human_share: float, *, n_contexts: int) -> int:
    """Check a design's ``human_share`` (the fraction of contexts people rate) and return the number of
    contexts it samples for people: ``round(human_share * n_contexts)``.

    Prediction-powered inference needs both human-rated contexts (at least two, for a variance) and contexts
    only the judge scored: a share of 0 or 1 is refused, as is one that rounds to fewer than two contexts or
    to all of them.

    Returns
    -------
    n_rated : int
        How many contexts people rate.

    Examples
    --------
    >>> check_human_share(0.2, n_contexts=400)
    80
    >>> check_human_share(1.0, n_contexts=400)
    Traceback (most recent call last):
    ...
    ValueError: human_share must be strictly between 0 and 1 (got 1.0): ...
    """
    if isinstance(human_share, bool) or not isinstance(human_share, (int, float)) or not math.isfinite(human_share):
        raise ValueError(f"human_share must be a number strictly between 0 and 1, got {human_share!r}")
    if not 0 < human_share < 1:
        raise ValueError(
            f"human_share must be strictly between 0 and 1 (got {human_share}): with 0 nobody rates and "
            "nothing corrects the judge; with 1 there is nothing left for the judge to add"
        )
    n_rated = round(human_share * n_contexts)
    if n_rated < MIN_HUMAN_CONTEXTS:
        raise ValueError(
            f"human_share={human_share} of {n_contexts} contexts gives {n_rated} human-rated context(s); "
            f"prediction-powered inference needs at least {MIN_HUMAN_CONTEXTS} per system: raise human_share"
        )
    if n_rated >= n_contexts:
        raise ValueError(
            f"human_share={human_share} of {n_contexts} contexts leaves no context for the judge alone: lower it"
        )
    return n_rated


def item_labels(human_ratings: pd.DataFrame) -> pd.DataFrame:
    """The label of every human-rated item: the mean of its ratings.

    Control items (``is_control`` true, when the column exists) are left out. A ``context`` column (the
    tidy table's name) is read as ``context_id``.

    Returns
    -------
    labels : pandas.DataFrame
        One row per criterion, system and context: ``criterion``, ``system``, ``context_id``, ``label`` (mean
        of the ratings), ``n_ratings``.

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({"context_id": ["c1", "c1", "c2"], "system": "gold", "criterion": "empathy",
    ...                         "annotator": ["ann", "bob", "ann"], "score": [4, 5, 3]})
    >>> item_labels(ratings)
      criterion system context_id  label  n_ratings
    0   empathy   gold         c1    4.5          2
    1   empathy   gold         c2    3.0          1
    """
    ratings = _with_context_id(human_ratings, "human_ratings")
    _require(ratings, HUMAN_COLUMNS, "human_ratings")
    if "is_control" in ratings.columns:
        ratings = ratings.loc[~ratings["is_control"].astype(bool)]
    scores = ratings["score"]
    scores = scores if pd.api.types.is_numeric_dtype(scores) else pd.to_numeric(scores, errors="coerce")
    bad = scores.isna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"human_ratings: column 'score' must hold numbers; row {row} holds "
                         f"{ratings['score'].iloc[row]!r}")
    ratings = ratings.assign(score=scores.astype(float))
    grouped = ratings.groupby(ITEM_KEYS, sort=True, observed=True)["score"]
    return pd.DataFrame({"label": grouped.mean(), "n_ratings": grouped.size()}).reset_index()


def rating_clusters(human_ratings: pd.DataFrame, *, cluster_by: str) -> pd.DataFrame:
    """Every human rating (controls left out) with the cluster it belongs to: the value of its ``cluster_by``
    column, e.g. ``assignment_id`` (one rater's batch; the tidy table's ``assignment`` is read as it).

    Returns
    -------
    ratings : pandas.DataFrame
        ``criterion``, ``system``, ``context_id``, ``score`` (float), ``cluster``.

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({"context_id": ["c1", "c2"], "system": "gold", "criterion": "empathy",
    ...                         "annotator": "ann", "score": [4, 5], "assignment_id": "a1"})
    >>> rating_clusters(ratings, cluster_by="assignment_id")
      criterion system context_id  score cluster
    0   empathy   gold         c1    4.0      a1
    1   empathy   gold         c2    5.0      a1
    >>> rating_clusters(ratings, cluster_by="batch")
    Traceback (most recent call last):
    ...
    ValueError: cluster_by='batch' is not a column of human_ratings ...
    """
    ratings = _with_context_id(human_ratings, "human_ratings")
    if cluster_by not in ratings.columns and cluster_by == "assignment_id" and "assignment" in ratings.columns:
        ratings = ratings.rename(columns={"assignment": "assignment_id"})
    if cluster_by not in ratings.columns:
        raise ValueError(
            f"cluster_by={cluster_by!r} is not a column of human_ratings (it has "
            f"{', '.join(map(repr, ratings.columns))}); name the column that groups ratings sharing a rater "
            "(assignment_id, or annotator), or pass cluster_by=None to treat items as independent"
        )
    if "is_control" in ratings.columns:
        ratings = ratings.loc[~ratings["is_control"].astype(bool)]
    return pd.DataFrame({"criterion": ratings["criterion"].to_numpy(), "system": ratings["system"].to_numpy(),
                         "context_id": ratings["context_id"].to_numpy(),
                         "score": pd.to_numeric(ratings["score"], errors="coerce").to_numpy(dtype=float),
                         "cluster": ratings[cluster_by].to_numpy()})


def select_judge(judge_scores: pd.DataFrame, *, judge: str | None = None) -> pd.DataFrame:
    """The judge scores of one judge, checked: one row per item, scores numeric or NaN (a failure).

    A table with a ``judge`` column may hold several judges; ``judge`` picks one (required when there are
    several, refused when it is not among them).

    Returns
    -------
    scores : pandas.DataFrame
        ``criterion``, ``system``, ``context_id``, ``judge_score`` (float, NaN where the judge failed), in the
        order given.

    Examples
    --------
    >>> import pandas as pd
    >>> scores = pd.DataFrame({"context_id": ["c1", "c1"], "system": "gold", "criterion": "empathy",
    ...                        "judge": ["llm", "length"], "judge_score": [4.0, 2.5]})
    >>> select_judge(scores, judge="llm")
      criterion system context_id  judge_score
    0   empathy   gold         c1          4.0
    >>> select_judge(scores)
    Traceback (most recent call last):
    ...
    ValueError: judge_scores holds several judges ('length', 'llm'): choose one with judge=...
    """
    scores = _with_context_id(judge_scores, "judge_scores")
    _require(scores, JUDGE_COLUMNS, "judge_scores")
    if "judge" in scores.columns:
        judges = sorted(scores["judge"].astype(str).unique())
        if judge is None and len(judges) > 1:
            raise ValueError(f"judge_scores holds several judges ({', '.join(map(repr, judges))}): "
                             "choose one with judge=...")
        if judge is not None:
            if judge not in judges:
                raise ValueError(f"judge={judge!r} has no scores in judge_scores; it holds "
                                 f"{', '.join(map(repr, judges)) or 'none'}")
            scores = scores.loc[scores["judge"].astype(str) == judge]
    elif judge is not None:
        raise ValueError(f"judge={judge!r} was given but judge_scores has no 'judge' column")
    values = pd.to_numeric(scores["judge_score"], errors="coerce")
    bad = (values.isna() & scores["judge_score"].notna()).to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"judge_scores: column 'judge_score' must hold numbers or NaN (a failure); row {row} "
                         f"holds {scores['judge_score'].iloc[row]!r}")
    scores = scores.assign(judge_score=values.astype(float))[ITEM_KEYS + ["judge_score"]]
    duplicated = scores.duplicated(ITEM_KEYS)
    if duplicated.any():
        first = scores.loc[duplicated].iloc[0]
        raise ValueError(f"judge_scores has more than one score for an item (criterion {first['criterion']!r}, "
                         f"system {first['system']!r}, context {first['context_id']!r}); keep one per item")
    return scores.reset_index(drop=True)


def judge_failures(
    judge_scores: pd.DataFrame, human_ratings: pd.DataFrame | None = None, *, judge: str | None = None
) -> pd.DataFrame:
    """Items the judge has no score for: a NaN ``judge_score`` (the judge failed), or, when
    ``human_ratings`` are given, a human-rated item missing from ``judge_scores`` altogether.

    Returns
    -------
    failures : pandas.DataFrame
        One row per such item: ``criterion``, ``system``, ``context_id``, ``reason`` ("no score" or
        "not scored").

    Examples
    --------
    >>> import pandas as pd
    >>> scores = pd.DataFrame({"context_id": ["c1", "c2"], "system": "gold", "criterion": "empathy",
    ...                        "judge_score": [4.0, float("nan")]})
    >>> ratings = pd.DataFrame({"context_id": ["c3"], "system": "gold", "criterion": "empathy",
    ...                         "annotator": "ann", "score": [4]})
    >>> judge_failures(scores, ratings)
      criterion system context_id      reason
    0   empathy   gold         c2    no score
    1   empathy   gold         c3  not scored
    """
    scores = select_judge(judge_scores, judge=judge)
    failed = scores.loc[scores["judge_score"].isna(), ITEM_KEYS].assign(reason="no score")
    parts = [failed]
    if human_ratings is not None:
        labels = item_labels(human_ratings)[ITEM_KEYS]
        unscored = labels.merge(scores[ITEM_KEYS], on=ITEM_KEYS, how="left", indicator=True)
        parts.append(unscored.loc[unscored["_merge"] == "left_only", ITEM_KEYS].assign(reason="not scored"))
    return pd.concat(parts, ignore_index=True).sort_values(ITEM_KEYS).reset_index(drop=True)


def judged_items(
    human_ratings: pd.DataFrame,
    judge_scores: pd.DataFrame,
    *,
    judge: str | None = None,
    allow_missing: bool = False,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every item with its judge score and, where people rated it, its label; the table the estimates use.

    Items the judge failed on (see ``judge_failures``) are refused unless ``allow_missing``, which drops them
    (human ratings of a dropped item are dropped with it) and counts them.

    Returns
    -------
    items : pandas.DataFrame
        ``criterion``, ``system``, ``context_id``, ``judge_score``, ``label`` (NaN where not human-rated),
        ``n_ratings`` (0 where not human-rated).
    dropped : pandas.DataFrame
        ``criterion``, ``system``, ``n_dropped_missing``: items dropped for want of a judge score.

    Examples
    --------
    >>> import pandas as pd
    >>> ratings = pd.DataFrame({"context_id": ["c1", "c1"], "system": "gold", "criterion": "empathy",
    ...                         "annotator": ["ann", "bob"], "score": [4, 5]})
    >>> scores = pd.DataFrame({"context_id": ["c1", "c2", "c3"], "system": "gold", "criterion": "empathy",
    ...                        "judge_score": [4.0, 3.0, float("nan")]})
    >>> items, dropped = judged_items(ratings, scores, allow_missing=True)
    >>> items
      criterion system context_id  judge_score  label  n_ratings
    0   empathy   gold         c1          4.0    4.5          2
    1   empathy   gold         c2          3.0    NaN          0
    >>> dropped
      criterion system  n_dropped_missing
    0   empathy   gold                  1
    """
    labels = item_labels(human_ratings).set_index(ITEM_KEYS)
    scores = select_judge(judge_scores, judge=judge).set_index(ITEM_KEYS)["judge_score"]
    # An outer alignment on the index: the same rows as an outer merge, in a third of the time (the coverage
    # benchmark runs this thousands of times).
    items = pd.concat([scores, labels], axis=1).sort_index().reset_index()
    missing = items["judge_score"].isna()
    if missing.any() and not allow_missing:
        first = items.loc[missing].iloc[0]
        raise ValueError(
            f"the judge has no score for {int(missing.sum())} item(s) (first: criterion {first['criterion']!r}, "
            f"system {first['system']!r}, context {first['context_id']!r}); list them with judge_failures(), "
            "or pass allow_missing=True to drop those items (the result says how many)"
        )
    dropped = pd.DataFrame({"criterion": [], "system": [], "n_dropped_missing": []})
    if missing.any():
        dropped = (items.loc[missing].groupby(["criterion", "system"], observed=True).size()
                   .rename("n_dropped_missing").reset_index())
        items = items.loc[~missing].copy()
    items["n_ratings"] = items["n_ratings"].fillna(0).astype(int)
    return items.reset_index(drop=True), dropped


def check_rated_share(part: pd.DataFrame, *, where: str) -> None:
    """Refuse to estimate from one system's items (one criterion) when people rated fewer than two of its
    contexts, or every one of them (a human share of 0 or 1 for that system).

    Returns
    -------
    None
        Raises ``ValueError`` naming ``where`` and the design's ``human_share`` option.

    Examples
    --------
    >>> import pandas as pd
    >>> part = pd.DataFrame({"label": [4.0, float("nan"), float("nan")], "judge_score": [4.0, 3.0, 2.0]})
    >>> check_rated_share(part, where="system 'gold', criterion 'empathy'")
    Traceback (most recent call last):
    ...
    ValueError: system 'gold', criterion 'empathy': 1 human-rated context(s); ... raise the study's human_share
    """
    n_rated = int(part["label"].notna().sum())
    if n_rated == len(part):
        raise ValueError(
            f"{where}: every one of its {n_rated} contexts is human-rated (a human share of 1), so no context is "
            "left for the judge alone; lower the study's human_share, or use analysis.stats.significance for a "
            "human-only analysis"
        )
    if n_rated < MIN_HUMAN_CONTEXTS:
        raise ValueError(
            f"{where}: {n_rated} human-rated context(s); prediction-powered inference needs at least "
            f"{MIN_HUMAN_CONTEXTS} per system (a human share of 0 leaves the judge uncorrected): "
            "raise the study's human_share"
        )


def _with_context_id(table: pd.DataFrame, name: str) -> pd.DataFrame:
    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(table).__name__}")
    if "context_id" not in table.columns and "context" in table.columns:
        return table.rename(columns={"context": "context_id"})
    return table


def _require(table: pd.DataFrame, columns, name: str) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{name} needs column(s) {', '.join(map(repr, missing))}; it has "
                         f"{', '.join(map(repr, table.columns)) or 'none'}")
