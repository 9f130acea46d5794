"""Simulated ACUTE-Eval studies with known truth, as an ACUTE judgment table (``empeval.analysis.kinds.acute.schema``).

ACUTE-Eval (Li, Weston & Roller 2019, "ACUTE-EVAL: Improved Dialogue Evaluation with Optimized Questions and
Multi-turn Comparisons"): a third-party rater reads two whole conversations side by side, each between a speaker and
a listener (a system), and answers each question by picking the listener on the left or the one on the right, with
a short justification; there is no tie.

The chat study behind it crosses prompts with partners: each system, and each control partner, has one conversation
on each of ``n_prompts`` prompts. A conversation of system s has, per question q, the latent quality
``quality[s][q] + u`` with ``u ~ N(0, conversation_sd)`` its own (fixed for every rater who reads it). Every pair of
systems is compared on every prompt (the two conversations share the prompt, so the prompt's own effect cancels),
each pair of conversations by k different raters.

An honest rater compares the two conversations the Thurstone way (Thurstone 1927, case V), as the A/B simulation
does (``analysis.simulate.pairwise``): she perceives each with independent normal noise ``noise_sd``, the left one
shifted by her own position bias ``b ~ N(position_bias, position_bias_sd)`` (drawn once per rater), and picks the
one she perceives as better. So, with the sides balanced, she picks s over t with probability

    w(s, t) = (Phi((d + m) / tau) + Phi((d - m) / tau)) / 2,   d = quality[s][q] - quality[t][q],
    tau^2 = 2 conversation_sd^2 + 2 noise_sd^2 + position_bias_sd^2,   m = position_bias,

(``true_win_rate``), and the left one with probability ``(Phi((d + m) / tau) + Phi((m - d) / tau)) / 2`` for a pair
of systems d apart (``true_share_left``: averaged over the pairs of systems, which the design compares equally
often). The analysis fits Bradley & Terry (1952) to the judgments; w is Thurstone's, not Bradley-Terry's, so the
strengths it estimates are those of the Bradley-Terry model closest to w (the maximum-likelihood fit to infinitely
many judgments of this design, every pair of systems compared equally often): ``true_strengths``.

Careless raters: random clickers (left or right, uniformly), straight-liners (always the same side) and raters who
invert the question (they perceive as an honest rater does and pick the worse listener). Each rater's pairs of
conversations are cut into assignments of ``pairs_per_assignment``, each with ``controls_per_assignment`` control
pairs: a system's conversation beside a control partner's on a prompt the rater has not read, the control built to
lose on its target question (known-bad, as ACUTE-Eval's own quality checks), on the side that alternates over the
rater's control pairs. The k judgments of a pair of conversations go to the k least loaded raters who have not read
its prompt (of those who have, when everyone has); its sides alternate over them, starting on the side that
alternates over the pairs of conversations of its pair of systems, so every pair of systems is shown balanced
within one.

>>> study = simulate_acute_study(n_prompts=4, k=2, seed=1)  # 3 pairs of systems x 4 prompts x 2, a control pair each
>>> len(study.judgments), study.true_ranking("empathy")      # of the 12 raters' assignments; 2 questions each
(72, ['gold', 'moel', 'baseline'])
>>> round(study.true_win_rate("gold", "baseline", "empathy"), 3)
0.918
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import pandas as pd
from scipy import stats

from empeval.analysis.kinds.acute.schema import ACUTE_COLUMNS
from empeval.analysis.kinds.pairwise.schema import pair_name

QUESTIONS: tuple[str, ...] = ("empathy", "talk_to")
# Latent quality of each system's listening, per question (the Thurstone scale: differences in noise units).
DEFAULT_SYSTEM_QUALITY: dict[str, dict[str, float]] = {
    "gold": {"empathy": 0.9, "talk_to": 0.8},
    "moel": {"empathy": 0.2, "talk_to": 0.2},
    "baseline": {"empathy": -0.6, "talk_to": -0.5},
}
# Each control partner: the question it is built to lose on, and its latent quality per question.
DEFAULT_CONTROLS: dict[str, tuple[str, dict[str, float]]] = {
    "control-generic": ("empathy", {"empathy": -3.0, "talk_to": -2.0}),
}
CARELESS_KINDS = ("random", "straight", "inverted")
_WHY = {"empathy": "understood how the speaker felt", "talk_to": "is the one I would rather talk to"}


@dataclass
class SimulatedAcuteStudy:
    """A simulated ACUTE judgment table plus the truth it was drawn from: the systems' and control partners' latent
    qualities, the careless raters, each rater's position bias and the model's spreads."""

    judgments: pd.DataFrame
    system_quality: dict[str, dict[str, float]]
    controls: dict[str, tuple[str, dict[str, float]]]
    careless: dict[str, str] = field(default_factory=dict)  # annotator -> "random" | "straight" | "inverted"
    rater_bias: dict[str, float] = field(default_factory=dict)  # annotator -> her position bias b
    position_bias: float = 0.0
    position_bias_sd: float = 0.0
    conversation_sd: float = 0.3
    noise_sd: float = 0.7

    @property
    def tau(self) -> float:
        """The spread of an honest rater's perceived difference between two conversations of given systems: the two
        conversations' own deviations, her two perception noises and the spread of position biases over raters."""
        return float(np.sqrt(2 * self.conversation_sd ** 2 + 2 * self.noise_sd ** 2 + self.position_bias_sd ** 2))

    def true_ranking(self, question: str) -> list[str]:
        """Systems from best to worst on ``question`` by their latent quality.

        Returns
        -------
        systems : list of str

        Examples
        --------
        >>> simulate_acute_study(n_prompts=2, seed=0).true_ranking("talk_to")
        ['gold', 'moel', 'baseline']
        """
        return sorted(self.system_quality, key=lambda system: -self.system_quality[system][question])

    def true_win_rate(self, system_a: str, system_b: str, question: str) -> float:
        """The probability that an honest rater picks ``system_a``'s listener over ``system_b``'s on ``question``,
        the sides balanced (the module docstring's w).

        Returns
        -------
        rate : float

        Examples
        --------
        >>> study = simulate_acute_study(n_prompts=2, seed=0)
        >>> round(study.true_win_rate("moel", "moel", "empathy"), 3)
        0.5
        """
        d = self.system_quality[system_a][question] - self.system_quality[system_b][question]
        m, tau = self.position_bias, self.tau
        return float((stats.norm.cdf((d + m) / tau) + stats.norm.cdf((d - m) / tau)) / 2)

    def true_share_left(self, question: str) -> float:
        """The share of an honest rater's picks on ``question`` that go to the conversation on the left, over the
        pairs of systems (compared equally often, each shown balanced).

        Returns
        -------
        share : float

        Examples
        --------
        >>> simulate_acute_study(n_prompts=2, seed=0).true_share_left("empathy")
        0.5
        """
        m, tau = self.position_bias, self.tau
        shares = []
        for a, b in combinations(sorted(self.system_quality), 2):
            d = self.system_quality[a][question] - self.system_quality[b][question]
            shares.append((stats.norm.cdf((d + m) / tau) + stats.norm.cdf((m - d) / tau)) / 2)
        return float(np.mean(shares))

    def true_strengths(self, question: str) -> pd.Series:
        """The Bradley-Terry log strengths (mean zero) the analysis estimates on ``question``: the model's
        maximum-likelihood fit (choix's ``ilsr_pairwise_dense``) to the true win rates, every pair of systems
        weighted alike as the design compares them.

        Returns
        -------
        strengths : pandas.Series
            Indexed by system, sorted by name.

        Examples
        --------
        >>> strengths = simulate_acute_study(n_prompts=2, seed=0).true_strengths("empathy")
        >>> strengths.round(2).to_dict()
        {'baseline': -1.2, 'gold': 1.14, 'moel': 0.05}
        """
        import choix

        systems = sorted(self.system_quality)
        rates = np.array([[self.true_win_rate(a, b, question) if a != b else 0.0 for b in systems] for a in systems])
        theta = choix.ilsr_pairwise_dense(rates, alpha=0.0, max_iter=10_000, tol=1e-12)
        return pd.Series(theta - theta.mean(), index=systems, name=question)


