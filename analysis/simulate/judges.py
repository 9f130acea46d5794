"""Simulated model-assisted studies: people rate a sample of contexts, a judge with a planted correlation to
the latent item quality scores every item, and the truth is known.

The rating model is ``analysis.stats.power``'s (the same as ``analysis.simulate.likert``'s), with its ``Components``:
the
latent quality of system s's response to context c is ``q = centre + effect_s + context_c + response_cs``; a
rater reports ``round(q + severity_rater + noise)`` clipped to the scale. Raters are a pool shared across
items, as in real studies: the human-rated contexts are cut into blocks of ``items_per_assignment``; each
block gives one batch of items per system rotation (no batch holds a context twice, systems balanced as in
``empeval.tasks.design``), and each batch is rated by ``raters_per_item`` raters drawn from the pool, one assignment
each (an assignment is one rater's batch, as in the export), no rater seeing a context twice. So a rater rates
many items, and the items of one batch share their raters: their labels are correlated, which intervals that
treat items as independent miss (``empeval.analysis.stats.ppi.estimates`` clusters by assignment for that).

A judge scores every item: ``shift + scale * (q + e) + bias_s`` with e ~ N(0, sd_e) chosen so that, within a
system, corr(judge, q) = ``correlation`` (sd_e^2 = v (1 / rho^2 - 1), v = context_sd^2 + response_sd^2); a
useless judge (correlation 0) is ``shift + scale * (centre + noise)``, blind to quality and to systems. Its
correlation with the item labels (means of k ratings) is lower, because labels carry rater noise.

The truth is what the human-only analysis of item means estimates, for this rater pool: the expected label
over the population of contexts, E[round(q + severity + noise)] averaged over the pool (each rating's rater
is uniform over the pool), in closed form from the normal CDF (``true_means``).

A judge of differences (``SimulatedDifferenceJudge``, optional) compares every pair of systems on every context,
as a pairwise judge asked in both orders does: ``scale * (D + e) + system_bias_a - system_bias_b`` with e ~ N(0,
sd_e), sd_e^2 = var(D) (1 / rho^2 - 1) within the pair, so that corr(judge difference, D) = ``correlation``. D is,
by default (``against="label"``), the label difference Y_a - Y_b people give the context (on a context nobody
rated, the one a panel of ``raters_per_item`` raters drawn from the pool would give, drawn the same way): the
planted correlation is then the judge-human correlation of differences that the report prints and the planner
reads, as the issue's "difference correlation" is meant. With ``against="latent"`` D is the latent difference
q_a - q_b (var 2 response_sd^2; the context's part of q cancels), as ``SimulatedJudge``'s correlation is with q.
A per-item judge of correlation rho correlates much less with D: its errors do not cancel in f_a - f_b while
the context's part of the quality does. Its draws come after every other draw of the study, so a seed gives the
same study with or without one.

Why not ``analysis.simulate.likert.simulate_study``: it draws controls and spammers and builds its export item by
item, and the coverage benchmark draws thousands of studies; this module draws them with numpy.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.stats.power import Components
from empeval.analysis.stats.ppi.differences import ppi_difference_interval
from empeval.analysis.stats.ppi.estimates import ppi_mean_interval, shared_rater_variance
from empeval.analysis.stats.ppi.tables import check_human_share

DEFAULT_COMPONENTS = Components()
DEFAULT_EFFECTS: dict[str, float] = {"gold": 0.6, "moel": 0.3, "baseline": 0.0}


@dataclass(frozen=True)
class SimulatedJudge:
    """How a simulated judge scores: ``shift + scale * (quality + e) + system_bias[system]``, with
    corr(judge, quality) = ``correlation`` within a system (0: a useless judge, blind to quality).

    Examples
    --------
    >>> SimulatedJudge("good", correlation=0.9)
    SimulatedJudge(name='good', correlation=0.9, shift=0.0, scale=1.0, system_bias={})
    """

    name: str
    correlation: float
    shift: float = 0.0
    scale: float = 1.0
    system_bias: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.correlation <= 1:
            raise ValueError(f"correlation must be in [0, 1], got {self.correlation!r}")


#: Correlation about 0.7 with the item labels (the mean of three ratings) under the default components.
GOOD_JUDGE = SimulatedJudge("good", correlation=0.9)
USELESS_JUDGE = SimulatedJudge("useless", correlation=0.0)
#: Shifted, compressed and partial to one system, yet correlated with quality.
BIASED_JUDGE = SimulatedJudge("biased", correlation=0.8, shift=1.5, scale=0.5, system_bias={"baseline": 0.4})


@dataclass(frozen=True)
class SimulatedDifferenceJudge:
    """How a simulated judge of differences compares two responses to one context: ``scale * (D + e) +
    system_bias[a] - system_bias[b]`` with corr(judge difference, D) = ``correlation`` within a pair (0: blind to
    the responses, pure noise of D's spread); D is the human label difference (``against="label"``) or the latent
    one (``"latent"``): module docstring. ``scale`` below 1 is a judge whose preferences are compressed (a pairwise
    judge's +-1 per order); PPI++'s lambda undoes it.

    Examples
    --------
    >>> SimulatedDifferenceJudge("pairs", correlation=0.7)
    SimulatedDifferenceJudge(name='pairs', correlation=0.7, scale=1.0, system_bias={}, against='label')
    """

    name: str
    correlation: float
    scale: float = 1.0
    system_bias: dict[str, float] = field(default_factory=dict)
    against: str = "label"

    def __post_init__(self) -> None:
        if self.against not in ("label", "latent"):
            raise ValueError(f"against must be 'label' or 'latent', got {self.against!r}")
        if not 0 <= self.correlation <= 1:
            raise ValueError(f"correlation must be in [0, 1], got {self.correlation!r}")
        if not self.scale > 0:
            raise ValueError(f"scale must be positive, got {self.scale!r}")


@dataclass
class JudgedStudy:
    """A simulated study: the human ratings on the sampled contexts, the judge's scores on every item, and
    the truth (see the module docstring)."""

    human_ratings: pd.DataFrame
    judge_scores: pd.DataFrame
    true_means: pd.DataFrame
    true_differences: pd.DataFrame
    rated_contexts: list[str]
    #: The same study as numpy arrays, for simulations that analyse thousands of studies: ``systems`` (sorted
    #: names), ``judge`` (contexts x systems), ``rated`` (indices of the rated contexts), and per rating
    #: ``rating_context``, ``rating_system``, ``rating_assignment``, ``rating_score``; ``true_means`` (per system);
    #: with a judge of differences, ``pairs`` (pairs x 2 system indices, a < b) and ``pair_judge`` (contexts x pairs).
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    #: The judge of differences' verdicts (None without one): ``criterion``, ``context_id``, ``system_a``,
    #: ``system_b`` (sorted names), ``judge``, ``judge_diff`` (A minus B), the input of
    #: ``empeval.analysis.stats.ppi.differences.ppi_pair_differences``.
    pair_scores: pd.DataFrame | None = None


def simulate_judged_study(
    *,
    judge: SimulatedJudge = GOOD_JUDGE,
    n_contexts: int = 400,
    human_share: float = 0.2,
    system_effects: dict[str, float] | None = None,
    components: Components = DEFAULT_COMPONENTS,
    raters_per_item: int = 3,
    n_raters: int = 20,
    items_per_assignment: int = 10,
    criterion: str = "empathy",
    seed: int | np.random.Generator = 0,
    difference_judge: SimulatedDifferenceJudge | None = None,
) -> JudgedStudy:
    """Draw one study (one criterion): see the module docstring for the model.

    ``human_share`` of the ``n_contexts`` contexts (a seeded uniform sample) are rated by people, every
    system's response on each; the judge scores every item; a ``difference_judge`` also compares every pair of
    systems on every context (``pair_scores``).

    Returns
    -------
    study : JudgedStudy
        * ``human_ratings``: one row per rating: ``context_id``, ``system``, ``criterion``, ``annotator``,
          ``score``, ``assignment_id``
        * ``judge_scores``: one row per item: ``context_id``, ``system``, ``criterion``, ``judge``,
          ``judge_score``
        * ``true_means``: ``criterion``, ``system``, ``true_mean``
        * ``true_differences``: ``criterion``, ``system_a``, ``system_b``, ``true_diff`` (a - b, sorted names)
        * ``rated_contexts``: the contexts people rated
        * ``pair_scores``: the difference judge's verdicts (None without ``difference_judge``)

    Examples
    --------
    >>> study = simulate_judged_study(n_contexts=40, human_share=0.25, seed=1)
    >>> len(study.rated_contexts), study.human_ratings.shape[0], study.judge_scores.shape[0]
    (10, 90, 120)
    >>> print(study.true_means.round(3).to_string(index=False))
    criterion   system  true_mean
      empathy baseline      3.427
      empathy     gold      3.968
      empathy     moel      3.705
    """
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    effects = dict(system_effects if system_effects is not None else DEFAULT_EFFECTS)
    if len(effects) < 2:
        raise ValueError("system_effects must name at least two systems")
    systems = sorted(effects)
    n_systems = len(systems)
    n_rated = check_human_share(human_share, n_contexts=n_contexts)
    if raters_per_item * n_systems > n_raters:
        raise ValueError(f"n_raters={n_raters} is too few: each block of contexts needs raters_per_item x systems "
                         f"= {raters_per_item * n_systems} distinct raters (no rater sees a context twice)")
    if items_per_assignment < n_systems:
        raise ValueError(f"items_per_assignment={items_per_assignment} must be at least the number of systems")
    c = components
    lo, hi = c.scale
    effect = np.array([effects[s] for s in systems])

    quality = (c.centre + effect[None, :] + rng.normal(0.0, c.context_sd, (n_contexts, 1))
               + rng.normal(0.0, c.response_sd, (n_contexts, n_systems)))
    severity = rng.normal(0.0, c.rater_sd, n_raters)
    judged = _judge_scores(judge, quality, systems, c, rng)

    rated = np.sort(rng.choice(n_contexts, n_rated, replace=False))
    contexts, item_systems, raters, assignments = _hand_out(rated, n_systems, raters_per_item, n_raters,
                                                            items_per_assignment, rng)
    latent = quality[contexts, item_systems]
    scores = np.clip(np.rint(latent + severity[raters] + rng.normal(0.0, c.noise_sd, latent.size)), lo, hi)

    names = np.array([f"ctx-{i:04d}" for i in range(n_contexts)])
    system_names = np.array(systems)
    human_ratings = pd.DataFrame({
        "context_id": names[contexts], "system": system_names[item_systems], "criterion": criterion,
        "annotator": np.array([f"rater-{r:02d}" for r in range(n_raters)])[raters], "score": scores.astype(int),
        "assignment_id": np.array([f"asg-{a:04d}" for a in assignments]),
    })
    judge_scores = pd.DataFrame({
        "context_id": np.repeat(names, n_systems), "system": np.tile(system_names, n_contexts),
        "criterion": criterion, "judge": judge.name, "judge_score": judged.ravel(),
    })
    truth = true_means(effects, components=c, severities=severity)
    means = pd.DataFrame({"criterion": criterion, "system": systems, "true_mean": [truth[s] for s in systems]})
    differences = pd.DataFrame(
        [{"criterion": criterion, "system_a": a, "system_b": b, "true_diff": truth[a] - truth[b]}
         for a, b in itertools.combinations(systems, 2)])
    arrays = {"systems": system_names, "judge": judged, "rated": rated, "rating_context": contexts,
              "rating_system": item_systems, "rating_assignment": assignments, "rating_score": scores,
              "true_means": np.array([truth[s] for s in systems])}
    pair_scores = None
    if difference_judge is not None:
        pairs = np.array(list(itertools.combinations(range(n_systems), 2)), dtype=int)
        if difference_judge.against == "label":
            target = _panel_labels(quality, severity, contexts, item_systems, scores, raters_per_item, c, rng)
        else:
            target = quality
        compared = _difference_scores(difference_judge, target, pairs, systems, rng)
        arrays.update(pairs=pairs, pair_judge=compared)
        pair_scores = pd.DataFrame({
            "criterion": criterion, "context_id": np.repeat(names, len(pairs)),
            "system_a": np.tile(system_names[pairs[:, 0]], n_contexts),
            "system_b": np.tile(system_names[pairs[:, 1]], n_contexts),
            "judge": difference_judge.name, "judge_diff": compared.ravel()})
    return JudgedStudy(human_ratings=human_ratings, judge_scores=judge_scores, true_means=means,
                       true_differences=differences, rated_contexts=list(names[rated]), arrays=arrays,
                       pair_scores=pair_scores)


def analyse_judged_arrays(arrays: dict[str, np.ndarray], *, ci_level: float = 0.95) -> tuple[list[dict], list[dict]]:
    """What ``ppi_system_means`` and ``ppi_paired_differences`` (clustered by assignment) compute for a study
    drawn by ``simulate_judged_study`` (every system rated on every rated context), from its ``arrays``.

    The DataFrame layer costs ten times more per study than the intervals themselves; coverage simulations
    analyse thousands of studies through this instead (tests pin it equal to the DataFrame functions).

    Returns
    -------
    means, pairs : list of dict
        One dict per system (``system``, the fields of ``ppi_mean_interval``, ``correlation``: Pearson's r of
        judge and label on the rated contexts) and one per pair of systems (``system_a``, ``system_b``, the
        fields of ``ppi_mean_interval`` for the differences a - b).

    Examples
    --------
    >>> means, pairs = analyse_judged_arrays(simulate_judged_study(n_contexts=40, human_share=0.25, seed=1).arrays)
    >>> [row["system"] for row in means], [(row["system_a"], row["system_b"]) for row in pairs]
    (['baseline', 'gold', 'moel'], [('baseline', 'gold'), ('baseline', 'moel'), ('gold', 'moel')])
    """
    judge, rated = arrays["judge"], arrays["rated"]
    n_contexts, n_systems = judge.shape
    context, system = arrays["rating_context"], arrays["rating_system"]
    assignment, score = arrays["rating_assignment"], arrays["rating_score"].astype(float)
    cell = context * n_systems + system
    counts = np.bincount(cell, minlength=n_contexts * n_systems).reshape(n_contexts, n_systems)
    with np.errstate(invalid="ignore", divide="ignore"):
        labels = np.bincount(cell, weights=score, minlength=n_contexts * n_systems).reshape(counts.shape) / counts
    unrated = np.ones(n_contexts, dtype=bool)
    unrated[rated] = False
    names = [str(name) for name in arrays["systems"]]
    rows = []
    for s in range(n_systems):
        mine = system == s
        centred = (score[mine] - labels[rated, s].mean()) / counts[context[mine], s]
        extra = shared_rater_variance(centred, context[mine], assignment[mine], n_items=rated.size)
        result = ppi_mean_interval(labels[rated, s], judge[rated, s], judge[unrated, s], ci_level=ci_level,
                                   rater_variance=extra)
        rows.append({"system": names[s], "correlation": float(np.corrcoef(labels[rated, s], judge[rated, s])[0, 1]),
                     **result})
    pairs = []
    for a, b in itertools.combinations(range(n_systems), 2):
        side_a, side_b = system == a, system == b
        centred = np.concatenate([(score[side_a] - labels[rated, a].mean()) / counts[context[side_a], a],
                                  -(score[side_b] - labels[rated, b].mean()) / counts[context[side_b], b]])
        extra = shared_rater_variance(centred, np.concatenate([context[side_a], context[side_b]]),
                                      np.concatenate([assignment[side_a], assignment[side_b]]), n_items=rated.size)
        difference = judge[:, a] - judge[:, b]
        result = ppi_mean_interval(labels[rated, a] - labels[rated, b], difference[rated], difference[unrated],
                                   ci_level=ci_level, rater_variance=extra)
        pairs.append({"system_a": names[a], "system_b": names[b], **result})
    return rows, pairs


def analyse_difference_arrays(arrays: dict[str, np.ndarray], *, ci_level: float = 0.95) -> list[dict]:
    """What ``empeval.analysis.stats.ppi.differences.ppi_pair_differences`` (clustered by assignment) computes for a
    study drawn by ``simulate_judged_study`` with a ``difference_judge``, from its ``arrays``: the fast path for
    simulations of thousands of studies (a test pins it equal to the DataFrame function).

    Returns
    -------
    pairs : list of dict
        One dict per pair of systems: ``system_a``, ``system_b``, the fields of
        ``differences.ppi_difference_interval`` for the differences a - b with the judge's differences as predictor.

    Examples
    --------
    >>> study = simulate_judged_study(n_contexts=40, human_share=0.25, seed=1,
    ...                               difference_judge=SimulatedDifferenceJudge("pairs", correlation=0.7))
    >>> [(row["system_a"], row["system_b"]) for row in analyse_difference_arrays(study.arrays)]
    [('baseline', 'gold'), ('baseline', 'moel'), ('gold', 'moel')]
    """
    if "pair_judge" not in arrays:
        raise ValueError("the study has no judge of differences: draw it with simulate_judged_study("
                         "difference_judge=...)")
    labels, counts, extras = _labels_and_pair_extras(arrays)
    rated = arrays["rated"]
    unrated = np.ones(labels.shape[0], dtype=bool)
    unrated[rated] = False
    names = [str(name) for name in arrays["systems"]]
    rows = []
    for index, (a, b) in enumerate(arrays["pairs"]):
        compared = arrays["pair_judge"][:, index]
        result = ppi_difference_interval(labels[rated, a] - labels[rated, b], compared[rated], compared[unrated],
                                         ci_level=ci_level, rater_variance=extras[(int(a), int(b))])
        rows.append({"system_a": names[a], "system_b": names[b], **result})
    return rows


def _labels_and_pair_extras(arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, dict]:
    """The item labels (contexts x systems, NaN where unrated), their rating counts, and the shared-rater variance
    of each pair's mean difference (as ``analyse_judged_arrays`` computes it)."""
    judge, rated = arrays["judge"], arrays["rated"]
    n_contexts, n_systems = judge.shape
    context, system = arrays["rating_context"], arrays["rating_system"]
    assignment, score = arrays["rating_assignment"], arrays["rating_score"].astype(float)
    cell = context * n_systems + system
    counts = np.bincount(cell, minlength=n_contexts * n_systems).reshape(n_contexts, n_systems)
    with np.errstate(invalid="ignore", divide="ignore"):
        labels = np.bincount(cell, weights=score, minlength=n_contexts * n_systems).reshape(counts.shape) / counts
    extras = {}
    for a, b in itertools.combinations(range(n_systems), 2):
        side_a, side_b = system == a, system == b
        centred = np.concatenate([(score[side_a] - labels[rated, a].mean()) / counts[context[side_a], a],
                                  -(score[side_b] - labels[rated, b].mean()) / counts[context[side_b], b]])
        extras[(a, b)] = shared_rater_variance(centred, np.concatenate([context[side_a], context[side_b]]),
                                               np.concatenate([assignment[side_a], assignment[side_b]]),
                                               n_items=rated.size)
    return labels, counts, extras


def cross_fitted_estimates(
    study: JudgedStudy,
    *,
    n_folds: int = 5,
    cluster_by: str | None = "assignment_id",
    ci_level: float = 0.95,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A learned judge on a simulated study, as ``learned-judge`` builds one: ridge regression
    (``empeval.analysis.stats.ppi.crossfit.cross_fit_judge``, ``n_folds`` folds over the human-rated contexts) from two
    features per item, the simulated judge's score and its system (one-hot), to the item labels; then the
    cross-prediction-powered means and paired differences (Zrnic and Candès 2024) with the shared-rater term
    over ``cluster_by``. The ridge learns to undo the simulated judge's shift, scale and system bias on the
    rated contexts, which is what training on the study's own ratings is for.

    Returns
    -------
    means, pairs : pandas.DataFrame
        ``crossppi_system_means`` and ``crossppi_paired_differences`` of the study.

    Examples
    --------
    >>> from empeval.analysis.simulate.judges import BIASED_JUDGE, simulate_judged_study
    >>> study = simulate_judged_study(judge=BIASED_JUDGE, n_contexts=200, human_share=0.25, seed=3)
    >>> means, pairs = cross_fitted_estimates(study)
    >>> columns = ["system", "n_human", "human_mean", "crossppi_mean", "width_ratio"]
    >>> print(means[columns].round(2).to_string(index=False))
      system  n_human  human_mean  crossppi_mean  width_ratio
    baseline       50        3.40           3.40         0.88
        gold       50        3.89           3.86         0.92
        moel       50        3.72           3.74         0.86
    """
    from empeval.analysis.stats.ppi.crossfit import cross_fit_judge, crossppi_paired_differences, crossppi_system_means

    items = study.judge_scores[["context_id", "system"]].reset_index(drop=True)
    systems = sorted(items["system"].unique())
    features = np.column_stack([study.judge_scores["judge_score"].to_numpy(dtype=float),
                                *[(items["system"] == system).to_numpy(dtype=float) for system in systems]])
    scores = cross_fit_judge(items, features, study.human_ratings, n_folds=n_folds, seed=seed)
    options = {"human_ratings": study.human_ratings, "cluster_by": cluster_by, "ci_level": ci_level}
    return crossppi_system_means(scores, **options), crossppi_paired_differences(scores, **options)


def true_means(system_effects: dict[str, float], *, components: Components, severities) -> dict[str, float]:
    """Expected label of each system for a pool of raters with the given severities: the mean over the pool
    of E[clip(round(m_s + severity + Z))], Z ~ N(0, context_sd^2 + response_sd^2 + noise_sd^2),
    m_s = centre + effect_s. On a scale lo..hi, E[clip(round(X))] = lo + sum_{j=lo}^{hi-1} P(X > j + 1/2).

    Returns
    -------
    truth : dict
        System -> expected label.

    Examples
    --------
    A centred, noiseless-looking case: a latent mean of 3 on a 1-5 scale is expected at 3 exactly.

    >>> truth = true_means({"a": 0.0}, components=Components(centre=3.0), severities=[-0.2, 0.2])
    >>> round(truth["a"], 10)
    3.0
    """
    c = components
    lo, hi = c.scale
    sd = float(np.sqrt(c.context_sd**2 + c.response_sd**2 + c.noise_sd**2))
    severity = np.asarray(severities, dtype=float)
    thresholds = np.arange(lo, hi) + 0.5
    truth = {}
    for system, effect in system_effects.items():
        location = c.centre + effect + severity[:, None]
        truth[system] = float(lo + stats.norm.sf((thresholds[None, :] - location) / sd).sum(axis=1).mean())
    return truth


def _judge_scores(judge: SimulatedJudge, quality: np.ndarray, systems: list[str], c: Components,
                  rng: np.random.Generator) -> np.ndarray:
    within = c.context_sd**2 + c.response_sd**2
    if judge.correlation == 0:
        signal = c.centre + rng.normal(0.0, np.sqrt(within), quality.shape)
    else:
        error_sd = np.sqrt(within * (1.0 / judge.correlation**2 - 1.0))
        signal = quality + rng.normal(0.0, error_sd, quality.shape)
    bias = np.array([judge.system_bias.get(system, 0.0) for system in systems])
    return judge.shift + judge.scale * signal + bias[None, :]


def _panel_labels(quality: np.ndarray, severity: np.ndarray, contexts: np.ndarray, item_systems: np.ndarray,
                  scores: np.ndarray, k: int, c: Components, rng: np.random.Generator) -> np.ndarray:
    """The label of every item (contexts x systems): the people's on the rated items, and on the others the mean of
    k ratings by raters drawn from the pool without replacement, drawn as people's are."""
    n_contexts, n_systems = quality.shape
    lo, hi = c.scale
    raters = np.argsort(rng.random((n_contexts * n_systems, severity.size)), axis=1)[:, :k]
    drawn = quality.reshape(-1, 1) + severity[raters] + rng.normal(0.0, c.noise_sd, raters.shape)
    labels = np.clip(np.rint(drawn), lo, hi).mean(axis=1).reshape(n_contexts, n_systems)
    cell = contexts * n_systems + item_systems
    counts = np.bincount(cell, minlength=n_contexts * n_systems)
    sums = np.bincount(cell, weights=scores, minlength=n_contexts * n_systems)
    rated = counts > 0
    labels.reshape(-1)[rated] = sums[rated] / counts[rated]
    return labels


def _difference_scores(judge: SimulatedDifferenceJudge, target: np.ndarray, pairs: np.ndarray, systems: list[str],
                       rng: np.random.Generator) -> np.ndarray:
    """The judge of differences' verdict on every context (rows) and pair (columns), from the per-item ``target``
    (labels or latent quality) whose differences it tracks: module docstring."""
    difference = target[:, pairs[:, 0]] - target[:, pairs[:, 1]]
    spread = difference.std(axis=0, ddof=1)[None, :]
    if judge.correlation == 0:
        signal = difference.mean(axis=0)[None, :] + rng.normal(0.0, 1.0, difference.shape) * spread
    else:
        noise = rng.normal(0.0, 1.0, difference.shape) * spread * np.sqrt(1.0 / judge.correlation**2 - 1.0)
        signal = difference + noise
    bias = np.array([judge.system_bias.get(system, 0.0) for system in systems])
    return judge.scale * signal + (bias[pairs[:, 0]] - bias[pairs[:, 1]])[None, :]


def _hand_out(rated: np.ndarray, n_systems: int, k: int, n_raters: int, block_size: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Ratings of every system's response on the rated contexts: blocks of contexts, one assignment per system
    rotation of a block (context i of the block shows system (i + j) mod S in assignment j), each assignment
    rated by k raters, all k * S raters of a block distinct; an assignment is one rater's batch, as in the
    export. Returns per rating: context, system, rater, assignment."""
    order = rng.permutation(rated)
    n_blocks = -(-order.size // block_size)
    contexts, systems, raters, assignments = [], [], [], []
    assignment = 0
    for block in np.array_split(order, n_blocks):
        chosen = rng.permutation(n_raters)[: k * n_systems].reshape(n_systems, k)
        position = np.arange(block.size)
        for rotation in range(n_systems):
            shown = (position + rotation) % n_systems
            for rater in chosen[rotation]:
                contexts.append(block)
                systems.append(shown)
                raters.append(np.full(block.size, rater))
                assignments.append(np.full(block.size, assignment))
                assignment += 1
    return (np.concatenate(contexts), np.concatenate(systems), np.concatenate(raters),
            np.concatenate(assignments))
