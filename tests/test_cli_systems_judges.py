"""`empeval systems` lists the configured judges after the systems, with their kind and parameters (headers,
which may carry credentials, left out), says when a config has none, and refuses a judge of an unknown kind
naming the kinds (exit 2)."""
from __future__ import annotations

from click.testing import CliRunner

from empeval.cli import cli


def run(*args: str):
    return CliRunner().invoke(cli, ["systems", *args])


def judge_lines(output: str) -> dict[str, list[str]]:
    """The rows under the `judge` header, by name: [kind, parameters]."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("judge "))
    return {line.split()[0]: [line.split()[1], " ".join(line.split()[2:])] for line in lines[start + 1:] if line}


def test_the_built_in_config_lists_its_three_judges_with_their_kinds():
    result = run()
    assert result.exit_code == 0, result.output
    judges = judge_lines(result.output)
    assert {name: row[0] for name, row in judges.items()} == {
        "length": "length-judge", "learned": "learned-judge", "llm": "http-judge"}
    assert "'n_folds': 5" in judges["learned"][1]
    assert "'api_key_env': 'EMPEVAL_JUDGE_API_KEY'" in judges["llm"][1]
    # The systems come first, under their own header.
    assert result.output.index("gold") < result.output.index("\njudge ")


def test_a_judges_headers_are_not_printed(tmp_path):
    config = tmp_path / "systems.toml"
    config.write_text('[systems.gold]\nkind = "gold"\n\n[judges.remote]\nkind = "http-judge"\n'
                      'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
                      'headers = { Authorization = "Bearer s3cret" }\n',
                      encoding="utf-8")
    result = run("--config", str(config))
    assert result.exit_code == 0, result.output
    assert judge_lines(result.output)["remote"][0] == "http-judge"
    assert "s3cret" not in result.output and "headers" not in result.output


def test_a_config_without_judges_says_so(tmp_path):
    config = tmp_path / "systems.toml"
    config.write_text('[systems.gold]\nkind = "gold"\n', encoding="utf-8")
    result = run("--config", str(config))
    assert result.exit_code == 0, result.output
    assert "judges: none configured" in result.output and "\njudge " not in result.output


def test_a_judge_of_an_unknown_kind_exits_2_naming_the_kinds(tmp_path):
    config = tmp_path / "systems.toml"
    config.write_text('[systems.gold]\nkind = "gold"\n\n[judges.oracle]\nkind = "telepathy"\n', encoding="utf-8")
    result = run("--config", str(config))
    assert result.exit_code == 2
    assert "judge 'oracle' needs a `kind`, one of http-judge, learned-judge, length-judge" in result.output