def _qualities(given: Mapping[str, Mapping[str, float] | float], questions: tuple[str, ...], what: str
               ) -> dict[str, dict[str, float]]:
    """Per system a quality per question: a number means the same for every question."""
    qualities = {}
    for system, quality in given.items():
        if isinstance(quality, int | float):
            qualities[system] = dict.fromkeys(questions, float(quality))
            continue
        missing = [q for q in questions if q not in quality]
        if missing:
            raise ValueError(f"{what} {system!r} has no quality for question(s) {missing}; give one per question of "
                             f"{list(questions)}")
        qualities[system] = {q: float(quality[q]) for q in questions}
    return qualities


def simulate_acute_study(
    *,
    n_prompts: int = 30,
    system_quality: Mapping[str, Mapping[str, float] | float] | None = None,
    controls: Mapping[str, tuple[str, Mapping[str, float] | float]] | None = None,
    questions: tuple[str, ...] = QUESTIONS,
    k: int = 3,
    n_honest: int = 12,
    n_random_clickers: int = 0,
    n_straight_liners: int = 0,
    n_inverted: int = 0,
    pairs_per_assignment: int = 5,
    controls_per_assignment: int = 1,
    conversation_sd: float = 0.3,
    noise_sd: float = 0.7,
    position_bias: float = 0.0,
    position_bias_sd: float = 0.0,
    study: str = "simulated-acute",
    seed: int = 0,
) -> SimulatedAcuteStudy:
    """Draw a complete ACUTE-Eval study; see the module docstring for the model and the design. ``k`` judgments per
    pair of conversations; ``position_bias`` (in the latent quality's units) is the mean shift of the left
    conversation's perceived quality over honest raters, ``position_bias_sd`` its spread; ``controls`` maps each
    control partner to (its target question, its quality).

    Returns
    -------
    study : SimulatedAcuteStudy
        * ``judgments``: a pandas.DataFrame with the columns ``ACUTE_COLUMNS`` (one row per judgment and question;
          prompts numbered from 1, conversations from 1 in prompt order, each the chat session (prompt - partner)
          mod n_prompts + 1 of a Latin square; no late submissions)
        * ``system_quality``, ``controls``: the truth, system -> question -> latent quality
        * ``careless``: annotator -> "random", "straight" or "inverted", for the raters who are not honest
        * ``rater_bias``: annotator -> her position bias

    Examples
    --------
    >>> from empeval.analysis.kinds.acute.schema import validate_acute
    >>> study = simulate_acute_study(n_prompts=6, k=2, seed=1)
    >>> table = validate_acute(study.judgments)
    >>> table.loc[~table["is_control"]].groupby(["pair", "criterion"]).size().unique().tolist()  # 6 prompts x 2
    [12]
    """
    rng = np.random.default_rng(seed)
    quality = _qualities(system_quality or DEFAULT_SYSTEM_QUALITY, questions, "system")
    given_controls = DEFAULT_CONTROLS if controls is None else controls
    control_of = {name: (target, _qualities({name: q}, questions, "control partner")[name])
                  for name, (target, q) in given_controls.items()}
    for name, (target, _) in control_of.items():
        if target not in questions:
            raise ValueError(f"control partner {name!r} targets {target!r}, not one of the questions {list(questions)}")
    systems = sorted(quality)
    if len(systems) < 2 or set(systems) & set(control_of):
        raise ValueError(f"an ACUTE study compares at least two systems, none of them a control partner; got "
                         f"{systems} and controls {sorted(control_of)}")
    n_raters = n_honest + n_random_clickers + n_straight_liners + n_inverted
    if k < 1 or n_prompts < 1 or n_raters < k:
        raise ValueError(f"need k >= 1, n_prompts >= 1 and at least k raters (the k judgments of a pair of "
                         f"conversations go to k different raters); got k={k}, n_prompts={n_prompts}, "
                         f"{n_raters} raters")

    names = [f"rater-{i:02d}" for i in range(1, n_raters + 1)]
    roles = [str(role) for role in rng.permutation(["honest"] * n_honest + ["random"] * n_random_clickers
                                                   + ["straight"] * n_straight_liners + ["inverted"] * n_inverted)]
    role_of = dict(zip(names, roles, strict=True))
    bias_of = {name: float(rng.normal(position_bias, position_bias_sd)) for name in names}
    side_of = {name: str(rng.choice(["left", "right"])) for name in names}

    # The chat study's conversations: one per prompt and partner, each with its own deviation per question.
    partners = [*systems, *sorted(control_of)]
    prompts = list(range(1, n_prompts + 1))
    conversation: dict[tuple[int, str], int] = {}
    session: dict[int, int] = {}
    deviation: dict[int, dict[str, float]] = {}
    for prompt in prompts:
        for j, partner in enumerate(partners):
            key = len(conversation) + 1
            conversation[prompt, partner] = key
            session[key] = (prompt - 1 - j) % n_prompts + 1
            deviation[key] = {q: float(rng.normal(0.0, conversation_sd)) for q in questions}

    def latent(partner: str, key: int, question: str) -> float:
        base = quality[partner][question] if partner in quality else control_of[partner][1][question]
        return base + deviation[key][question]

    # Pairs of conversations: every pair of systems on every prompt; each placed k times, sides alternating.
    units_of: dict[int, list[tuple[int, int, str, str]]] = {prompt: [] for prompt in prompts}  # (id, prompt, l, r)
    comparison_of: dict[tuple[int, str, str], int] = {}
    for first, second in combinations(systems, 2):
        start = bool(rng.integers(2))
        for index, prompt in enumerate(prompts):
            number = len(comparison_of) + 1
            comparison_of[prompt, first, second] = number
            flip = start != bool(index % 2)
            for placement in range(k):
                first_left = flip != bool(placement % 2)
                left, right = (first, second) if first_left else (second, first)
                units_of[prompt].append((number, prompt, left, right))
    seen: dict[str, set[int]] = {name: set() for name in names}
    load = dict.fromkeys(names, 0)
    work: dict[str, list[tuple[int, int, str, str]]] = {name: [] for name in names}
    for prompt in rng.permutation(prompts):
        by_comparison: dict[int, list[tuple[int, int, str, str]]] = {}
        for unit in units_of[int(prompt)]:
            by_comparison.setdefault(unit[0], []).append(unit)
        for placed in by_comparison.values():
            ranked = sorted(names, key=lambda name: (int(prompt) in seen[name], load[name], rng.random()))
            for rater, unit in zip(ranked, placed, strict=False):
                work[rater].append(unit)
                seen[rater].add(int(prompt))
                load[rater] += 1

    # Control pairs: their own ids after the real ones, one per (control partner, system, prompt) as drawn.
    control_ids: dict[tuple[int, str, str], int] = {}
    chunks = []
    for name in names:
        mine = [work[name][i] for i in rng.permutation(len(work[name]))]
        chunks += [(name, mine[i:i + pairs_per_assignment]) for i in range(0, len(mine), pairs_per_assignment)]
    chunks = [chunks[i] for i in rng.permutation(len(chunks))]
    control_side = {name: bool(rng.integers(2)) for name in names}

    rows = []
    for number, (rater, chunk) in enumerate(chunks, start=1):
        shown = list(chunk)
        free = [prompt for prompt in prompts if prompt not in seen[rater]]
        for _ in range(controls_per_assignment if control_of else 0):
            if not free:
                break
            prompt = free.pop(int(rng.integers(len(free))))
            partner = sorted(control_of)[int(rng.integers(len(control_of)))]
            real = systems[int(rng.integers(len(systems)))]
            key = control_ids.setdefault((prompt, partner, real), len(comparison_of) + len(control_ids) + 1)
            control_side[rater] = not control_side[rater]
            shown.append((key, prompt, partner, real) if control_side[rater] else (key, prompt, real, partner))
            seen[rater].add(prompt)
        shown = [shown[i] for i in rng.permutation(len(shown))]
        for position, (comparison, prompt, left, right) in enumerate(shown):
            left_key, right_key = conversation[prompt, left], conversation[prompt, right]
            control = next((p for p in (left, right) if p in control_of), None)
            for question in questions:
                choice = _choice(rng, role_of[rater], side_of[rater], latent(left, left_key, question),
                                 latent(right, right_key, question), noise_sd=noise_sd, bias=bias_of[rater])
                rows.append({
                    "study": study, "assignment_id": number, "annotator": rater, "context_id": prompt,
                    "criterion": question, "pair": pair_name(left, right), "system_left": left,
                    "system_right": right, "choice": choice, "preferred": left if choice == "left" else right,
                    "position": position, "is_control": control is not None,
                    "control_target": control_of[control][0] if control is not None else None, "late": False,
                    "comparison_id": comparison, "conversation_left": left_key, "conversation_right": right_key,
                    "chat_assignment_left": session[left_key], "chat_assignment_right": session[right_key],
                    "context_left": prompt, "context_right": prompt, "same_prompt": True,
                    "justification": f"The {choice} listener {_WHY.get(question, 'was the better one')}."})
    judgments = pd.DataFrame(rows, columns=list(ACUTE_COLUMNS))
    return SimulatedAcuteStudy(
        judgments=judgments, system_quality=quality, controls=control_of,
        careless={name: role for name, role in role_of.items() if role != "honest"}, rater_bias=bias_of,
        position_bias=position_bias, position_bias_sd=position_bias_sd, conversation_sd=conversation_sd,
        noise_sd=noise_sd)


def _choice(rng: np.random.Generator, role: str, side: str, left: float, right: float, *, noise_sd: float,
            bias: float) -> str:
    if role == "random":
        return "left" if rng.integers(2) else "right"
    if role == "straight":
        return side
    difference = left + bias - right + rng.normal(0.0, noise_sd) - rng.normal(0.0, noise_sd)
    better = "left" if difference > 0 else "right"
    if role == "inverted":
        return "right" if better == "left" else "left"
    return better
