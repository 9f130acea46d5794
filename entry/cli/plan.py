"""`empeval plan`: how many contexts and ratings per response a study needs, and what it costs; with
`--pairwise`, how many contexts an A/B study needs for its per-context sign test."""
from __future__ import annotations

import math
from pathlib import Path

import click

from empeval.cli.common import (
    EXIT_BAD_INPUT,
    SEED,
    CliContext,
    FiniteRange,
    WritablePath,
    count,
    fail,
    pass_cli,
    positive,
    share,
)

# pandas, the statistics and the study design (whose package registers every kind, with the store's models) are
# imported when a plan is computed, not to read the command line (tests/test_cli_startup.py).


def _assignments_counter(*, items_per_context: int, items_per_assignment: int, control_rate: float):
    """assignments(contexts, k) as `empeval study create` plans them (control slots counted), or exit 2 when the
    controls would round to zero slots, as study create would."""
    from empeval.tasks.study_create import controls_rounding_to_zero, planned_assignments

    if items_per_assignment < 1:
        raise click.BadParameter("must be at least 1", param_hint="--items-per-assignment")
    if not 0 <= control_rate < 1:
        raise click.BadParameter(f"{control_rate} must lie in [0, 1)", param_hint="--control-rate")
    problem = controls_rounding_to_zero(items_per_assignment=items_per_assignment, control_rate=control_rate,
                                        rate_name="--control-rate", size_name="--items-per-assignment")
    if problem:
        fail(problem, EXIT_BAD_INPUT)

    def assignments(contexts: int, k: int) -> int:
        return planned_assignments(contexts=contexts, items_per_context=items_per_context, repeats=k,
                                   items_per_assignment=items_per_assignment, control_rate=control_rate,
                                   controls=control_rate > 0)

    assignments(1, 1)  # a rate that leaves no real slot fails here, before any simulation
    return assignments


def _slots_line(items_per_assignment: int, control_rate: float, what: str) -> str:
    """How an assignment is filled, as `empeval study create` fills it."""
    from empeval.tasks.design import controls_per_assignment

    n_controls = controls_per_assignment(items_per_assignment, control_rate)
    controls = f"{n_controls} of them control{'' if n_controls == 1 else 's'}"
    return (f"assignments of {items_per_assignment} {what}, {controls} (control rate {control_rate:g}), planned as "
            "`empeval study create` plans them")


