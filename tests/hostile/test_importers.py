"""Every command that writes what a user hands it (`data import-ed`, `data import-jsonl`, `annotators invite`,
`study create`), every class of hostile input: exit 2 with one line naming the file, line or option and the
reason, never a traceback, and the database exactly as it was, on SQLite and on PostgreSQL.

Each case is a valid input with one hostile part, so that the hostile part is what gets refused. Command-line
arguments with an unpaired surrogate ("\\udcff") are what Python makes of an argument with a byte that is not
UTF-8.
"""
from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from empeval.cli import cli
from tests.hostile import corpus
from tests.hostile.conftest import STUDY
from tests.store.helpers import snapshot

ED_HEADER = "conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags"


def ed_csv(*, conv_id: str = "hostile:1", context: str = "sad", prompt: str = "I lost my dog_comma_ Rex.",
           utterance: str = "My dog ran away.") -> str:
    rows = [(conv_id, 1, context, prompt, utterance), (conv_id, 2, context, prompt, "I am so sorry to hear that.")]
    return "\n".join([ED_HEADER, *(f"{c},{i},{e},{p},1,{u},," for c, i, e, p, u in rows)]) + "\n"


def jsonl(**fields) -> str:
    record = {"conv_id": "hostile-1", "split": "test", "emotion": "sad", "situation": "My dog ran away.",
              "turns": [{"role": "speaker", "text": "My dog ran away."},
                        {"role": "listener", "text": "I am so sorry to hear that."}]}
    text = fields.pop("text", None)
    record.update(fields)
    if text is not None:
        record["turns"][0]["text"] = text
    return json.dumps(record) + "\n"  # ensure_ascii: a lone surrogate is written as the escape "\ud800"


def study_toml(*, name: str = "hostile-study", title: str = "t", dataset: str = "empatheticdialogues",
               system: str = "sys-a", selection: str = "count = 4", extra: str = "") -> str:
    # Strings go through json.dumps: a TOML basic string reads JSON's escapes (\u0000) the same way.
    return "\n".join([f"name = {json.dumps(name)}", f"title = {json.dumps(title)}", extra, "[contexts]",
                      f"dataset = {json.dumps(dataset)}", 'split = "test"', selection, "[systems]",
                      f"names = [{json.dumps(system)}, \"sys-b\"]", "[design]", "ratings_per_response = 1",
                      "items_per_assignment = 4", "control_rate = 0.0", ""])


@dataclass(frozen=True)
class Command:
    """A command line; FILE in it is replaced by a file holding `file` (text, or bytes as they are)."""

    args: tuple[str, ...]
    file: str | bytes | None = None
    says: str = ""  # a phrase the error line must contain


def _import_ed(text: str = "", *, dataset: str = "hostile", says: str = "") -> Command:
    return Command(("data", "import-ed", "FILE", "--split", "test", "--dataset", dataset), text or ed_csv(), says)


def _import_jsonl(text: str = "", *, dataset: str = "hostile", license_: str = "", says: str = "") -> Command:
    return Command(("data", "import-jsonl", "FILE", "--dataset", dataset, "--license", license_),
                   text or jsonl(), says)


def _invite(name: str = "new-rater", *, study: str = STUDY, says: str = "") -> Command:
    return Command(("annotators", "invite", name, "--study", study), None, says)


def _study(says: str = "", **fields) -> Command:
    return Command(("study", "create", "FILE"), study_toml(**fields), says)


