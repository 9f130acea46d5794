"""`empeval --help` and every command's and subcommand's --help import no heavy library (issue 31, item 7): the root
lists the commands from entry.cli.COMMANDS without importing them, and a command's module imports the store, the
app, the analysis and the models only inside the functions that run. Counted in fresh processes, by the modules
loaded (no timed assertion: benchmarks/cli_startup.py prints the times). Also: the listing's line for each command
is the command's own, and the constants the CLI repeats to stay light equal their sources."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import click
import pytest

from empeval.cli import COMMANDS, JOINED, cli, load_command

# What no --help may import: each costs from a tenth of a second (rich) to seconds (torch, pandas, the store's
# models with SQLAlchemy).
FORBIDDEN = ("torch", "pandas", "numpy", "scipy", "sqlalchemy", "alembic", "flask", "rich", "matplotlib", "sklearn",
             "transformers", "sentence_transformers", "empeval.server.store.models")

# Commands whose modules (entry/cli/annotate.py, prolific.py, db.py) still import the store at module level: being
# made lazy separately. Remove a command from here once its --help is light; every other command is held to it.
PENDING_LAZY: dict[str, str] = {}

# Run in a fresh interpreter: asks the help of the command line argv[1:] (nothing: the root's) and of every
# subcommand below it, in this one process, and prints, per help asked, its exit code and the forbidden modules
# loaded first by it.
HELPS = textwrap.dedent("""
    import contextlib, io, json, sys
    import click
    from empeval.cli import cli

    forbidden = tuple(json.loads(sys.argv[1]))
    path = sys.argv[2:]

    def loaded():  # a module's package is loaded before it: the names themselves say enough
        return {name for name in forbidden if name in sys.modules}

    def ask(path):
        with contextlib.redirect_stdout(io.StringIO()) as shown:
            code = cli.main([*path, "--help"], prog_name="empeval", standalone_mode=False)
        return code, shown.getvalue()

    def paths(group, path):
        context = click.Context(group)
        for name in group.list_commands(context):
            command = group.get_command(context, name)
            yield [*path, name]
            if isinstance(command, click.Group):
                yield from paths(command, [*path, name])

    answers = []
    code, shown = ask(path)
    answers.append({"path": path, "exit": code, "usage": "Usage:" in shown, "forbidden": sorted(loaded())})
    seen = loaded()
    if path:
        below = cli.get_command(click.Context(cli), path[0])
        for sub in (paths(below, path) if isinstance(below, click.Group) else ()):
            code, shown = ask(sub)
            now = loaded()
            answers.append({"path": sub, "exit": code, "usage": "Usage:" in shown, "forbidden": sorted(now - seen)})
            seen = now
    cli_modules = sorted(m for m in sys.modules if m.startswith("empeval.cli"))
    print(json.dumps({"answers": answers, "cli_modules": cli_modules}))