def _judge_correlation(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A `--judge-correlation` callback: a correlation strictly between -1 and 1, else a usage error (exit 2)."""
    if value is not None and not -1 < value < 1:
        raise click.BadParameter(f"{value:g} must lie strictly between -1 and 1 (a judge's correlation to the item "
                                 "labels, e.g. 0.7)", ctx=ctx, param=param)
    return value


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r} must be comma-separated whole numbers") from None
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r} must list positive whole numbers")
    return values


@click.command()
@click.argument("study_file", required=False, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--pilot", "pilot_study", default=None,
              help="Estimate the variance components from this study in the store.")
@click.option("--pilot-export", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="... or from an export file (CSV/JSONL). Without either: default components.")
@click.option("--criterion", default="empathy", show_default=True)
@click.option("--effect", type=positive(10), default=0.3, show_default=True,
              help="Difference to detect, in scale points (latent).")
@click.option("--power", "target_power", type=share(open_ends=True), default=0.8, show_default=True)
@click.option("--alpha", type=share(open_ends=True), default=0.05, show_default=True)
@click.option("--ks", default="1,3,5", show_default=True, help="Ratings per response to compare.")
@click.option("--contexts", default="50,100,200,400", show_default=True, help="Numbers of contexts to compare.")
@click.option("--systems", type=count(), default=2, show_default=True, help="Systems in the study (for the cost).")
@click.option("--items-per-assignment", type=count(), default=10, show_default=True,
              help="Items per assignment, controls included (the study file's design.items_per_assignment).")
@click.option("--control-rate", type=share(below_one=True), default=0.1, show_default=True,
              help="Share of each assignment that is a control item (design.control_rate; 0: no controls). The "
                   "assignments and cost count the control slots as `empeval study create` does.")
@click.option("--reward", type=FiniteRange(0, 10_000), default=None, help="Pay per assignment (for the cost).")
@click.option("--fee", type=FiniteRange(0, 10), default=0.2, show_default=True,
              help="Platform fee as a share of the reward (MTurk: 0.2).")
@click.option("--replicates", type=count(), default=400, show_default=True, help="Simulated studies per design.")
@click.option("--plot", type=WritablePath(dir_okay=False, writable=True, path_type=Path), default=Path("plan.png"),
              show_default=True)
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--pairwise", is_flag=True, help="Size a pairwise A/B study instead (exact power of the sign test).")
@click.option("--p-win", type=share(open_ends=True), default=0.65, show_default=True,
              help="With --pairwise: P(the better system wins | not a tie), per judgment.")
@click.option("--tie-rate", type=share(below_one=True), default=0.2, show_default=True,
              help="With --pairwise: share of judgments that are ties.")
@click.option("--context-share", type=share(below_one=True), default=0.24, show_default=True,
              help="With --pairwise: share of the judgments' variance a context's k judgments share (0: independent, "
                   "optimistic for k > 1; 0.24 is what the simulation's default components imply).")
@click.option("--pairs", type=count(), default=1, show_default=True,
              help="With --pairwise: pairs of systems compared (for the cost; --items-per-assignment counts pairs).")
@click.option("--judge-correlation", type=FiniteRange(-1, 1, min_open=True, max_open=True), default=None, metavar="R",
              callback=_judge_correlation,
              help="Plan a model-assisted study instead: the human-rated contexts a judge with correlation R to the "
                   "item labels needs for --half-width on a system mean (PPI++), beside the human-only figure. With "
                   "--pairwise: R is a judge of differences' correlation to a context's net preference, and the plan "
                   "adds the contexts people judge at human shares 0.5 and 0.25.")
@click.option("--half-width", type=positive(10), default=0.1, show_default=True,
              help="With --judge-correlation: the target CI half-width on a system mean, in scale points.")
@click.option("--judge-contexts", type=count(2), default=None,
              help="With --judge-correlation: contexts the judge scores in all (default: as many as needed).")
@click.option("--max-assignments-per-rater", type=count(), default=None,
              help="With STUDY_FILE: assignments one rater may take (default: as many as she can without seeing a "
                   "context twice); sets how many raters to recruit.")
@click.option("--arrivals-per-hour", type=positive(1_000_000), default=10.0, show_default=True,
              help="With STUDY_FILE: new raters arriving an hour, for the expected time to finish.")
@click.option("--minutes-per-assignment", type=positive(10_000), default=None,
              help="With STUDY_FILE: minutes a rater spends on one assignment (default: 25 s an item).")
@click.option("--difference-correlation", type=share(open_ends=True), default=None, metavar="R",
              help="With STUDY_FILE: a judge whose per-context difference between two systems correlates R with the "
                   "people's; prints the paid ratings each model-assisted strategy needs until every pair is decided.")
@click.option("--margin", type=positive(10), default=None,
              help="With --difference-correlation: the equivalence margin in scale points (default: half of --effect).")
@pass_cli
def plan(obj: CliContext, study_file, pilot_study, pilot_export, criterion, effect, target_power, alpha, ks, contexts,
         systems, items_per_assignment, control_rate, reward, fee, replicates, plot, seed, pairwise, p_win, tie_rate,
         context_share, pairs, judge_correlation, half_width, judge_contexts, max_assignments_per_rater,
         arrivals_per_hour, minutes_per_assignment, difference_correlation, margin) -> None:
    """Simulate designs to size a study: power to detect EFFECT on CRITERION, required contexts, cost.

    With STUDY_FILE (a Likert study file): its systems, k, assignment size, pay and currency and platform are
    read from it; power is planned for every pair of its systems at alpha / pairs (Holm's strictest step, as the
    report corrects); it prints the contexts needed, the power of the file's own count, the cost in the file's
    currency, the raters to recruit and the time to finish; with --difference-correlation, the paid ratings of
    each model-assisted strategy.

    Power is that of the report's test (Wilcoxon signed-rank on item means, paired by context), estimated
    by simulating each design REPLICATES times; the analytic power of a paired t-test is shown beside it.

    With --pairwise: the exact power of the A/B report's test (a two-sided sign test over contexts, each
    context counted once for the system with more wins among its k judgments, even contexts left out) for a
    given P-WIN and TIE-RATE, and the contexts it needs, per k judgments of each (context, pair); the k
    judgments of a context share CONTEXT-SHARE of their variance (a Thurstone model; see analysis.stats.power).

    With --judge-correlation R: the human-rated contexts (and ratings) a study needs for a CI of HALF-WIDTH on a
    system mean when an automatic judge with correlation R to the item labels scores every context, beside the
    human-only figure, per k (analysis.stats.ppi.planner; the label SD comes from the variance components).
    """
    if study_file is not None:
        _plan_study_file(obj, study_file, pilot_study=pilot_study, pilot_export=pilot_export, criterion=criterion,
                         effect=effect, target_power=target_power, alpha=alpha, replicates=replicates, seed=seed,
                         max_per_rater=max_assignments_per_rater, arrivals_per_hour=arrivals_per_hour,
                         minutes_per_assignment=minutes_per_assignment,
                         difference_correlation=difference_correlation, margin=margin)
        return
    if pairwise:
        _plan_pairwise(p_win=p_win, tie_rate=tie_rate, context_share=context_share, target_power=target_power,
                       alpha=alpha, ks=_ints(ks), contexts=_ints(contexts), pairs=pairs,
                       pairs_per_assignment=items_per_assignment, control_rate=control_rate, reward=reward, fee=fee,
                       judge_correlation=judge_correlation)
        return
    import pandas as pd

    from empeval.analysis.stats.power import (
        analytic_t_contexts,
        plan_table,
        power_curves_figure,
        required_contexts,
    )

    ks_list, contexts_list = _ints(ks), _ints(contexts)
    if systems < 1:
        raise click.BadParameter("must be at least 1", param_hint="--systems")
    assignments_for = _assignments_counter(items_per_context=systems, items_per_assignment=items_per_assignment,
                                           control_rate=control_rate)
    components, source = _components(obj, pilot_study, pilot_export, criterion)

    _echo_components(components, source, criterion)
    if judge_correlation is not None:
        _plan_with_judge(components, judge_correlation=judge_correlation, half_width=half_width, ks=ks_list,
                         systems=systems, alpha=alpha, judge_contexts=judge_contexts)
        return
    table = plan_table(components, effect=effect, alpha=alpha, ks=ks_list, contexts=contexts_list, systems=systems,
                       items_per_assignment=items_per_assignment, reward=reward, fee=fee, replicates=replicates,
                       seed=seed, assignments=assignments_for)
    click.echo(f"\npower to detect {effect:g} points on {criterion} (alpha {alpha:g}, two-sided), {systems} systems:")
    click.echo(_slots_line(items_per_assignment, control_rate, "items"))
    click.echo(f"{'k':>3}{'contexts':>10}{'ratings':>9}{'power (Wilcoxon, sim.)':>24}{'power (t, analytic)':>21}"
               f"{'assignments':>13}{'cost':>10}")
    for row in table.itertuples():
        cost = "" if row.cost is None or pd.isna(row.cost) else f"{row.cost:.2f}"
        click.echo(f"{row.k:>3}{row.contexts:>10}{row.ratings:>9}{row.power_wilcoxon:>24.3f}{row.power_t_analytic:>21.3f}"
                   f"{row.assignments:>13}{cost:>10}")
    click.echo(f"\ncontexts needed for power {target_power:g}:")
    for k in ks_list:
        needed = required_contexts(components, k=k, effect=effect, alpha=alpha, power=target_power,
                                   replicates=replicates, seed=seed)
        analytic = analytic_t_contexts(components, k=k, effect=effect, alpha=alpha, power=target_power)
        assignments = assignments_for(needed, k)
        cost = f", cost {round(assignments * reward * (1 + fee), 2):.2f}" if reward is not None else ""
        click.echo(f"  k = {k}: {needed} contexts (paired t-test, analytic: {analytic:.0f}); "
                   f"{assignments} assignments{cost}")
    figure = power_curves_figure(components, effect=effect, alpha=alpha, power=target_power, ks=ks_list,
                                 replicates=max(100, replicates // 2), seed=seed)
    plot.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(plot)
    click.echo(f"\nplot: {plot}")


def _components(obj: CliContext, pilot_study: str | None, pilot_export: Path | None, criterion: str):
    """The variance components to plan with (a pilot study in the store, an export, or the defaults) and where they
    came from; exit 2 when the pilot cannot give them."""
    import pandas as pd

    from empeval.analysis.kinds.likert.load import read_export, tidy_from_export
    from empeval.analysis.stats.power import Components, components_from_pilot

    try:
        if pilot_study:
            from empeval.server.annotation.export import export_rows

            ratings = tidy_from_export(pd.DataFrame(export_rows(obj.engine(), pilot_study)))
            return components_from_pilot(ratings, criterion=criterion), f"pilot study {pilot_study!r}"
        if pilot_export:
            return components_from_pilot(read_export(pilot_export), criterion=criterion), f"pilot export {pilot_export}"
    except ValueError as error:  # the pilot cannot give components (too few ratings, one system, ...)
        fail(getattr(error, "message", str(error)), EXIT_BAD_INPUT)
    return Components(), "default components"


def _echo_components(components, source: str, criterion: str) -> None:
    click.echo(f"variance components ({source}, {criterion}): context sd {components.context_sd:.2f}, response sd "
               f"{components.response_sd:.2f}, rater sd {components.rater_sd:.2f}, noise sd {components.noise_sd:.2f}")


def _plan_study_file(obj: CliContext, study_file: Path, *, pilot_study, pilot_export, criterion: str, effect: float,
                     target_power: float, alpha: float, replicates: int, seed: int, max_per_rater: int | None,
                     arrivals_per_hour: float, minutes_per_assignment: float | None,
                     difference_correlation: float | None, margin: float | None) -> None:
    """`plan STUDY_FILE` (empeval.planning): the study file's own numbers, printed line by line."""
    from empeval.planning import PlanRefused, plan_study
    from empeval.tasks.kind_parts import StudyFileError
    from empeval.tasks.study_file import load_study_file

    for name, value, low, high in (("--power", target_power, 0, 1), ("--alpha", alpha, 0, 1)):
        if not low < value < high:
            raise click.BadParameter(f"{value:g} must lie strictly between {low} and {high}", param_hint=name)
    for option, given in (("--effect", effect), ("--arrivals-per-hour", arrivals_per_hour),
                          ("--minutes-per-assignment", minutes_per_assignment), ("--margin", margin)):
        if given is not None and not 0 < given < float("inf"):
            raise click.BadParameter(f"{given:g} must be a positive number", param_hint=option)
    if difference_correlation is not None and not 0 < difference_correlation < 1:
        raise click.BadParameter(f"{difference_correlation:g} must lie strictly between 0 and 1",
                                 param_hint="--difference-correlation")
    try:
        config = load_study_file(study_file)
    except StudyFileError as error:
        fail(str(error), EXIT_BAD_INPUT)
    components, source = _components(obj, pilot_study, pilot_export, criterion)
    _echo_components(components, source, criterion)
    try:
        planned = plan_study(config, components, effect=effect, power=target_power, alpha=alpha,
                             max_per_rater=max_per_rater, arrivals_per_hour=arrivals_per_hour,
                             minutes_per_assignment=minutes_per_assignment, replicates=replicates, seed=seed,
                             difference_correlation=difference_correlation, margin=margin)
    except PlanRefused as error:
        fail(str(error), EXIT_BAD_INPUT)
    except ValueError as error:  # a difference correlation the ratings' own reliability cannot reach
        fail(f"--difference-correlation: {error}", EXIT_BAD_INPUT)
    for line in planned.lines():
        click.echo(line)


