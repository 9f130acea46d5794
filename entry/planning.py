"""`empeval plan STUDY_FILE`: size a Likert study from its own study file, as its report will test it.

What the file gives: the systems (every pair of them is compared on each criterion, Holm-corrected within the
criterion, as the report does), k ratings per response, the assignment size and control rate, the pay and its
currency, where the raters come from (a platform's fee, none for local raters) and the contexts it plans to rate.
What the researcher adds: the difference to detect (scale points, latent), the power, how many assignments one
rater may take, how fast raters arrive; with a judge's difference correlation, the paid ratings each strategy of
model-assisted evaluation is expected to need (issue 28: analysis.simulate.decisions).

Power is planned at alpha / m for m pairs of systems: the first, strictest step of Holm's procedure, so every pair
with the planned difference is found with at least the stated power whichever step it is tested at (the later
steps only loosen the threshold). The test is the report's (Wilcoxon signed-rank on item means, paired by context),
simulated as analysis.stats.power simulates it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from empeval.analysis.simulate.decisions import (
    ACTIVE_AS_DRAWN,
    RESIDUAL_BURN_IN,
    STRATEGIES,
    DecisionDesign,
    pilot,
    plans_for,
    run_strategy,
    sequence_half_width,
)
from empeval.analysis.simulate.decisions import simulate_pool as simulate_decision_pool
from empeval.analysis.stats.power import Components, analytic_t_contexts, required_contexts, simulated_power
from empeval.analysis.stats.ppi.active_phases import DEFAULT_BURN_IN
from empeval.server.errors import BadInput
from empeval.server.store.kinds.likert import LikertSetup
from empeval.server.store.study_config import StudyConfig
from empeval.tasks.study_create import planned_assignments

#: The plan's name for the two-phase design of `empeval study sample --burn-in` (analysis.simulate.decisions
#: RESIDUAL_BURN_IN: a uniform burn-in, then draws by a residual model fitted on its ratings).
TWO_PHASE = "PPI two phase"
#: Pilot studies that size the two-phase design (its planner's n from their mean squared standard error).
RESIDUAL_PILOT_STUDIES = 20

#: Seconds a rater spends on one item when nothing better is known (the simulated honest rater's typical time,
#: analysis.simulate.likert).
SECONDS_PER_ITEM = 25.0


class PlanRefused(BadInput):
    """A study file this planner cannot size (another kind, one system): the message says what to use instead."""


@dataclass(frozen=True)
class StrategyPlan:
    """Expected paid ratings of one strategy (analysis.simulate.decisions.STRATEGIES): a fixed design's planned n,
    or a sequential one's median over simulated studies."""

    strategy: str
    contexts: float
    paid_ratings: float


