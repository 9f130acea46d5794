"""`empeval train retrieval` and `empeval train cobert` default to the same torch thread count (issue 30, small
things), chosen by the sentence encoder's rule: EMPEVAL_ENCODER_THREADS, else this machine's measured choice in the
cache folder, else 1; --threads wins. Each command says the count and why before any work (here it then stops on an
empty store), and their --threads help is the same, in a user's words."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.backend.encoder import EncoderSettings, resolve_precision
from empeval.server.backend.encoder_threads import ThreadChoice, write_choice

COMMANDS = ("retrieval", "cobert")


def _threads_line(tmp_path, command: str, *options: str, env: dict[str, str]) -> str:
    result = CliRunner().invoke(cli, ["--database-url", f"sqlite:///{tmp_path / 'store.db'}", "train", command,
                                      *options], env={"EMPEVAL_CACHE_DIR": str(tmp_path / "cache"), **env})
    assert result.exit_code != 0 and "no train contexts" in result.output  # the empty store stops it after the line
    found = re.search(rf"^{command}: (\d+) torch thread\(s\) \((.*)\)$", result.output, re.MULTILINE)
    assert found is not None, result.output
    return f"{found.group(1)} ({found.group(2)})"


@pytest.mark.parametrize("env, stored, expected", [
    ({"EMPEVAL_ENCODER_THREADS": ""}, None, "1 (no thread count measured for this machine yet)"),
    ({"EMPEVAL_ENCODER_THREADS": ""}, 2, "2 (measured for this machine)"),
    ({"EMPEVAL_ENCODER_THREADS": "3"}, 2, "3 (EMPEVAL_ENCODER_THREADS)"),
])
def test_both_training_commands_default_to_the_encoders_thread_count(tmp_path, env, stored, expected):
    if stored is not None:  # the machine's choice, as `empeval generate` keeps it after measuring
        precision = resolve_precision(EncoderSettings().precision)
        write_choice(tmp_path / "cache", precision, ThreadChoice(stored, {1: 10.0, stored: 11.0}))
    assert [_threads_line(tmp_path, command, env=env) for command in COMMANDS] == [expected, expected]
    assert _threads_line(tmp_path, "cobert", "--threads", "4", env=env) == "4 (as given (--threads))"


def test_the_threads_help_is_the_same_for_both_and_names_no_internal_module():
    helps = []
    for command in COMMANDS:
        result = CliRunner().invoke(cli, ["train", command, "--help"], terminal_width=200)
        assert result.exit_code == 0
        block = re.search(r"^\s+--threads (.*?)(?=^\s+-)", result.output, re.MULTILINE | re.DOTALL)
        assert block is not None, result.output
        helps.append(" ".join(block.group(1).split()))
    assert helps[0] == helps[1] and "EMPEVAL_ENCODER_THREADS" in helps[0]
    assert not re.search(r"\b(server|empeval)\.\w|\.py\b|DEFAULT_", helps[0]), helps[0]