def _plan_with_judge(components, *, judge_correlation: float, half_width: float, ks: list[int], systems: int,
                     alpha: float, judge_contexts: int | None) -> None:
    """The model-assisted plan: per k, analysis.stats.ppi.planner.human_ratings_needed with the label SD of the
    components, printed beside the human-only figure."""
    import pandas as pd

    from empeval.analysis.stats.ppi.planner import human_ratings_needed, label_sd_from_components

    if not half_width > 0:
        raise click.BadParameter(f"{half_width} must be positive", param_hint="--half-width")
    if not 0 < alpha < 1:
        raise click.BadParameter(f"{alpha} must lie strictly between 0 and 1", param_hint="--alpha")
    pool = "as many contexts as needed" if judge_contexts is None else f"{judge_contexts} contexts"
    click.echo(f"\nmodel-assisted (PPI++): a judge with correlation {judge_correlation:g} to the item labels scores "
               f"{pool}; contexts people must rate for a {1 - alpha:.0%} CI half-width of {half_width:g} on a system "
               f"mean, {systems} systems:")
    click.echo(f"{'k':>3}{'label sd':>10}{'contexts (human only)':>23}{'contexts (with judge)':>23}"
               f"{'ratings (human only)':>22}{'ratings (with judge)':>22}{'saving':>8}")
    notes = []
    for k in ks:
        sd = label_sd_from_components(components, raters_per_item=k)
        row = human_ratings_needed(judge_correlation, half_width=half_width, label_sd=sd, raters_per_item=k,
                                   n_systems=systems, n_contexts=judge_contexts, ci_level=1 - alpha).iloc[0]
        figures = [row.contexts_human_only, row.contexts_with_judge, row.ratings_human_only, row.ratings_with_judge]
        human_only, with_judge, ratings_human, ratings_judge = ("-" if pd.isna(v) else f"{int(v)}" for v in figures)
        saving = "-" if pd.isna(row.saving) else f"{row.saving:.0%}"
        click.echo(f"{k:>3}{sd:>10.3f}{human_only:>23}{with_judge:>23}{ratings_human:>22}{ratings_judge:>22}"
                   f"{saving:>8}")
        if row.note:
            notes.append(f"  k = {k}: {row.note}")
    for note in notes:
        click.echo(note)
    click.echo("The judge's scores narrow the interval only through the PPI correction with the human ratings; "
               "the human-rated contexts must be a uniform random sample.")


