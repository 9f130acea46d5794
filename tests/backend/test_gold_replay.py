"""gold answers with the reference; replay serves published outputs aligned to their ED context."""

from __future__ import annotations

import json

import pytest

from empeval.server.backend.base import ContextTurn, DialogueContext
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.replay import ReplayModel
from empeval.server.backend.replay_align import (
    DERIVED_FILE,
    REPLAY_SYSTEMS,
    align_all,
    normalise,
    sample_context_keys,
)
from empeval.server.store.engine import unit_of_work

RAW = DialogueContext(turns=(ContextTurn("speaker", "I failed my driving test today."),))


def sample_contexts(engine, limit=None):
    with unit_of_work(engine) as session:
        return load_contexts(session, split="test", limit=limit)


def test_gold_is_the_reference_turn(registry, sample_engine):
    contexts = sample_contexts(sample_engine, 50)
    outcomes = registry.get("gold").respond_batch(contexts)
    assert [o.text for o in outcomes] == [c.reference for c in contexts]
    assert outcomes[0].provenance["reference_turn_id"] == contexts[0].reference_turn_id


def test_gold_without_a_stored_reference_is_an_error_not_a_response(registry):
    [outcome] = registry.get("gold").respond_batch([RAW])
    assert not outcome.ok and outcome.text is None and outcome.error_kind == "unsupported"


# EmpDG's published files hold 2,713 of the 5,259 test contexts (one or two per conversation); the others 5,255.
PARTIAL = {"empdg", "emoprepend"}


@pytest.mark.parametrize("system", list(REPLAY_SYSTEMS))
def test_every_replay_system_answers_the_sample_test_contexts_it_has_from_the_shipped_file(
    registry, sample_engine, system
):
    contexts = sample_contexts(sample_engine)
    outcomes = registry.get(system).respond_batch(contexts)
    answered = sum(o.ok for o in outcomes)
    if system in PARTIAL:
        assert 0.4 * len(contexts) < answered < len(contexts)
        assert all(o.error_kind == "unsupported" for o in outcomes if not o.ok)
    else:
        assert answered == len(contexts), [o.error for o in outcomes if not o.ok][:3]
    first = next(o for o in outcomes if o.ok)
    assert first.provenance["source_repo"] and len(first.provenance["source_commit"]) == 40
    assert first.provenance["kind"] == "replay" and first.provenance["version"] == registry.get(system).version


def test_replayed_moel_output_belongs_to_its_context(registry, sample_engine):
    # hit:0_conv:0, turn 2 follows "Yeah about 10 years ago I had a horrifying experience..."; MoEL's
    # published answer to that context is "i am so sorry to hear that . were you ok ?".
    [context] = [c for c in sample_contexts(sample_engine) if c.key() == "hit:0_conv:0#1"]
    [outcome] = registry.get("moel").respond_batch([context])
    assert outcome.text == "i am so sorry to hear that . were you ok ?"


def test_replay_has_no_answer_for_a_context_outside_the_test_set(registry):
    [outcome] = registry.get("moel").respond_batch([RAW])
    assert not outcome.ok and "no aligned published output" in outcome.error


def test_shipped_replay_file_is_small_attributed_and_covers_only_the_sample():
    assert DERIVED_FILE.stat().st_size < 1_000_000
    payload = json.loads(DERIVED_FILE.read_text())
    assert "CC BY-NC 4.0" in payload["attribution"]["data"]
    assert set(payload["outputs"]) <= sample_context_keys()
    assert {s["repo"] for s in payload["sources"].values()} == {
        "HLTCHKUST/MoEL",
        "declare-lab/MIME",
        "qtli/EmpDG",
        "qtli/KEMP",
    }


def test_normalise_matches_published_tokenisation_to_ed_text():
    assert normalise("I don't know, it's 100% their fault!") == normalise("i do not know , it is 100 % their fault !")
    assert normalise("they shouldn't_comma_ really") == normalise("they should n't , really")


@pytest.mark.full_data
def test_alignment_on_the_full_test_set_covers_nearly_every_published_record(full_ed):
    aligned, coverages = align_all(full_ed / "model_outputs", full_ed / "test.csv")
    for coverage in coverages:
        assert coverage.aligned + coverage.ambiguous + coverage.unmatched == coverage.records
        assert coverage.aligned / coverage.records > 0.99, coverage
        assert coverage.reference_differs == 0  # every aligned record's Ref is the ED reference
    # The shipped file is exactly what a rebuild from the full files gives for the sample's contexts.
    shipped = json.loads(DERIVED_FILE.read_text())["outputs"]
    keys = sample_context_keys()
    for system, texts in aligned.outputs.items():
        assert {k: v for k, v in texts.items() if k in keys} == {
            k: v[system] for k, v in shipped.items() if system in v
        }


@pytest.mark.full_data
def test_replay_from_the_full_files_answers_full_test_contexts(full_ed, full_resources):
    model = ReplayModel("kemp", {"source": "kemp", "model_outputs": str(full_ed / "model_outputs")}, full_resources)
    with unit_of_work(full_resources.engine) as session:
        contexts = load_contexts(session, split="test")
    outcomes = model.respond_batch(contexts)
    assert len(contexts) == 5259
    assert sum(o.ok for o in outcomes) >= 5240
    assert model.version == ReplayModel("kemp", {"source": "kemp"}, None).version  # same published text, same version


@pytest.mark.full_data
def test_gold_and_controls_on_the_full_test_set(full_resources):
    from empeval.server.backend.registry import Registry

    registry = Registry.from_config(None, full_resources)
    with unit_of_work(full_resources.engine) as session:
        contexts = load_contexts(session, split="test")[::25]
    for name in ("gold", "control-generic", "control-mismatched", "control-scrambled"):
        assert all(o.ok for o in registry.get(name).respond_batch(contexts)), name


@pytest.mark.full_data
def test_cli_replay_align_prints_coverage_per_file(full_ed):
    from click.testing import CliRunner

    from empeval.cli import cli

    result = CliRunner().invoke(cli, ["systems", "replay-align", str(full_ed / "model_outputs"), "--no-write"])
    assert result.exit_code == 0, result.output
    for file in (
        "MoEL_repo/generation_result.txt",
        "MIME_repo/output.txt",
        "EmpDG_repo/EmpDG.txt",
        "EmpDG_repo/EmoPrepend.txt",
        "KEMP_repo/KEMP.txt",
    ):
        assert file in result.output
