"""`empeval crowd ...`: launch, follow, ingest, stop and review crowd runs of a study through Mephisto.

The runner lives in the crowd virtualenv (.venv-crowd, `make crowd`); these commands talk to it through the
job directory (see tasks/likert/runner.py for the contract).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import click

from entry.cli.common import EXIT_BAD_INPUT, CliContext, fail, pass_cli
from server.annotation.annotators import pseudonym_for
from server.annotation.secrets import secret_key
from tasks.crowd import jobs
from tasks.crowd.ingest import ingest as ingest_results
from tasks.crowd.review import auto_actions, carry_out, check_actions, submissions

EXIT_RUN_FAILED = 1


def _job(study: str, job_id: str | None) -> Path:
    return jobs.job_dir_for(study, job_id)


def _recover_and_ingest(obj: CliContext, job_dir: Path) -> None:
    """Ingest results.jsonl; when the runner is not live, first let Mephisto's database fill any gap a crash
    left in results.jsonl."""
    status = jobs.read_status(job_dir)
    if status.get("state") not in ("starting", "running"):
        done = jobs.run_in_crowd_env("collect", str(job_dir))
        if done.returncode != 0:
            click.secho(f"warning: could not check Mephisto's database for missed units: {done.stderr.strip()[-500:]}",
                        fg="yellow", err=True)
        elif (recovered := json.loads(done.stdout.strip().splitlines()[-1]).get("added")):
            click.echo(f"recovered {recovered} submitted units missing from results.jsonl")
    job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    report = ingest_results(obj.engine(), job_dir, job["provider"])
    click.echo(f"{job['study']} / {job_dir.name}: {report.describe()}")
    for problem in report.problems:
        click.secho(f"  {problem}", fg="yellow")


@click.group()
def crowd() -> None:
    """Run a study on a crowd platform through Mephisto (mock, mturk_sandbox, mturk)."""


@crowd.command()
@click.argument("study")
@click.option("--provider", type=click.Choice(jobs.PROVIDERS), default="mock", show_default=True)
@click.option("--units", type=click.IntRange(min=1), help="Put only the first N open assignments on the crowd.")
@click.option("--reward", type=click.FloatRange(min=0), help="Reward per unit (default: the study's pay.per_assignment).")
@click.option("--port", type=click.IntRange(1, 65535), default=3000, show_default=True,
              help="Local port of Mephisto's task server (it listens on 127.0.0.1 only).")
@click.option("--public-url", help="MTurk: the public HTTPS URL forwarded to 127.0.0.1:PORT (a tunnel or proxy).")
@click.option("--aws-profile", help="MTurk: the AWS profile written by `empeval crowd register`.")
@click.option("--timeout", "timeout_seconds", type=click.IntRange(min=10), default=3600, show_default=True,
              help="Stop the run after this many seconds.")
@click.option("--onboarding/--no-onboarding", default=True, show_default=True,
              help="A short qualification test before the first unit; failing workers are blocked.")
@click.option("--min-control-pass-rate", type=click.FloatRange(0, 1), default=0.5, show_default=True,
              help="Work that passes at least this share of its control items is approved automatically.")
@click.option("--yes", is_flag=True, help="Do not ask before spending money on live MTurk.")
@click.option("--wait", is_flag=True, help="Stay until the run ends, then ingest its results.")
@pass_cli
def launch(obj: CliContext, study: str, provider: str, units: int | None, reward: float | None, port: int,
           public_url: str | None, aws_profile: str | None, timeout_seconds: int, onboarding: bool,
           min_control_pass_rate: float, yes: bool, wait: bool) -> None:
    """Put STUDY's open assignments on the crowd: one Mephisto unit per assignment."""
    jobs.crowd_python()
    job_dir, cost = jobs.create_job(obj.engine(), study, provider=provider, units=units, port=port, reward=reward,
                                    timeout_seconds=timeout_seconds, public_url=public_url, aws_profile=aws_profile,
                                    onboarding=onboarding, min_control_pass_rate=min_control_pass_rate)
    click.echo(f"cost: {cost.describe(provider)}")
    if provider == "mturk" and not yes and not click.confirm(f"Spend up to {cost.total:.2f} {cost.currency} on live MTurk?"):
        import shutil

        shutil.rmtree(job_dir)
        fail("not launched", EXIT_BAD_INPUT)
    started = time.monotonic()
    jobs.start_runner(job_dir)
    status = jobs.wait_for(job_dir, {"running", "failed", "completed", "stopped", "dead"}, timeout=180)
    if status.get("state") != "running":
        log_tail = (job_dir / "runner.log").read_text(encoding="utf-8", errors="replace")[-3000:]
        fail(f"the run did not start ({status.get('state')}: {status.get('error')}); runner.log ends:\n{log_tail}",
             EXIT_RUN_FAILED)
    click.echo(f"job {job_dir.name}: run {status['run_id']} live in {time.monotonic() - started:.1f}s, "
               f"{status['units_total']} units")
    if provider == "mock":
        click.echo(f"workers: {status['url']}/?worker_id=NAME&assignment_id=1")
    click.echo(f"files: {job_dir}")
    click.echo(f"next: `empeval crowd status {study}`, `empeval crowd ingest {study}`, `empeval crowd review {study}`")
    if wait:
        final = jobs.wait_for(job_dir, {"completed", "stopped", "timeout", "failed", "dead"}, timeout=timeout_seconds + 120)
        click.echo(f"run ended: {final.get('state')}")
        _recover_and_ingest(obj, job_dir)


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help="A job id (default: the study's newest job).")
def status(study: str, job_id: str | None) -> None:
    """State of a crowd run: run id, URL, units done, state."""
    job_dir = _job(study, job_id)
    current = jobs.read_status(job_dir)
    results = len(jobs.read_results(job_dir / "results.jsonl"))
    click.echo(f"job       {job_dir.name}")
    for key in ("state", "run_id", "url", "units_total", "units_done", "error"):
        if current.get(key) is not None:
            click.echo(f"{key:<10}{current[key]}")
    click.echo(f"{'results':<10}{results} lines in results.jsonl")


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help="A job id (default: the study's newest job).")
@pass_cli
def ingest(obj: CliContext, study: str, job_id: str | None) -> None:
    """Store a job's results as ratings (idempotent; safe while the run is live)."""
    _recover_and_ingest(obj, _job(study, job_id))


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help="A job id (default: the study's newest job).")
@click.option("--wait", "wait_seconds", type=float, default=60, show_default=True,
              help="Seconds to wait for a clean shutdown before SIGTERM.")
