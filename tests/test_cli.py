"""The command line: --help everywhere, and exit codes that mean something."""
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from empeval.cli import cli


def all_commands(group: click.Group, prefix=()):
    for name in group.list_commands(click.Context(group)):
        command = group.get_command(click.Context(group), name)
        yield (*prefix, name)
        if isinstance(command, click.Group):
            yield from all_commands(command, (*prefix, name))


@pytest.mark.parametrize("path", [(), *all_commands(cli)], ids=lambda p: " ".join(p) or "empeval")
def test_every_command_has_help(path):
    result = CliRunner().invoke(cli, [*path, "--help"])
    assert result.exit_code == 0
    assert "Usage:" in result.output and len(result.output.splitlines()) > 3


def test_unknown_command_exits_2():
    assert CliRunner().invoke(cli, ["frobnicate"]).exit_code == 2


def test_console_script_is_installed_and_db_upgrade_reports_the_revision(tmp_path):
    from empeval.server.store.migrate import head_revision

    url = f"sqlite:///{tmp_path / 'x.db'}"
    done = subprocess.run([sys.executable, "-m", "empeval.cli", "--database-url", url, "db", "upgrade"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"revision {head_revision()}" in done.stdout