@dataclass(frozen=True)
class StudyPlan:
    """What `plan STUDY_FILE` prints: sizes, cost, raters and time for one study file."""

    name: str
    systems: tuple[str, ...]
    criteria: tuple[str, ...]
    k: int
    pairs: int
    alpha: float
    effect: float
    power: float
    contexts_needed: int
    contexts_t: float
    contexts_in_file: int
    power_in_file: float
    assignments: int
    ratings: int
    cost: float | None
    currency: str
    platform: str
    fee: float
    max_per_rater: int
    raters: int
    arrivals_per_hour: float
    minutes_per_assignment: float
    hours: float
    strategies: tuple[StrategyPlan, ...] = field(default=())

    @property
    def pair_alpha(self) -> float:
        return self.alpha / self.pairs if self.pairs else self.alpha

    def lines(self) -> list[str]:
        """The plan as the command prints it."""
        holm = (f"Holm over the {self.pairs} pairs of {len(self.systems)} systems per criterion: planned at alpha "
                f"{self.alpha:g} / {self.pairs} = {self.pair_alpha:.4g} (Holm's strictest step)" if self.pairs > 1
                else f"one pair of systems: alpha {self.alpha:g}")
        fee = "local raters: no platform fee" if self.platform == "local" else (
            f"{self.platform}: platform fee {self.fee:.0%} included")
        cost = (f"cost {self.cost:,.2f} {self.currency} ({fee})" if self.cost is not None
                else "cost unknown: the study file has no pay.per_assignment")
        lines = [
            f"study {self.name}: {len(self.systems)} systems ({', '.join(self.systems)}), criteria "
            f"{', '.join(self.criteria)}, k = {self.k} ratings per response",
            holm,
            f"contexts needed for power {self.power:g} to detect {self.effect:g} points on each pair: "
            f"{self.contexts_needed} (Wilcoxon signed-rank, simulated; paired t analytic {self.contexts_t:.0f})",
            f"the study file rates {self.contexts_in_file} contexts: power {self.power_in_file:.2f} for "
            f"{self.effect:g} points" + ("" if self.contexts_in_file >= self.contexts_needed else
                                          f"; raise contexts.count to {self.contexts_needed}"),
            f"at {self.contexts_needed} contexts: {self.ratings:,} ratings in {self.assignments:,} assignments; {cost}",
            f"raters to recruit: {self.raters} (at most {self.max_per_rater} assignments each; every context needs "
            f"{len(self.systems) * self.k} different raters, since nobody rates a context twice)",
            f"expected time to finish: {self.hours:.1f} h at {self.arrivals_per_hour:g} new raters an hour, "
            f"{self.minutes_per_assignment:.0f} min an assignment",
        ]
        if self.strategies:
            lines.append("paid human ratings until every comparison is decided, per strategy "
                         "(analysis.simulate.decisions; fixed designs: the planner's n, sequential: the median):")
            width = max(len(s.strategy) for s in self.strategies)
            lines += [f"  {s.strategy:<{width}}  {s.paid_ratings:>9,.0f} ratings ({s.contexts:,.0f} contexts)"
                      for s in self.strategies]
            if any(s.strategy == TWO_PHASE for s in self.strategies):
                lines.append(f"  ({TWO_PHASE}: `empeval study sample --burn-in {DEFAULT_BURN_IN:g}`, a uniform burn-in "
                             "then draws by a residual model fitted on its ratings)")
        return lines