""")


def helps_in_fresh_process(*path: str) -> dict:
    """HELPS run for `empeval PATH --help` and its subcommands' --help, in a new interpreter."""
    done = subprocess.run([sys.executable, "-c", HELPS, json.dumps(FORBIDDEN), *path], capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_root_help_imports_no_command_and_nothing_heavy():
    found = helps_in_fresh_process()
    (answer,) = found["answers"]
    assert answer["exit"] == 0 and answer["usage"]
    assert answer["forbidden"] == []
    # The listing comes from COMMANDS: not one command's module is imported to print it.
    assert set(found["cli_modules"]) <= {"empeval.cli", "empeval.cli.common"}, found["cli_modules"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_commands_help_and_its_subcommands_import_nothing_heavy(name):
    if name in PENDING_LAZY:
        pytest.skip(f"entry/cli/{PENDING_LAZY[name]}.py is not lazy yet (PENDING_LAZY)")
    found = helps_in_fresh_process(name)
    shown = {" ".join(answer["path"]): answer for answer in found["answers"]}
    assert all(answer["exit"] == 0 and answer["usage"] for answer in shown.values()), shown
    heavy = {path: answer["forbidden"] for path, answer in shown.items() if answer["forbidden"]}
    assert heavy == {}, f"`empeval PATH --help` imported (first by that help): {heavy}"
    command = load_command(name)
    expected = {name} | ({f"{name} {sub}" for sub in command.list_commands(click.Context(command))}
                         if isinstance(command, click.Group) else set())
    assert set(shown) >= expected  # every subcommand's help was asked (nested groups' below them too)


def test_the_pending_list_names_real_commands_of_the_modules_it_says():
    for name, module in PENDING_LAZY.items():
        assert COMMANDS[name].module == module, name


# --- the listing cannot drift from the commands ---------------------------------------------------------------

# The longest short help COMMANDS holds: each line there is the command's docstring shortened to it, as click
# would shorten it; `empeval --help` shortens it further to the terminal's width.
SHORT_HELP_LIMIT = 200


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_line_of_a_command_is_its_own_short_help(name):
    command = load_command(name)
    assert COMMANDS[name].short_help == command.get_short_help_str(limit=SHORT_HELP_LIMIT), (
        f"COMMANDS[{name!r}].short_help differs from the command's docstring: copy "
        f"{command.get_short_help_str(limit=SHORT_HELP_LIMIT)!r}")
    assert command.name == name


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_the_lazy_listing_is_the_one_click_prints_for_the_loaded_commands(width):
    eager = click.Group("empeval", commands={name: load_command(name) for name in COMMANDS})
    listings = []
    for group in (cli, eager):
        formatter = click.HelpFormatter(width=width)
        group.format_commands(click.Context(group), formatter)
        listings.append(formatter.getvalue())
    assert listings[0] == listings[1]
    assert all(f"  {name} " in listings[0] for name in COMMANDS)


def test_the_joined_subcommands_are_in_their_groups():
    for group_name, joined in JOINED.items():
        group = load_command(group_name)
        assert isinstance(group, click.Group)
        for module, attribute in joined:
            command = getattr(__import__(f"empeval.cli.{module}", fromlist=[attribute]), attribute)
            assert group.commands[command.name] is command


# --- the constants the CLI repeats to stay light --------------------------------------------------------------

def test_the_repeated_constants_equal_their_sources():
    from empeval.cli import common, crowd, prolific
    from empeval.server.annotation import prolific_client
    from empeval.server.backend.contexts import ED_DATASET as BACKEND_ED_DATASET
    from empeval.server.datasets.sample import ED_DATASET
    from empeval.server.store import storable
    from empeval.tasks.crowd import contract, jobs

    assert common.MAX_INTEGER == storable.MAX_INTEGER
    assert common.MAX_ROW_ID == storable.MAX_ROW_ID
    assert common.ED_DATASET == ED_DATASET == BACKEND_ED_DATASET
    assert crowd.PROVIDERS == contract.PROVIDERS == jobs.PROVIDERS
    assert prolific.API_URL == prolific_client.API_URL


# --- what a server process imports before it answers ------------------------------------------------------------

def test_the_served_app_is_made_without_scipy_or_pandas():
    """`empeval serve` builds the app (empeval.wiring.make_app) before its first answer; scipy.stats alone cost that
    start about 1.5 s of its 4.3 s (the decision looks import analysis.stats.sequential for its Decision type), so
    scipy is imported only where a statistic needs it. pandas, numpy and pyarrow (which pandas loads) cost it
    another 0.35 s or so, and every command that opens a store (`empeval status`, `annotators`) 0.4 s of its 1.6 s:
    they load at the first progress page, decision look or flagged-rater view, never to answer raters."""
    heavy = ('scipy', 'torch', 'sklearn', 'matplotlib', 'pandas', 'numpy', 'pyarrow')
    done = subprocess.run([sys.executable, "-c", "import sys; from empeval.wiring import make_app; "
                           f"print(sorted(m for m in {heavy!r} if m in sys.modules))"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "[]"
