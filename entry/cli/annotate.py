"""`empeval annotators ...` (invite, revoke), `empeval serve`, `empeval export`, `empeval admin-token`: running local
studies."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import (
    CliContext,
    FiniteRange,
    WritablePath,
    checked_base_url,
    count,
    invite_base_url,
    pass_cli,
    positive,
    remember_base_url,
    served_base_url,
    write_whole,
)
from empeval.cli.secret import CliContextWithSecret, pass_cli_with_secret

# The store, the app and the exporter are imported inside each command, so that `--help` imports none of them
# (tests/test_cli_startup.py).


@click.group()
def annotators() -> None:
    """Invite local annotators, list who works on a study, revoke annotators, withdraw a participant (forget)."""


@annotators.command("invite")
@click.argument("names", nargs=-1, required=True)
@click.option("--study", required=True, help="The study they will rate.")
@click.option("--days", type=positive(3650), default=30.0, show_default=True, help="Days until the link expires.")
@click.option("--base-url", default=None, callback=checked_base_url,
              help="Where raters reach `empeval serve` (default: where the latest `empeval serve` of this store "
                   "listens, or its --base-url; http://127.0.0.1:5000 before any).")
@pass_cli
def invite_command(obj: CliContext, names: tuple[str, ...], study: str, days: float, base_url: str | None) -> None:
    """Print a signed, expiring invite link for each annotator NAME (created on first invite)."""
    from empeval.server.annotation.annotators import invite

    base_url = base_url or invite_base_url(obj.engine())
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
    from empeval.server.annotation.annotators import revoke

    revocation = revoke(obj.engine(), name, study=study, provider=provider)
    where = f"study {study}" if study else "every study"
    state = "was revoked already" if revocation.already else "revoked"
    click.echo(f"{name} {state} in {where}; {revocation.expired} assignment(s) in progress went back to the pool")


@click.command("admin-token")
@pass_cli
def admin_token_command(obj: CliContext) -> None:
    """Print the admin token: sign in at /admin with it (or open /admin#TOKEN), and send it to the export and
    backend APIs as `Authorization: Bearer TOKEN`."""
    from empeval.server.annotation.secrets import admin_token, secret_key

    click.echo(admin_token(secret_key(obj.engine())))


@click.command()
@click.argument("study")
@click.option("--format", "fmt", type=click.Choice(["csv", "jsonl"]), default="csv", show_default=True)
@click.option("--out", type=WritablePath(dir_okay=False, writable=True, path_type=Path), default=None,
              help="File (default: stdout).")
@click.option("--table", default=None, help="One of the kind's further tables instead of its answers: a chat "
                                            "study's conversations, turns or turn_annotations.")
@pass_cli
def export(obj: CliContext, study: str, fmt: str, out: Path | None, table: str | None) -> None:
    """Export STUDY's answers as its kind's tidy table: a Likert study's ratings one row per rating, an A/B study's
    choices one row per judgment and criterion, a chat study's conversation ratings, ... (the columns are documented
    with each kind's schema, under analysis/kinds/); --table for a chat study's further tables."""
    from empeval.server.annotation.export import export_text
    from empeval.server.annotation.study_log import EXPORT, record_release

    engine = obj.engine()
    text, n_rows, what = export_text(engine, study, fmt, table)
    if out:
        write_whole(out, text)
        click.echo(f"{n_rows} {what} written to {out}", err=True)
    else:
        click.echo(text, nl=False)
    # Logged once written, with whose answers it held: a later withdrawal names this file (study_log).
    record_release(engine, study, EXPORT, where=str(out.resolve()) if out else "standard output")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=click.IntRange(0, 65535), default=5000, show_default=True,
              help="0: any free port (invite links then need --base-url).")
@click.option("--base-url", default=None, callback=checked_base_url,
              help="The public address raters reach this server at (behind a proxy or tunnel); invite links point "
                   "there. Default: http://HOST:PORT.")
@click.option("--workers", type=count(1, 256), default=None,
              help="Server processes. Default: one per CPU core serve may use.")
@click.option("--threads", default=None, type=count(1, 1024),
              help="Threads per process. Default: 8. A thread takes a request "
                   "only once it has arrived whole, so slow clients hold none.")
@click.option("--request-timeout", type=FiniteRange(0, 3600), default=None, metavar="SECONDS",
              help="A request's headers and body must arrive within this many seconds of its first byte, or the "
                   "connection is closed (a client trickling its request). Default: 30; 0: no limit.")
@click.option("--idle-timeout", type=FiniteRange(0, 86400), default=None, metavar="SECONDS",
              help="A connection with no request in progress (idle keep-alive, or one that never sends) is closed "
                   "after this many seconds of silence. Default: 20; 0: never.")
@click.option("--max-per-address", type=count(0, 1_000_000), default=None,
              help="Open connections one client address may hold in each process; more are refused at once. "
                   "Default: 64, and no cap with --proxies (every connection then comes from the proxy); 0: no cap.")
@click.option("--max-connections", type=count(1, 1_000_000), default=None,
              help="Open connections per process; beyond it a process accepts no more until some close. "
                   "Default: 1000.")
@click.option("--proxies", type=count(0, 16), default=0, show_default=True,
              help="Reverse proxies in front that set X-Forwarded-For/-Proto (the client's address for the limit on "
                   "failed token checks; Secure cookies behind HTTPS). Leave 0 without a proxy: clients could "
                   "forge them.")
@click.option("--dev", is_flag=True,
              help="Flask's development server instead: one process, no protection against slow clients; for "
                   "development only.")
@click.option("--gunicorn", is_flag=True,
              help="gunicorn's gthread workers instead (the earlier server, kept for comparison): a client still "
                   "sending holds a thread, so only behind a proxy that buffers whole requests. The timeouts and "
                   "caps above do not apply to it.")
@pass_cli_with_secret
def serve(obj: CliContextWithSecret, host: str, port: int, base_url: str | None, workers: int | None,
          threads: int | None, request_timeout: float | None, idle_timeout: float | None,
          max_per_address: int | None, max_connections: int | None, proxies: int, dev: bool,
          gunicorn: bool) -> None:
    """Run the app: annotation pages, JSON API, admin dashboard. Invite links printed from now on point at it.

    A production server by default: processes that read every request whole before a thread takes it, with
    deadlines for slow and idle clients and a per-address connection cap (README: "Serving for real")."""
    if dev and (gunicorn or workers is not None):
        raise click.UsageError("--dev runs Flask's development server in one process: it takes no --workers or "
                               "--gunicorn")
    from empeval.server.web import create_app
    from empeval.wiring import app_config

    engine = obj.engine()  # migrate the store first
    if base_url or port:  # port 0 is chosen when the server binds: no address to record
        base_url = base_url or served_base_url(host, port)
        remember_base_url(engine, base_url)
        # No token on screen: terminals are scrolled back, shared and logged. The researcher asks for it.
        click.echo(f"admin dashboard: {base_url}/admin (sign in with the token `empeval admin-token` prints)",
                   err=True)
        click.echo(f"invite links (`empeval annotators invite`) now point at {base_url}", err=True)
        if host in ("", "0.0.0.0", "::") and "127.0.0.1" in base_url:
            click.echo("listening on every interface: give --base-url with the address raters reach, or their "
                       "links point at this machine's 127.0.0.1", err=True)
    config = app_config(obj.url, secret_file=obj.secret_file, PROXIES=proxies, BASE_URL=base_url)
    if dev:
        create_app(config).run(host=host, port=port, debug=False, use_reloader=False, threaded=True)
        return
    from empeval.server.web import serving

    processes = workers or serving.default_processes()
    if gunicorn:
        from empeval.server.web.gunicorn_app import run_gunicorn

        run_gunicorn(config, host=host, port=port, workers=processes, threads=threads or serving.DEFAULT_THREADS)
        return
    options = serving.ServeOptions(
        processes=processes, threads=threads or serving.DEFAULT_THREADS, proxies=proxies,
        request_timeout=serving.DEFAULT_REQUEST_TIMEOUT_S if request_timeout is None else request_timeout,
        idle_timeout=serving.DEFAULT_IDLE_TIMEOUT_S if idle_timeout is None else idle_timeout,
        per_address=(0 if proxies else serving.DEFAULT_PER_ADDRESS) if max_per_address is None else max_per_address,
        max_connections=max_connections or serving.DEFAULT_MAX_CONNECTIONS)
    app = create_app(config)  # once, here: a bad configuration stops serve before any process starts
    engine.dispose()  # the processes open their own connections

    def listening(bound_host: str, bound_port: int) -> None:
        click.echo(f"serving on http://{bound_host}:{bound_port}: {options.describe()}", err=True)

    code = serving.run(app, options, host=host, port=port, on_listening=listening)
    if code:
        raise SystemExit(code)
