"""`empeval crowd ...`: launch, follow, ingest, stop and review crowd runs of a study through Mephisto.

The runner lives in the crowd virtualenv (.venv-crowd, `make crowd`); these commands talk to it through the
job directory, whose files tasks/crowd/contract.py defines.
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import click

from empeval.cli.common import (
    EXIT_BAD_INPUT,
    CliContext,
    FiniteRange,
    checked_base_url,
    count,
    fail,
    invite_base_url,
    pass_cli,
    share,
)

# The crowd's modules are imported by the commands that use them, not to read a command line: their package
# (empeval.tasks) registers every study kind, with the store's models (tests/test_cli_startup.py).

EXIT_RUN_FAILED = 1
# tasks.crowd.contract's PROVIDERS (the platforms Mephisto runs a study on), repeated so that reading the command
# line imports none of the above; tests/test_cli_startup.py holds them equal.
PROVIDERS = ("mock", "mturk_sandbox", "mturk")
JOB_HELP = ("A job id (default: the study's current job, its newest live one, else the newest that went live; a "
            "failed launch never is).")


def _job(study: str, job_id: str | None) -> Path:
    from empeval.tasks.crowd import jobs

    return jobs.job_dir_for(study, job_id)


def _recover_and_ingest(obj: CliContext, job_dir: Path) -> None:
    """Ingest results.jsonl; when the runner is not live, first let Mephisto's database fill any gap a crash
    left in results.jsonl. Every rejected line is listed, and then the command fails (exit 2)."""
    from empeval.tasks.crowd import jobs
    from empeval.tasks.crowd.ingest import ingest as ingest_results

    if not jobs.read_status(job_dir).live:
        done = jobs.run_in_crowd_env("collect", str(job_dir))
        if done.returncode != 0:
            click.secho(f"warning: could not check Mephisto's database for missed units: {done.stderr.strip()[-500:]}",
                        fg="yellow", err=True)
        elif (recovered := json.loads(done.stdout.strip().splitlines()[-1]).get("added")):
            click.echo(f"recovered {recovered} submitted units missing from results.jsonl")
    job = jobs.load_job(job_dir)
    report = ingest_results(obj.engine(), job_dir)
    click.echo(f"{job.study} / {job_dir.name}: {report.describe()}")
    for problem in report.problems:
        click.secho(f"  {problem}", fg="yellow")
    if report.rejected:
        raise jobs.CrowdError(f"{report.rejected} of {report.lines} result lines were rejected (listed above); the "
                              f"others are stored")


@click.group()
def crowd() -> None:
    """Run a study on a crowd platform through Mephisto (mock, mturk_sandbox, mturk)."""


@crowd.command()
@click.argument("study")
@click.option("--provider", type=click.Choice(PROVIDERS), default="mock", show_default=True)
@click.option("--units", type=count(), help="Put only the first N open assignments on the crowd.")
@click.option("--reward", type=FiniteRange(0, 10_000),
              help="Reward per unit (default: the study's pay.per_assignment).")
@click.option("--port", type=click.IntRange(1, 65535), default=3000, show_default=True,
              help="Local port of Mephisto's task server (it listens on 127.0.0.1 only).")
@click.option("--public-url", help="MTurk: the public HTTPS URL forwarded to 127.0.0.1:PORT (a tunnel or proxy).")
@click.option("--aws-profile", help="MTurk: the AWS profile written by `empeval crowd register`.")
@click.option("--timeout", "timeout_seconds", type=count(10), default=3600, show_default=True,
              help="Stop the run after this many seconds.")
@click.option("--onboarding/--no-onboarding", default=True, show_default=True,
              help="A short qualification test before the first unit; failing workers are blocked.")
@click.option("--min-control-pass-rate", type=share(), default=0.5, show_default=True,
              help="Work that passes at least this share of its control items is approved automatically.")
@click.option("--live-url", default=None, callback=checked_base_url,
              help="A chat study: where the workers' browsers reach `empeval serve`, which answers their turns "
                   "(HTTPS on MTurk; default: where the latest `empeval serve` of this store listens).")
@click.option("--yes", is_flag=True, help="Do not ask before spending money on live MTurk.")
@click.option("--wait", is_flag=True, help="Stay until the run ends, then ingest its results.")
@pass_cli
def launch(obj: CliContext, study: str, provider: str, units: int | None, reward: float | None, port: int,
           public_url: str | None, aws_profile: str | None, timeout_seconds: int, onboarding: bool,
           min_control_pass_rate: float, live_url: str | None, yes: bool, wait: bool) -> None:
    """Put STUDY's open assignments on the crowd: one Mephisto unit per assignment. A chat study's turns are
    answered by `empeval serve` at --live-url while the run is live."""
    from empeval.tasks.crowd import contract, jobs

    engine = obj.engine()
    _refuse_a_qualification(engine, study)
    jobs.crowd_python()
    job_dir, cost = jobs.create_job(engine, study, provider=provider, units=units, port=port, reward=reward,
                                    timeout_seconds=timeout_seconds, public_url=public_url, aws_profile=aws_profile,
                                    onboarding=onboarding, min_control_pass_rate=min_control_pass_rate,
                                    live_url=live_url or invite_base_url(engine))
    click.echo(f"cost: {cost.describe(provider)}")
    spend = f"Spend up to {cost.total:.2f} {cost.currency} on live MTurk?"
    if provider == "mturk" and not yes and not click.confirm(spend):
        shutil.rmtree(job_dir)
        raise jobs.CrowdError("not launched")
    started = time.monotonic()
    jobs.start_runner(job_dir)
    status = jobs.wait_for(job_dir, jobs.ENDED | {contract.RUNNING}, timeout=180)
    if status.state != contract.RUNNING:
        jobs.mark_launch_failed(job_dir, f"{status.state}: {status.error}")
        log_tail = (job_dir / "runner.log").read_text(encoding="utf-8", errors="replace")[-3000:]
        fail(f"the run did not start ({status.state}: {status.error}); job {job_dir.name} is kept for its runner.log "
             f"but is not the study's current job; runner.log ends:\n{log_tail}", EXIT_RUN_FAILED)
    click.echo(f"job {job_dir.name}: run {status.run_id} live in {time.monotonic() - started:.1f}s, "
               f"{status.units_total} units")
    if provider == "mock":
        click.echo(f"workers: {status.url}/?worker_id=NAME&assignment_id=1")
    click.echo(f"files: {job_dir}")
    click.echo(f"next: `empeval crowd status {study}`, `empeval crowd ingest {study}`, `empeval crowd review {study}`")
    if wait:
        final = jobs.wait_for(job_dir, jobs.ENDED, timeout=timeout_seconds + 120)
        click.echo(f"run ended: {final.state}")
        _recover_and_ingest(obj, job_dir)


def _refuse_a_qualification(engine, study: str) -> None:
    """A study with a [qualification] is for local and Prolific raters: crowd work is claimed for workers who never
    took it, so it does not go on the crowd (Mephisto onboards its workers itself: --onboarding)."""
    from sqlalchemy.orm import Session

    from empeval.server.store.queries import study_by_name

    with Session(engine) as session:
        gated = study_by_name(session, study).config.qualification is not None
    if gated:
        fail(f"study {study!r} has a [qualification], which is taken by local and Prolific raters only: crowd workers "
             "are onboarded by Mephisto (--onboarding). Create a copy of the study without the section for the crowd",
             EXIT_BAD_INPUT)


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help=JOB_HELP)
def status(study: str, job_id: str | None) -> None:
    """State of a crowd run: run id, URL, units done, state."""
    from empeval.tasks.crowd import contract, jobs

    job_dir = _job(study, job_id)
    current = jobs.read_status(job_dir)
    results = contract.read_results(job_dir / contract.RESULTS_FILE)
    lines = f"{len(results)} lines in results.jsonl"
    if results.problems:
        lines += f", {len(results.problems)} not valid (`crowd ingest` lists them)"
    rows = [("job", job_dir.name)]
    rows += [(key, getattr(current, key)) for key in ("state", "run_id", "url", "units_total", "units_done", "error")
             if getattr(current, key) is not None]
    rows.append(("results", lines))
    if jobs.launch_failed(job_dir):
        rows.append(("launch", "failed: this job never went live and is not the study's current job"))
    width = max(len(key) for key, _ in rows) + 2
    for key, value in rows:
        click.echo(f"{key:<{width}}{value}")


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help=JOB_HELP)
@pass_cli
def ingest(obj: CliContext, study: str, job_id: str | None) -> None:
    """Store a job's results as ratings (idempotent; safe while the run is live)."""
    _recover_and_ingest(obj, _job(study, job_id))


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help=JOB_HELP)
@click.option("--wait", "wait_seconds", type=FiniteRange(0, 86_400), default=60, show_default=True,
              help="Seconds to wait for a clean shutdown before SIGTERM.")