def cases() -> dict[str, Command]:
    found: dict[str, Command] = {}
    bad_text = {**{f"unpaired surrogate ({k})": v for k, v in corpus.LONE_SURROGATES.items()},
                **{f"NUL ({k})": v for k, v in corpus.NULS.items()}}
    said = {name: "NUL" if "\x00" in value else "unpaired surrogate" for name, value in bad_text.items()}
    # ED CSV: a file is UTF-8 (a surrogate cannot be encoded in it), so NUL and lengths.
    for name, value in corpus.NULS.items():
        for column in ("conv_id", "context", "prompt", "utterance"):
            found[f"import-ed: NUL ({name}) in {column}"] = _import_ed(ed_csv(**{column: value}), says=":2: ")
    found["import-ed: a 5,000-character conv_id"] = _import_ed(ed_csv(conv_id="c" * 5000), says="at most 200")
    found["import-ed: a 60-character emotion"] = _import_ed(ed_csv(context="e" * 60), says="at most 50")
    found["import-ed: a 300-character --dataset"] = _import_ed(dataset="d" * 300, says="at most 100")
    for name, value in bad_text.items():
        found[f"import-ed: {name} in --dataset"] = _import_ed(dataset=value, says=said[name])
    # JSONL: any JSON escape, so surrogates too; nesting; lengths; the options.
    for name, value in bad_text.items():
        for field in ("conv_id", "emotion", "situation", "text"):
            found[f"import-jsonl: {name} in {field}"] = _import_jsonl(jsonl(**{field: value}), says=said[name])
        found[f"import-jsonl: {name} in --dataset"] = _import_jsonl(dataset=value, says=said[name])
        found[f"import-jsonl: {name} in --license"] = _import_jsonl(license_=value, says=said[name])
    found["import-jsonl: a 5,000-character conv_id"] = _import_jsonl(jsonl(conv_id="c" * 5000), says="at most 200")
    found["import-jsonl: a 60-character emotion"] = _import_jsonl(jsonl(emotion="e" * 60), says="at most 50")
    found["import-jsonl: a 300-character --dataset"] = _import_jsonl(dataset="d" * 300, says="at most 100")
    found["import-jsonl: a 300-character --license"] = _import_jsonl(license_="l" * 300, says="at most 100")
    deep = jsonl().rstrip("\n").removesuffix("}") + ', "meta": ' + "[" * 50_000 + "]" * 50_000 + "}\n"
    found["import-jsonl: 50,000 levels in an ignored field"] = _import_jsonl(deep, says="nested too deeply")
    found["import-jsonl: a 5,000-digit number"] = _import_jsonl(jsonl(meta=None).replace("null", "9" * 5000),
                                                                says=":1: ")
    # Annotators: the name (display_name, 100) and the study asked for.
    for name, value in corpus.TOO_LONG.items():
        found[f"annotators invite: a name of {name}"] = _invite("n" + value, says="at most 100")
    for name, value in bad_text.items():
        found[f"annotators invite: {name} in the name"] = _invite(value, says=said[name])
        found[f"annotators invite: {name} in --study"] = _invite(study=value)
    # Study files: the name, every string that is looked up or stored, nesting, bytes.
    found["study create: a 100-character name and a final newline"] = _study(name="s" * 100 + "\n")
    found["study create: a 300-character name"] = _study(name="s" * 300)
    for name, value in corpus.NULS.items():
        for field in ("title", "dataset", "system"):
            found[f"study create: NUL ({name}) in {field}"] = _study(says="NUL", **{field: value})
        found[f"study create: NUL ({name}) in an emotion"] = _study(
            selection=f"count = 4\nemotions = [{json.dumps(value)}]", says="NUL")
        found[f"study create: NUL ({name}) in a context id"] = _study(selection=f"ids = [{json.dumps(value + '#1')}]")
    found["study create: a 5,000-character dataset"] = _study(dataset="d" * 5000)
    found["study create: a 5,000-character context id"] = _study(selection=f'ids = ["{"h" * 5000}#1"]')
    found["study create: an unpaired surrogate escape"] = Command(("study", "create", "FILE"),
                                                                  study_toml(title="\\ud800").replace("\\\\", "\\"))
    found["study create: 5,000 levels of arrays"] = _study(extra="deep = " + "[" * 5000 + "]" * 5000)
    found["study create: bytes that are not UTF-8"] = Command(("study", "create", "FILE"),
                                                              study_toml().encode().replace(b'"t"', b'"\xff"'))
    return found


CASES = cases()


def _run(url: str, command: Command, folder: Path):
    args = list(command.args)
    if command.file is not None:
        file = folder / "input"
        if isinstance(command.file, bytes):
            file.write_bytes(command.file)
        else:
            file.write_text(command.file, encoding="utf-8")
        args = [str(file) if arg == "FILE" else arg for arg in args]
    return CliRunner().invoke(cli, ["--database-url", url, *args])


@pytest.fixture(scope="module")
def store(hostile_store):
    hostile_store.baseline = snapshot(hostile_store.engine)
    return hostile_store


def test_the_valid_inputs_of_the_cases_are_accepted(store, tmp_path):
    """Without the hostile part, each command succeeds: it is the hostile part that the cases refuse."""
    for command in (_import_ed(), _import_jsonl(), _invite(), _study()):
        result = _run(store.url, command, tmp_path)
        assert result.exit_code == 0, (command.args, result.output)
    store.baseline = snapshot(store.engine)  # what they stored is the new "as it was"


@pytest.mark.parametrize("name", CASES)
def test_hostile_input_exits_2_with_one_line_and_changes_nothing(store, tmp_path, name):
    command = CASES[name]
    # A dataset or study name of its own: the valid inputs' test has taken the default ones.
    own = f"hostile-{sorted(CASES).index(name)}"
    file = command.file.replace("hostile-study", own) if isinstance(command.file, str) else command.file
    command = Command(tuple(own if a == "hostile" else a for a in command.args), file, command.says)
    result = _run(store.url, command, tmp_path)
    changed = store.changed_tables()
    raised = "" if result.exc_info is None or isinstance(result.exception, SystemExit) else \
        "".join(traceback.format_exception(*result.exc_info)[-3:])
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.output[-500:]}{raised}"
    lines = result.output.strip().splitlines()
    assert lines and lines[-1].startswith("error: "), result.output[-500:]
    assert "Traceback" not in result.output
    if command.says:
        assert command.says in lines[-1], lines[-1]
    assert not changed, f"the database changed: tables {changed}"
