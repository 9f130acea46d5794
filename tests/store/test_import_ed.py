"""Importing EmpatheticDialogues: counts, idempotence, and all-or-nothing on bad input."""

import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.cli import cli
from empeval.server.datasets import importer
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.datasets.summary import summarize
from empeval.server.store import make_engine, upgrade
from empeval.server.store.models import Dialogue
from tests.conftest import SAMPLE_ED
from tests.store.helpers import snapshot

HEADER = "conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags\n"


def run(url: str, *args: str):
    return CliRunner().invoke(cli, ["--database-url", url, *args], catch_exceptions=False)


@pytest.fixture
def sample_store(store_url):
    """A store holding the bundled sample's test split: the 'before' state for failure tests."""
    result = run(store_url, "data", "import-ed", str(SAMPLE_ED / "test.csv"), "--split", "test")
    assert result.exit_code == 0, result.output
    engine = make_engine(store_url)
    yield store_url, engine
    engine.dispose()


@pytest.fixture
def before_store(store_url, sample_templates):
    """The same 'before' state for the refusal tests, a copy of the session's store holding the sample's test split
    (tests/conftest.py SampleTemplates, imported by the same importer): what they check is that a refused file
    leaves it exactly as it was, not how it was made, and importing it anew for each of them cost 1-5 s a test.
    The two tests above import it through `empeval data import-ed` themselves."""
    sample_templates.fill(store_url)
    engine = make_engine(store_url)
    yield store_url, engine
    engine.dispose()


def test_sample_import_builds_dialogues_turns_and_one_context_per_listener_turn(sample_store):
    _, engine = sample_store
    [row] = summarize(engine)
    lines = (SAMPLE_ED / "test.csv").read_text().splitlines()[1:]
    listener_lines = [line for line in lines if int(line.split(",")[1]) % 2 == 0]
    assert (row.dialogues, row.turns, row.contexts) == (320, len(lines), len(listener_lines))
    assert row.emotions == 32
    with Session(engine) as s:
        dialogue = s.scalar(select(Dialogue).where(Dialogue.conv_id == "hit:0_conv:0"))
        assert dialogue.emotion == "guilty"
        assert "lane, and didn't see me" in dialogue.situation  # _comma_ decoded
        roles = [t.role for t in dialogue.turns]
        assert roles == ["speaker", "listener", "speaker", "listener", "speaker"]
        contexts = dialogue.contexts
        assert [c.n_turns for c in contexts] == [1, 3]
        assert contexts[1].reference_turn.text == "Why did you feel guilty? People really shouldn't drive drunk."


def test_reimporting_the_same_file_changes_nothing(sample_store):
    url, engine = sample_store
    before = snapshot(engine)
    result = run(url, "data", "import-ed", str(SAMPLE_ED / "test.csv"), "--split", "test")
    assert result.exit_code == 0
    assert "0 dialogues added" in result.output and "320 already present" in result.output
    assert snapshot(engine) == before


def _lines(n: int = 12) -> list[str]:
    return (SAMPLE_ED / "test.csv").read_text(encoding="utf-8").splitlines(keepends=True)[1:n]