def plan_study(config: StudyConfig, components: Components, *, effect: float, power: float = 0.8,
               alpha: float = 0.05, max_per_rater: int | None = None, arrivals_per_hour: float = 10.0,
               minutes_per_assignment: float | None = None, replicates: int = 400, seed: int = 0,
               difference_correlation: float | None = None, margin: float | None = None) -> StudyPlan:
    """Size the Likert study `config` (module docstring). `max_per_rater` None: as many as a rater can take
    without seeing a context twice; `minutes_per_assignment` None: SECONDS_PER_ITEM per item. With
    `difference_correlation`, the strategies' paid ratings for all pairs decided (margin: the equivalence margin,
    default half the effect)."""
    setup = config.setup
    if not isinstance(setup, LikertSetup):
        raise PlanRefused(f"plan STUDY_FILE sizes Likert studies; {config.name!r} is a {config.kind} study (for an A/B "
                          "study use `empeval plan --pairwise` with its numbers)")
    systems = config.systems
    if len(systems) < 2:
        raise PlanRefused(f"{config.name!r} has {len(systems)} system: a plan sizes comparisons of two or more")
    k, n_systems = setup.ratings_per_response, len(systems)
    pairs = n_systems * (n_systems - 1) // 2
    pair_alpha = alpha / pairs
    needed = required_contexts(components, k=k, effect=effect, alpha=pair_alpha, power=power, replicates=replicates,
                               seed=seed)
    analytic = analytic_t_contexts(components, k=k, effect=effect, alpha=pair_alpha, power=power)
    in_file = config.contexts.count or len(config.contexts.ids or ())
    power_in_file = simulated_power(components, n_contexts=max(in_file, 2), k=k, effect=effect, alpha=pair_alpha,
                                    replicates=replicates, seed=seed) if in_file else 0.0
    design = config.design
    controls = design.control_rate > 0 and bool(config.controls)
    assignments = planned_assignments(contexts=needed, items_per_context=n_systems, repeats=k,
                                      items_per_assignment=design.items_per_assignment,
                                      control_rate=design.control_rate, controls=controls)
    # A rater sees each context once, and every item of an assignment shows one (a control item too, a context of
    # the study's): she can take at most contexts // items_per_assignment assignments.
    can_take = max(1, needed // design.items_per_assignment)
    per_rater = can_take if max_per_rater is None else min(max_per_rater, can_take)
    raters = max(n_systems * k, math.ceil(assignments / per_rater))
    minutes = (design.items_per_assignment * SECONDS_PER_ITEM / 60 if minutes_per_assignment is None
               else minutes_per_assignment)
    hours = raters / arrivals_per_hour + per_rater * minutes / 60
    local = config.recruitment.platform == "local"
    cost = config.pay.cost(assignments, fee_rate=0.0 if local else None)
    strategies: tuple[StrategyPlan, ...] = ()
    if difference_correlation is not None:
        strategies = strategy_plans(n_systems=n_systems, k=k, effect=effect, margin=effect / 2 if margin is None
                                    else margin, alpha=alpha, power=power, components=components,
                                    difference_correlation=difference_correlation,
                                    studies=min(replicates, 200), seed=seed)
    return StudyPlan(name=config.name, systems=systems, criteria=config.criterion_keys, k=k, pairs=pairs, alpha=alpha,
                     effect=effect, power=power, contexts_needed=needed, contexts_t=analytic,
                     contexts_in_file=in_file, power_in_file=power_in_file, assignments=assignments,
                     ratings=needed * n_systems * k, cost=cost, currency=config.pay.currency,
                     platform=config.recruitment.platform, fee=0.0 if local else config.pay.platform_fee,
                     max_per_rater=per_rater, raters=raters, arrivals_per_hour=arrivals_per_hour,
                     minutes_per_assignment=minutes, hours=hours, strategies=strategies)


def strategy_plans(*, n_systems: int, k: int, effect: float, margin: float, alpha: float, power: float,
                   components: Components, difference_correlation: float, studies: int = 200,
                   seed: int = 0) -> tuple[StrategyPlan, ...]:
    """Paid ratings per strategy for a study whose systems are `effect` apart in turn (means 0, effect, 2 effect,
    ...: every pair differs by at least the planned difference), its ratings' variance components, and a judge of
    the given difference correlation (analysis.simulate.decisions: fixed designs by its planner, sequential ones
    by the median over `studies` simulated studies)."""
    design = DecisionDesign(system_means=tuple(effect * i for i in range(n_systems)), margin=margin, alpha=alpha,
                            power=power, response_sd=components.response_sd, context_sd=components.context_sd,
                            rater_bias_sd=components.rater_sd, rater_noise_sd=components.noise_sd,
                            raters_per_item=k, difference_correlation=difference_correlation, pool=5000)
    plan = pilot(design, np.random.default_rng([seed, 28]), size=100_000, residual=True,
                 residual_studies=RESIDUAL_PILOT_STUDIES, residual_rules=(RESIDUAL_BURN_IN, ACTIVE_AS_DRAWN))
    plans = plans_for(design, plan)
    # "PPI active" is sized as `study sample` draws it and the report estimates it (Poisson, a weight per stratum of
    # the probability), not by the with-replacement stream with one weight that the sequential design continues.
    plans["PPI active"] = plans[ACTIVE_AS_DRAWN]

    medians = {}
    for strategy in ("human sequential", "PPI active sequential"):
        contexts = []
        for index in range(studies):
            rng = np.random.default_rng([seed, index])
            pool = simulate_decision_pool(replace(design, pool=2000), rng)
            contexts.append(run_strategy(design, strategy, pool, rng, planned=plans[strategy],
                                         human_planned=plans["human fixed"], sequence_half_width=sequence_half_width,
                                         plan=plan).contexts)
        medians[strategy] = float(np.median(contexts))
    per_context = n_systems * k
    ours = [strategy for strategy in STRATEGIES if "," not in strategy]  # empeval's strategies, not the what-ifs
    needed = {strategy: medians.get(strategy, plans[strategy]) for strategy in [*ours, RESIDUAL_BURN_IN]}
    return tuple(StrategyPlan(TWO_PHASE if strategy == RESIDUAL_BURN_IN else strategy, n, n * per_context)
                 for strategy, n in needed.items())
