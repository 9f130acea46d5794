import json

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.cli import cli
from empeval.server.datasets.summary import summarize
from empeval.server.store import make_engine
from empeval.server.store.models import Dialogue
from tests.store.helpers import snapshot

DIALOGUES = [
    {"conv_id": "c1", "split": "test", "emotion": "anxious", "situation": "Job interview tomorrow.",
     "turns": [{"role": "speaker", "text": "I have a job interview tomorrow, and I can't sleep."},
               {"role": "listener", "text": "That sounds stressful. What is the job?"},
               {"role": "speaker", "text": "A nursing position, my first one."},
               {"role": "listener", "text": "You must have worked hard for it."}]},
    {"conv_id": "c2", "turns": [{"role": "listener", "text": "Hi, how was your day?"},
                                {"role": "speaker", "text": "Terrible, honestly."},
                                {"role": "listener", "text": "Oh no, what happened?"}]},
]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def run(url, *args):
    return CliRunner().invoke(cli, ["--database-url", url, *args], catch_exceptions=False)


def test_jsonl_import_makes_a_context_for_every_listener_turn_after_the_first_turn(tmp_path, store_url):
    file = write_jsonl(tmp_path / "mine.jsonl", DIALOGUES)
    result = run(store_url, "data", "import-jsonl", str(file), "--dataset", "mine")
    assert result.exit_code == 0, result.output
    engine = make_engine(store_url)
    [row] = summarize(engine, "mine")
    assert (row.dialogues, row.turns, row.contexts) == (2, 7, 3)
    with Session(engine) as s:
        c2 = s.scalar(select(Dialogue).where(Dialogue.conv_id == "c2"))
        assert c2.split == "test" and c2.emotion is None
        assert [c.n_turns for c in c2.contexts] == [2]  # the opening listener turn has nothing to answer
    assert "2 dialogues added" in result.output
    again = run(store_url, "data", "import-jsonl", str(file), "--dataset", "mine")
    assert "0 dialogues added" in again.output and "2 already present" in again.output
    engine.dispose()


@pytest.mark.parametrize("bad_line, reason", [
    ("{not json", "not valid JSON"),
    ('{"turns": [{"role": "speaker", "text": "x"}]}', "'conv_id' is required"),
    ('{"conv_id": "z", "turns": []}', "'turns' is required"),
    ('{"conv_id": "z", "turns": [{"role": "bot", "text": "x"}]}', "role 'bot'"),
    ('{"conv_id": "z", "split": "dev", "turns": [{"role": "speaker", "text": "x"}]}', "unknown split 'dev'"),
    ('{"conv_id": "c1", "turns": [{"role": "speaker", "text": "x"}]}', "already used on line 1"),
])
def test_bad_jsonl_line_is_named_and_nothing_is_imported(tmp_path, sqlite_url, bad_line, reason):
    file = tmp_path / "mine.jsonl"
    file.write_text(json.dumps(DIALOGUES[0]) + "\n" + json.dumps(DIALOGUES[1]) + "\n" + bad_line + "\n")
    engine = make_engine(sqlite_url)
    run(sqlite_url, "db", "upgrade")
    before = snapshot(engine)
    result = run(sqlite_url, "data", "import-jsonl", str(file), "--dataset", "mine")
    assert result.exit_code == 2
    assert f"{file}:3: " in result.output and reason in result.output
    assert snapshot(engine) == before
    engine.dispose()