MALFORMED = {
    "nine_fields": (lambda lines: lines[:5] + [lines[5].rstrip("\n") + ",extra\n"] + lines[6:], 7, "9 fields"),
    "seven_fields": (lambda lines: lines[:3] + [lines[3].replace(",,", ",", 1)] + lines[4:], 5, "7 fields"),
    "idx_not_integer": (
        lambda lines: lines[:2] + [lines[2].replace(",3,", ",three,", 1)] + lines[3:],
        4,
        "not an integer",
    ),
    "idx_gap": (lambda lines: lines[:2] + lines[3:], 4, "expected 3"),
    "empty_utterance": (
        lambda lines: lines[:8] + [",".join(lines[8].split(",")[:5] + ["", "", "\n"])] + lines[9:],
        10,
        "empty utterance",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_csv_names_the_line_and_leaves_the_database_as_it_was(before_store, tmp_path, case):
    url, engine = before_store
    mutate, bad_line, reason = MALFORMED[case]
    # Fresh conversations (renamed ids), so a partial import would be visible as new rows.
    good = [line.replace("hit:", "new:", 1) for line in _lines(40)]
    bad = tmp_path / "test.csv"
    bad.write_text(HEADER + "".join(mutate(good)), encoding="utf-8")
    before = snapshot(engine)
    result = run(url, "data", "import-ed", str(bad), "--split", "test")
    assert result.exit_code == 2
    assert f"{bad}:{bad_line}:" in result.output and reason in result.output
    assert snapshot(engine) == before


def test_non_utf8_file_names_the_line(before_store, tmp_path):
    url, engine = before_store
    lines = [line.replace("hit:", "new:", 1) for line in _lines(10)]
    bad = tmp_path / "test.csv"
    bad.write_bytes(
        (HEADER + "".join(lines[:6])).encode()
        + lines[6].encode().replace(b",", b",\xff", 1)
        + "".join(lines[7:]).encode()
    )
    before = snapshot(engine)
    result = run(url, "data", "import-ed", str(bad), "--split", "test")
    assert result.exit_code == 2
    assert f"{bad}:8: not UTF-8" in result.output
    assert snapshot(engine) == before


@pytest.mark.parametrize("content, reason", [("", "empty file"), (HEADER, "no utterances"), ("a,b,c\n", "header is")])
def test_empty_or_headerless_file_is_refused(before_store, tmp_path, content, reason):
    url, engine = before_store
    bad = tmp_path / "test.csv"
    bad.write_text(content)
    before = snapshot(engine)
    result = run(url, "data", "import-ed", str(bad), "--split", "test")
    assert result.exit_code == 2 and reason in result.output
    assert snapshot(engine) == before


def test_unknown_split_is_refused(before_store):
    url, engine = before_store
    result = run(url, "data", "import-ed", str(SAMPLE_ED / "test.csv"), "--split", "dev")
    assert result.exit_code == 2 and "unknown split 'dev'" in result.output


def test_a_changed_conversation_is_a_conflict_and_imports_nothing(before_store, tmp_path):
    url, engine = before_store
    lines = _lines(60)
    changed = [lines[0].replace("Yeah about 10 years ago", "About ten years ago")] + lines[1:]
    extra = [line.replace("hit:", "new:", 1) for line in lines]
    file = tmp_path / "test.csv"
    file.write_text(HEADER + "".join(extra + changed))
    before = snapshot(engine)
    result = run(url, "data", "import-ed", str(file), "--split", "test")
    assert result.exit_code == 3
    assert "hit:0_conv:0 is already stored" in result.output
    assert snapshot(engine) == before


def test_failure_after_rows_were_written_rolls_the_whole_import_back(store_url, monkeypatch):
    """The transaction, not only up-front validation, keeps the store whole."""
    engine = make_engine(store_url)
    upgrade(engine)
    before = snapshot(engine)
    monkeypatch.setattr(importer, "BATCH", 50)
    dialogues = parse_ed_csv(SAMPLE_ED / "test.csv", "test")
    written = []

    def interrupt(n):
        written.append(n)
        if sum(written) >= 150:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        import_dialogues(engine, dialogues, dataset="ed", progress=interrupt)
    assert sum(written) >= 150  # three batches had been inserted before the interruption
    assert snapshot(engine) == before
    engine.dispose()


def test_directory_import_needs_every_split_file(tmp_path, sqlite_url):
    (tmp_path / "test.csv").write_text((SAMPLE_ED / "test.csv").read_text())
    result = run(sqlite_url, "data", "import-ed", str(tmp_path))
    assert result.exit_code == 2 and "train.csv: missing" in result.output


@pytest.mark.full_data
def test_full_ed_import_reproduces_the_published_split_sizes(full_ed, sqlite_url):
    result = run(sqlite_url, "data", "import-ed", str(full_ed), "--split", "all")
    assert result.exit_code == 0, result.output
    engine = make_engine(sqlite_url)
    rows = {r.split: r for r in summarize(engine)}
    assert {s: rows[s].dialogues for s in rows} == {"train": 19_533, "valid": 2_770, "test": 2_547}
    assert {s: rows[s].turns for s in rows} == {"train": 84_169, "valid": 12_078, "test": 10_973}
    assert rows["test"].contexts == 5_259
    assert all(r.emotions == 32 for r in rows.values())
    engine.dispose()