def stop(study: str, job_id: str | None, wait_seconds: float) -> None:
    """Stop a crowd run (units in progress are expired); then run `crowd ingest`."""
    from empeval.tasks.crowd import jobs

    job_dir = _job(study, job_id)
    final = jobs.stop(job_dir, wait=wait_seconds)
    click.echo(f"job {job_dir.name}: {final.state}; next: `empeval crowd ingest {study}`")


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help=JOB_HELP)
@click.option("--auto", is_flag=True, help="Approve pending work that passed its controls; list the rest.")
@click.option("--approve", "approve_units", multiple=True, metavar="UNIT", help="Approve this unit's work.")
@click.option("--reject", "reject_units", multiple=True, metavar="UNIT",
              help="Reject this unit's work (needs --reason).")
@click.option("--bonus", "bonus_units", multiple=True, metavar="UNIT",
              help="Pay a bonus for this unit (needs --amount, --reason).")
@click.option("--block", "block_units", multiple=True, metavar="UNIT",
              help="Block this unit's worker (needs --reason).")
@click.option("--reason", help="What the worker is told (rejections, bonuses, blocks).")
@click.option("--amount", type=FiniteRange(0, 10_000), help="Bonus amount per unit.")
@click.option("--force", is_flag=True, help="Allow rejecting work that passed its controls.")
@pass_cli
def review(obj: CliContext, study: str, job_id: str | None, auto: bool, approve_units, reject_units, bonus_units,
           block_units, reason: str | None, amount: float | None, force: bool) -> None:
    """List a job's submissions with their control results; approve, reject, bonus or block through Mephisto.

    Without an action: the list. Workers appear under their pseudonym; UNIT is the Mephisto unit id shown."""
    from empeval.server.annotation.annotators import pseudonym_for
    from empeval.server.annotation.secrets import secret_key
    from empeval.tasks.crowd import jobs
    from empeval.tasks.crowd.review import auto_actions, carry_out, check_actions, submissions

    job_dir = _job(study, job_id)
    job = jobs.load_job(job_dir)
    actions = [{"unit_id": u, "action": "approve"} for u in approve_units]
    actions += [{"unit_id": u, "action": "reject", "reason": reason} for u in reject_units]
    actions += [{"unit_id": u, "action": "bonus", "reason": reason, "amount": amount} for u in bonus_units]
    actions += [{"unit_id": u, "action": "block", "reason": reason} for u in block_units]
    held = []
    if auto:
        approve, held = auto_actions(job_dir)
        actions = approve + actions
    if actions:
        check_actions(job_dir, actions, force=force)
        outcomes = carry_out(job_dir, actions)
        for outcome in outcomes:
            verdict = "ok" if outcome.get("ok") else f"FAILED: {outcome.get('error') or outcome.get('message')}"
            extra = f" ({outcome['skipped']})" if outcome.get("skipped") else ""
            click.echo(f"unit {outcome['unit_id']}: {outcome['action']} {verdict}{extra}")
        if any(not o.get("ok") for o in outcomes):
            raise SystemExit(EXIT_RUN_FAILED)
    secret = secret_key(obj.engine())
    rows = submissions(job_dir)
    if not actions or held:
        click.echo(f"{'unit':>6}  {'assignment':>10}  {'worker':<24}{'controls':>9}  decision")
        for s in rows:
            who = pseudonym_for(secret, job.provider, s.worker_name)
            flag = "" if s.passed_controls else "  <- held: failed controls"
            click.echo(f"{s.unit_id:>6}  {s.assignment_id:>10}  {who:<24}{s.controls_passed:>4}/{s.controls_n:<4}  "
                       f"{s.decision}{flag if s.decision == 'pending' else ''}")
    if held:
        click.echo(f"{len(held)} held for review: approve or reject them with --approve UNIT / "
                   f"--reject UNIT --reason TEXT")


@crowd.command()
@click.argument("profile")
def register(profile: str) -> None:
    """Store AWS keys ($AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY) as ~/.aws/credentials profile PROFILE."""
    from empeval.tasks.crowd import jobs

    done = jobs.run_in_crowd_env("register", profile)
    if done.returncode != 0:
        fail((done.stderr or done.stdout).strip()[-1000:], EXIT_BAD_INPUT)
    click.echo(done.stdout.strip())