def stop(study: str, job_id: str | None, wait_seconds: float) -> None:
    """Stop a crowd run (units in progress are expired); then run `crowd ingest`."""
    job_dir = _job(study, job_id)
    final = jobs.stop(job_dir, wait=wait_seconds)
    click.echo(f"job {job_dir.name}: {final.get('state')}; next: `empeval crowd ingest {study}`")


@crowd.command()
@click.argument("study")
@click.option("--job", "job_id", help="A job id (default: the study's newest job).")
@click.option("--auto", is_flag=True, help="Approve pending work that passed its controls; list the rest.")
@click.option("--approve", "approve_units", multiple=True, metavar="UNIT", help="Approve this unit's work.")
@click.option("--reject", "reject_units", multiple=True, metavar="UNIT", help="Reject this unit's work (needs --reason).")
@click.option("--bonus", "bonus_units", multiple=True, metavar="UNIT", help="Pay a bonus for this unit (needs --amount, --reason).")
@click.option("--block", "block_units", multiple=True, metavar="UNIT", help="Block this unit's worker (needs --reason).")
@click.option("--reason", help="What the worker is told (rejections, bonuses, blocks).")
@click.option("--amount", type=click.FloatRange(min=0), help="Bonus amount per unit.")
@click.option("--force", is_flag=True, help="Allow rejecting work that passed its controls.")
@pass_cli
def review(obj: CliContext, study: str, job_id: str | None, auto: bool, approve_units, reject_units, bonus_units,
           block_units, reason: str | None, amount: float | None, force: bool) -> None:
    """List a job's submissions with their control results; approve, reject, bonus or block through Mephisto.

    Without an action: the list. Workers appear under their pseudonym; UNIT is the Mephisto unit id shown."""
    job_dir = _job(study, job_id)
    job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
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
            who = pseudonym_for(secret, job["provider"], s.worker_name)
            flag = "" if s.passed_controls else "  <- held: failed controls"
            click.echo(f"{s.unit_id:>6}  {s.assignment_id:>10}  {who:<24}{s.controls_passed:>4}/{s.controls_n:<4}  "
                       f"{s.decision}{flag if s.decision == 'pending' else ''}")
    if held:
        click.echo(f"{len(held)} held for review: approve or reject them with --approve UNIT / --reject UNIT --reason TEXT")


@crowd.command()
@click.argument("profile")
def register(profile: str) -> None:
    """Store AWS keys ($AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY) as ~/.aws/credentials profile PROFILE."""
    done = jobs.run_in_crowd_env("register", profile)
    if done.returncode != 0:
        fail((done.stderr or done.stdout).strip()[-1000:], EXIT_BAD_INPUT)
    click.echo(done.stdout.strip())