def _even_pair_slots(size: int, control_rate: float) -> int:
    """The A/B design needs an even number of real pairs per assignment (see tasks.pairwise_design), as
    `study create` does: the default size grows to the next one that fits, a size given that does not fit is
    refused naming both options."""
    from empeval.tasks.kinds.pairwise_design import pair_slots

    def fits(n: int) -> bool:
        slots = pair_slots(n, control_rate, with_controls=control_rate > 0)
        return slots > 0 and slots % 2 == 0

    if fits(size):
        return size
    given = click.get_current_context().get_parameter_source("items_per_assignment")
    if given is click.core.ParameterSource.DEFAULT:
        return next(n for n in range(size + 1, 201) if fits(n))
    real = pair_slots(size, control_rate, with_controls=control_rate > 0)
    raise click.BadParameter(
        f"{size} items at --control-rate {control_rate:g} leave {real} pair judgments per assignment, an odd "
        "number: the A/B design needs an even one so that each rater sees every pair's two orders equally often "
        "(change --items-per-assignment or --control-rate)", param_hint="--items-per-assignment")


def _plan_pairwise(*, p_win: float, tie_rate: float, context_share: float, target_power: float, alpha: float,
                   ks: list[int], contexts: list[int], pairs: int, pairs_per_assignment: int, control_rate: float,
                   reward: float | None, fee: float, judge_correlation: float | None = None) -> None:
    import pandas as pd

    from empeval.analysis.stats.power import pairwise_plan_table, sign_test_contexts

    if not 0 < p_win < 1:
        raise click.BadParameter(f"{p_win} must lie strictly between 0 and 1", param_hint="--p-win")
    if not 0 <= tie_rate < 1:
        raise click.BadParameter(f"{tie_rate} must lie in [0, 1)", param_hint="--tie-rate")
    if not 0 <= context_share < 1:
        raise click.BadParameter(f"{context_share} must lie in [0, 1)", param_hint="--context-share")
    if pairs < 1 or pairs_per_assignment < 1:
        raise click.BadParameter("--pairs and --items-per-assignment must be at least 1", param_hint="--pairs")
    if not 0 < target_power < 1 or not 0 < alpha < 1:
        raise click.BadParameter("--power and --alpha must lie strictly between 0 and 1", param_hint="--power")
    pairs_per_assignment = _even_pair_slots(pairs_per_assignment, control_rate)
    assignments_for = _assignments_counter(items_per_context=pairs, items_per_assignment=pairs_per_assignment,
                                           control_rate=control_rate)
    table = pairwise_plan_table(p_win=p_win, tie_rate=tie_rate, alpha=alpha, context_share=context_share, ks=ks,
                                contexts=contexts, pairs=pairs, pairs_per_assignment=pairs_per_assignment,
                                reward=reward, fee=fee, assignments=assignments_for)
    click.echo(f"pairwise A/B: P(win | not tie) {p_win:g}, tie rate {tie_rate:g}, context share {context_share:g}, "
               f"{pairs} pair(s); exact power of the two-sided sign test over contexts (net wins per context, even "
               f"contexts left out), alpha {alpha:g}:")
    click.echo(_slots_line(pairs_per_assignment, control_rate, "pairs"))
    click.echo(f"{'k':>3}{'contexts':>10}{'judgments':>11}{'power (exact)':>15}{'assignments':>13}{'cost':>10}")
    for row in table.itertuples():
        cost = "" if row.cost is None or pd.isna(row.cost) else f"{row.cost:.2f}"
        click.echo(f"{row.k:>3}{row.contexts:>10}{row.judgments:>11}{row.power:>15.3f}{row.assignments:>13}{cost:>10}")
    click.echo(f"\ncontexts needed for power {target_power:g} (per pair):")
    for k in ks:
        needed = sign_test_contexts(p_win=p_win, tie_rate=tie_rate, k=k, alpha=alpha, power=target_power,
                                    context_share=context_share)
        assignments = assignments_for(needed, k)
        cost = f", cost {round(assignments * reward * (1 + fee), 2):.2f}" if reward is not None else ""
        click.echo(f"  k = {k}: {needed} contexts; {needed * pairs * k} judgments, {assignments} assignments{cost}")
    if judge_correlation is not None:
        _plan_pairwise_with_judge(p_win=p_win, tie_rate=tie_rate, context_share=context_share,
                                  target_power=target_power, alpha=alpha, ks=ks, pairs=pairs,
                                  judge_correlation=judge_correlation, assignments_for=assignments_for,
                                  reward=reward, fee=fee)


