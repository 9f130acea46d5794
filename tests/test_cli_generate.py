"""`empeval generate` on a store without the contexts it is asked to answer exits 2 with the exact import
command to run, and writes nothing (not even the system's row); the command it names then makes generate work.
Real SQLite files, the real CLI."""
from __future__ import annotations

import json
import re

from click.testing import CliRunner
from sqlalchemy import func, select

from empeval.cli import cli
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, unit_of_work, upgrade
from empeval.server.store.models import Response, System
from tests.conftest import SAMPLE_ED, sample_store_copy


def empeval(url: str, *args: str):
    return CliRunner().invoke(cli, ["--database-url", url, *args])


def rows(url: str, model) -> int:
    engine = make_engine(url)
    try:
        with unit_of_work(engine) as session:
            return session.scalar(select(func.count()).select_from(model))
    finally:
        engine.dispose()


def named_commands(output: str) -> list[str]:
    return re.findall(r"`(empeval data [^`]+)`", " ".join(output.split()))


def test_generate_on_an_empty_store_exits_2_with_the_import_command_and_that_command_makes_it_work(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    refused = empeval(url, "generate", "--systems", "gold")
    assert refused.exit_code == 2, refused.output
    assert "0 of 0" not in refused.output and "it holds no dialogues at all" in refused.output
    assert rows(url, System) == 0  # refused before the system's row is written
    commands = named_commands(refused.output)
    assert commands[0] == "empeval data import-sample", refused.output
    imported = empeval(url, *commands[0].split()[1:])
    assert imported.exit_code == 0, imported.output
    done = empeval(url, "generate", "--systems", "gold", "--limit", "3")
    assert done.exit_code == 0, done.output
    assert rows(url, Response) == 3


def test_a_dataset_of_ones_own_is_named_with_the_jsonl_import_which_then_works(tmp_path):
    url = f"sqlite:///{tmp_path / 'own.db'}"
    refused = empeval(url, "generate", "--systems", "gold", "--dataset", "my-clinic")
    assert refused.exit_code == 2
    assert named_commands(refused.output) == ["empeval data import-jsonl PATH --dataset my-clinic"]
    dialogues = tmp_path / "dialogues.jsonl"
    dialogues.write_text(json.dumps({"conv_id": "c1", "turns": [{"role": "speaker", "text": "I lost my job."},
                                                                {"role": "listener", "text": "I'm so sorry."}]})
                         + "\n", encoding="utf-8")
    imported = empeval(url, "data", "import-jsonl", str(dialogues), "--dataset", "my-clinic")
    assert imported.exit_code == 0, imported.output
    done = empeval(url, "generate", "--systems", "gold", "--dataset", "my-clinic")
    assert done.exit_code == 0, done.output
    assert rows(url, Response) == 1


def test_a_split_the_store_lacks_is_named_with_the_splits_it_has(tmp_path):
    url = f"sqlite:///{tmp_path / 'test-only.db'}"
    engine = sample_store_copy(url)
    engine.dispose()
    refused = empeval(url, "generate", "--systems", "gold", "--split", "valid")
    message = " ".join(refused.output.split())
    assert refused.exit_code == 2
    assert "dataset 'empatheticdialogues' has no valid contexts (contexts per split: test:" in message
    assert "`empeval data import-ed PATH --split valid`" in message and "another --split" in message
    assert rows(url, System) == 0


def test_an_unknown_system_is_still_reported_first_on_an_empty_store(tmp_path):
    refused = empeval(f"sqlite:///{tmp_path / 'e.db'}", "generate", "--systems", "nope")
    assert refused.exit_code == 2 and "unknown system(s) nope" in refused.output


def test_an_untrained_system_named_after_others_is_refused_before_any_of_them_generates(tmp_path):
    """`generate --systems gold,retrieval-ft` with no fine-tuned checkpoint in the cache: exit 2 naming the train
    command, and nothing generated for gold, named first (it used to generate the systems before the untrained one,
    minutes of work for retrieval, and only then refuse)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    engine = make_engine(url)
    upgrade(engine)
    import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", split="test"), dataset="empatheticdialogues")
    engine.dispose()
    refused = empeval(url, "generate", "--systems", "gold,retrieval-ft", "--cache-dir", str(tmp_path / "cache"))
    assert refused.exit_code == 2, refused.output
    assert "retrieval-ft" in refused.output and "empeval train retrieval" in refused.output
    assert rows(url, Response) == 0 and rows(url, System) == 0
