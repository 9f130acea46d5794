"""`empeval judge STUDY --judges llm,length` without the llm judge's API key (issue 30, "your own study"): refused
before any work (no judge built, nothing scored, in any order of the names), naming the judge, the variable and
the exact command that runs the other judges, which then works as printed."""
from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from empeval.server.backend.judges.scores import judge_scores
from empeval.server.store import make_engine
from tests.backend.test_judge_store import judged_store

KEY = "EMPEVAL_JUDGE_API_KEY"  # the bundled systems config's [judges.llm] api_key_env


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY, raising=False)
    judged_store(tmp_path / "cli.db").dispose()
    return f"sqlite:///{tmp_path / 'cli.db'}"


def run(url, *args, env=None):
    return CliRunner().invoke(cli, ["--database-url", url, *args], env=env)


def _scored(url: str, judge: str) -> int:
    """Items and criteria the judge has scored in the pilot study (0 when it has scored none)."""
    from empeval.server.errors import BadInput

    engine = make_engine(url)
    try:
        return len(judge_scores(engine, "pilot", judge))
    except BadInput as error:  # "has scored no item": nothing stored
        assert "has scored no item" in str(error)
        return 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("order", ["llm,length", "length,llm"])
def test_a_missing_key_is_refused_before_any_work_with_the_command_that_runs_the_others(store, order):
    refused = run(store, "judge", "pilot", "--judges", order, "--criteria", "empathy")
    assert refused.exit_code == 2
    assert refused.output == (
        f"error: judge 'llm' reads its API key from the environment variable {KEY}, which is not set, so no judge was "
        f"run. Set it (export {KEY}=...) and run again, or run only the other judge: empeval judge pilot --judges "
        "length --criteria empathy\n")
    assert _scored(store, "length") == 0  # the length judge did not run first
    command = shlex.split(refused.output.rsplit(": ", 1)[1])
    assert command[:2] == ["empeval", "judge"]
    done = run(store, *command[1:])
    assert done.exit_code == 0, done.output
    assert _scored(store, "length") > 0


def test_only_keyed_judges_missing_their_keys_are_refused_without_a_command_to_run_and_an_empty_key_counts(store,
                                                                                                       tmp_path):
    config = tmp_path / "judges.toml"
    config.write_text('[judges.one]\nkind = "http-judge"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
                      'api_key_env = "KEY_ONE"\n\n[judges.two]\nkind = "http-judge"\nbase_url = '
                      '"http://127.0.0.1:9/v1"\nmodel = "m"\napi_key_env = "KEY_TWO"\n', encoding="utf-8")
    refused = run(store, "judge", "pilot", "--judges", "one,two", "--config", str(config),
                  env={"KEY_ONE": "  ", "KEY_TWO": ""})
    assert refused.exit_code == 2
    assert ("judges 'one', 'two' read their API keys from the environment variable(s) KEY_ONE, KEY_TWO, which are "
            "not set, so no judge was run. Set them (export KEY_ONE=...; export KEY_TWO=...) and run again.\n"
            ) in refused.output
    assert "run only the other" not in refused.output