#: The human shares a model-assisted A/B plan prints (design.human_share), beside people judging every context.
PAIRWISE_SHARES = (0.5, 0.25)


def _plan_pairwise_with_judge(*, p_win: float, tie_rate: float, context_share: float, target_power: float,
                              alpha: float, ks: list[int], pairs: int, judge_correlation: float, assignments_for,
                              reward: float | None, fee: float) -> None:
    """The model-assisted A/B plan: the contexts people judge for the z-test of the mean net preference
    (analysis.stats.power.net_preference_contexts), human-only and with a judge of differences at each human share,
    the study's contexts (people's / share) and the paid judgments."""
    from empeval.analysis.stats.power import net_preference_contexts

    click.echo(f"\nmodel-assisted (PPI++ on the mean net preference, as `empeval report --judge` and the decisions "
               f"estimate it): a judge of differences with correlation {judge_correlation:g} to a context's net "
               f"preference compares every context's pairs, people judge a share of them (design.human_share); "
               f"power {target_power:g} for the z-test, alpha {alpha:g}:")
    for k in ks:
        alone = net_preference_contexts(p_win=p_win, tie_rate=tie_rate, k=k, alpha=alpha, power=target_power,
                                        context_share=context_share)
        parts = [f"human-only {alone} contexts, {alone * pairs * k} judgments"]
        for human_share in PAIRWISE_SHARES:
            people = net_preference_contexts(p_win=p_win, tie_rate=tie_rate, k=k, alpha=alpha, power=target_power,
                                             context_share=context_share, judge_correlation=judge_correlation,
                                             human_share=human_share)
            assignments = assignments_for(people, k)
            cost = f", cost {round(assignments * reward * (1 + fee), 2):.2f}" if reward is not None else ""
            parts.append(f"share {human_share:g}: people judge {people} of {math.ceil(people / human_share)} "
                         f"contexts, {people * pairs * k} judgments ({1 - people / alone:.0%} fewer){cost}")
        click.echo(f"  k = {k}: " + "; ".join(parts))
