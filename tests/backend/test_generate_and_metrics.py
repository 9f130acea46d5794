"""`empeval generate` fills the response table resumably; `empeval metrics` prints BLEU; config loading."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from empeval.cli import cli
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.controls import GenericControl
from empeval.server.backend.generate import generate_responses
from empeval.server.backend.metrics import corpus_bleu, moel_tokenise
from empeval.server.backend.registry import ConfigError, Registry, load_config
from empeval.server.backend.resources import BackendResources
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Response, System


def count(engine, model=Response):
    with unit_of_work(engine) as session:
        return session.scalar(select(func.count(model.id)))


def test_generate_is_resumable_and_skips_what_the_same_version_answered(fresh_engine, tmp_path):
    resources = BackendResources(engine=fresh_engine, cache_dir=tmp_path, show_progress=False)
    gold = Registry.from_config(None, resources).get("gold")
    first = generate_responses(fresh_engine, gold, dataset="empatheticdialogues", split="test", limit=30, batch_size=8)
    assert (first.stored, first.skipped) == (30, 0)
    second = generate_responses(fresh_engine, gold, dataset="empatheticdialogues", split="test", limit=50)
    assert (second.stored, second.skipped) == (20, 30)
    assert count(fresh_engine) == 50


def test_generate_answers_only_the_contexts_it_is_given_and_then_the_rest(fresh_engine, tmp_path):
    resources = BackendResources(engine=fresh_engine, cache_dir=tmp_path, show_progress=False)
    gold = Registry.from_config(None, resources).get("gold")
    with unit_of_work(fresh_engine) as session:
        test_ids = [c.context_id for c in load_contexts(session, dataset="empatheticdialogues", split="test")]
        train_id = load_contexts(session, dataset="empatheticdialogues", split="train", limit=1)[0].context_id
    chosen = set(test_ids[5:25:2]) | {train_id}  # a context of another split is not the test split's to answer
    first = generate_responses(fresh_engine, gold, dataset="empatheticdialogues", split="test", context_ids=chosen)
    with unit_of_work(fresh_engine) as session:
        answered = set(session.scalars(select(Response.context_id)))
    assert first.stored == 10 and answered == chosen - {train_id}
    rest = generate_responses(fresh_engine, gold, dataset="empatheticdialogues", split="test")
    assert (rest.stored, rest.skipped) == (len(test_ids) - 10, 10)
    assert generate_responses(fresh_engine, gold, dataset="empatheticdialogues", split="test",
                              context_ids=set()).contexts == 0


def test_a_new_version_is_a_new_system_row_with_its_own_responses(fresh_engine, tmp_path):
    resources = BackendResources(engine=fresh_engine, cache_dir=tmp_path, show_progress=False)
    for seed in (0, 1, 0):
        generate_responses(
            fresh_engine,
            GenericControl("control-generic", {"seed": seed}, resources),
            dataset="empatheticdialogues",
            split="test",
            limit=10,
        )
    with unit_of_work(fresh_engine) as session:
        rows = session.execute(select(System.name, System.version, System.parameters)).all()
    assert len(rows) == 2 and {r.parameters["seed"] for r in rows} == {0, 1}
    assert count(fresh_engine) == 20


def test_provenance_is_stored_with_every_response(fresh_engine, tmp_path):
    resources = BackendResources(engine=fresh_engine, cache_dir=tmp_path, show_progress=False)
    model = Registry.from_config(None, resources).get("moel")
    generate_responses(fresh_engine, model, dataset="empatheticdialogues", split="test", limit=5)
    with unit_of_work(fresh_engine) as session:
        response = session.scalars(select(Response)).first()
        assert response.provenance["system"] == "moel" and response.provenance["version"] == model.version
        assert response.provenance["source_repo"] == "HLTCHKUST/MoEL" and response.latency_ms is not None


def test_cli_generate_then_metrics(tmp_path):
    url = f"sqlite:///{tmp_path}/cli.db"
    runner = CliRunner()
    assert runner.invoke(cli, ["--database-url", url, "data", "import-sample"]).exit_code == 0
    result = runner.invoke(
        cli, ["--database-url", url, "generate", "--systems", "gold,kemp,control-scrambled", "--limit", "40"]
    )
    assert result.exit_code == 0, result.output
    assert "kemp" in result.output and "40 stored" in result.output
    again = runner.invoke(cli, ["--database-url", url, "generate", "--systems", "gold", "--limit", "40"])
    assert "0 stored, 40 already present" in again.output
    metrics = runner.invoke(
        cli, ["--database-url", url, "metrics", "--no-p-at-100", "--systems", "gold,kemp,control-scrambled"]
    )
    assert metrics.exit_code == 0, metrics.output
    gold_line = next(line for line in metrics.output.splitlines() if line.startswith("gold"))
    assert "100.00" in gold_line
    unknown = runner.invoke(cli, ["--database-url", url, "generate", "--systems", "nope"])
    assert unknown.exit_code == 2 and "unknown system" in unknown.output


def test_cli_lists_the_configured_systems():
    result = CliRunner().invoke(cli, ["systems"])
    assert result.exit_code == 0
    for name in ("gold", "moel", "kemp", "retrieval", "retrieval-emoprepend", "control-generic"):
        assert f"\n{name} " in result.output


def test_bleu_of_gold_is_100_and_of_scrambled_words_is_low():
    references = ["I am so sorry to hear that. Did you get hurt?", "That's great news, congratulations!"]
    assert corpus_bleu(references, references, normalised=False) == pytest.approx(100)
    scrambled = ["hurt? that. so Did am get hear I you sorry to", "news, congratulations! great That's"]
    assert corpus_bleu(scrambled, references, normalised=True) < 30


def test_moel_tokenisation_matches_the_published_outputs():
    assert (
        moel_tokenise("Why did you feel guilty? People really shouldn't drive drunk.")
        == "why did you feel guilty ? people really should n't drive drunk ."
    )
    assert moel_tokenise("I don't know_comma_ it's fine") == "i do not know , it is fine"


def test_yaml_config_with_an_http_system(tmp_path):
    config = tmp_path / "systems.yaml"
    config.write_text(
        "systems:\n  my-llm:\n    kind: http\n    protocol: openai\n    url: http://localhost:8000\n"
        "  gold:\n    kind: gold\n"
    )
    specs = load_config(config)
    assert [(s.name, s.kind) for s in specs] == [("my-llm", "http"), ("gold", "gold")]
    assert specs[0].parameters["protocol"] == "openai"


@pytest.mark.parametrize(
    "text, message",
    [
        ("[systems.x]\nkind = 'teleport'\n", "unknown kind"),
        ("[systems.x]\nurl = 'http://x'\n", "needs a `kind`"),
        ("nothing = 1\n", "expected a `systems` table"),
        ("[systems.x\n", "not valid TOML"),
    ],
)
def test_bad_configs_say_what_is_wrong(tmp_path, text, message):
    config = tmp_path / "systems.toml"
    config.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(config)
