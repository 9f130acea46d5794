"""`empeval annotators ...` (invite, revoke), `empeval serve`, `empeval export`, `empeval admin-token`: running local
studies."""
from __future__ import annotations

from pathlib import Path

import click

from entry.cli.common import CliContext, pass_cli
from entry.cli.secret import CliContextWithSecret, pass_cli_with_secret
from server.annotation.annotators import invite, revoke
from server.annotation.export import export_rows, rows_to_csv, rows_to_jsonl
from server.annotation.pairwise_export import is_pairwise_study, judgments_to_csv, pairwise_export_rows
from server.annotation.secrets import admin_token, secret_key


@click.group()
def annotators() -> None:
    """Invite local annotators; revoke annotators."""


@annotators.command("invite")
@click.argument("names", nargs=-1, required=True)
@click.option("--study", required=True, help="The study they will rate.")
@click.option("--days", default=30.0, show_default=True, help="Days until the link expires.")
@click.option("--base-url", default="http://127.0.0.1:5000", show_default=True,
              help="Where `empeval serve` is reachable.")
@pass_cli
def invite_command(obj: CliContext, names: tuple[str, ...], study: str, days: float, base_url: str) -> None:
    """Print a signed, expiring invite link for each annotator NAME (created on first invite)."""
    for name in names:
        _, token = invite(obj.engine(), name, study, days=days)
        # The token after '#': browsers never send that part, so it reaches no server or proxy log.
        click.echo(f"{name}\t{base_url.rstrip('/')}/annotate#{token}")


@annotators.command("revoke")
@click.argument("name")
@click.option("--study", default=None, help="Revoke in this study only (default: in every study).")
@click.option("--provider", default="local", show_default=True,
              help="Whose annotator NAME is: local (NAME as invited) or a crowd provider (NAME is the worker id).")
@pass_cli
def revoke_command(obj: CliContext, name: str, study: str | None, provider: str) -> None:
    """Revoke annotator NAME: she gets no new assignment and no submission of hers is accepted (she is told so).
    Her assignment in progress goes back to the pool; ratings she submitted before are kept."""
    revocation = revoke(obj.engine(), name, study=study, provider=provider)
    where = f"study {study}" if study else "every study"
    state = "was revoked already" if revocation.already else "revoked"
    click.echo(f"{name} {state} in {where}; {revocation.expired} assignment(s) in progress went back to the pool")


@click.command("admin-token")
@pass_cli
def admin_token_command(obj: CliContext) -> None:
    """Print the admin token: sign in at /admin with it (or open /admin#TOKEN), and send it to the export and
    backend APIs as `Authorization: Bearer TOKEN`."""
    click.echo(admin_token(secret_key(obj.engine())))


@click.command()
@click.argument("study")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="File (default: stdout).")
@pass_cli
def export(obj: CliContext, study: str, fmt: str, out: Path | None) -> None:
    """Export STUDY's ratings as a tidy long table (one row per rating); a pairwise study's choices as the judgment
    table (one row per judgment and criterion, analysis.pairwise_schema)."""
    if is_pairwise_study(obj.engine(), study):
        rows, what = pairwise_export_rows(obj.engine(), study), "judgments"
        text = judgments_to_csv(rows) if fmt == "csv" else rows_to_jsonl(rows)
    else:
        rows, what = export_rows(obj.engine(), study), "ratings"
        text = rows_to_csv(rows) if fmt == "csv" else rows_to_jsonl(rows)
    if out:
        out.write_text(text, encoding="utf-8")
        click.echo(f"{len(rows)} {what} written to {out}", err=True)
    else:
        click.echo(text, nl=False)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True)
@click.option("--workers", default=0, show_default=True,
              help="gunicorn worker processes for real use; 0 runs Flask's development server.")
@click.option("--proxies", default=0, show_default=True,
              help="Reverse proxies in front that set X-Forwarded-For/-Proto (the client's address for the limit on "
                   "failed token checks; Secure cookies behind HTTPS). Leave 0 without a proxy: clients could "
                   "forge them.")
@pass_cli_with_secret
def serve(obj: CliContextWithSecret, host: str, port: int, workers: int, proxies: int) -> None:
    """Run the app: annotation pages, JSON API, admin dashboard."""
    from entry.wiring import app_config
    from server.web import create_app

    obj.engine()  # migrate the store first
    # No token on screen: terminals are scrolled back, shared and logged. The researcher asks for it.
    click.echo(f"admin dashboard: http://{host}:{port}/admin (sign in with the token `empeval admin-token` prints)",
               err=True)
    config = app_config(obj.url, secret_file=obj.secret_file, PROXIES=proxies)
    if workers <= 0:
        create_app(config).run(host=host, port=port, debug=False, use_reloader=False, threaded=True)
        return
    from server.web.gunicorn_app import run_gunicorn

    run_gunicorn(config, host=host, port=port, workers=workers)
