"""The PEC-layout persona corpus reader: the hand-made fixture loads whole; each kind of malformed line stops the
load with `file:line: reason` and nothing of the file is returned."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from empeval.server.datasets.persona_jsonl import FIELDS, PersonaFileError, examples_hash, load_persona_jsonl

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "persona_pec.jsonl"
GOOD = {"context": ["My cat is sick."], "context_speakers": ["amy"], "response": "I hope she gets better soon.",
        "response_speaker": "ben", "personas": ["I have a cat too."]}


def test_the_fixture_loads_every_example_with_its_persona():
    examples = load_persona_jsonl(FIXTURE)
    assert len(examples) == 12
    first = examples[0]
    assert first.context == ("I finally finished my first marathon!", "Wow, how long did it take you?")
    assert first.context_speakers == ("ann", "bob") and first.response_speaker == "ann"
    assert first.persona_text == "I run every morning before work. My sister got me into running."
    assert first.source == f"{FIXTURE}:1"
    # A responder without persona sentences is kept, and runs without persona.
    assert examples[5].personas == () and examples[5].persona_text is None


def test_blank_lines_are_skipped_and_line_numbers_count_them(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text("\n" + json.dumps(GOOD) + "\n\n" + json.dumps(GOOD) + "\n", encoding="utf-8")
    assert [e.source for e in load_persona_jsonl(path)] == [f"{path}:2", f"{path}:4"]


def with_field(**changes):
    record = {**GOOD, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not ...})


@pytest.mark.parametrize("bad_line, reason", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "each line must be a JSON object"),
    (with_field(response=...), "missing field 'response'"),
    (with_field(personas=..., context_speakers=...), "missing fields 'context_speakers', 'personas'"),
    (with_field(persona=["typo"]), "unexpected field 'persona'"),
    (with_field(context="My cat is sick."), "'context' must be a list of strings, got str"),
    (with_field(context=[]), "'context' is empty"),
    (with_field(context=["ok", 3], context_speakers=["a", "b"]), "'context' item 2 must be a string, got int"),
    (with_field(context_speakers=["amy", "ben"]), "'context_speakers' has 2 entries for 1 context turns"),
    (with_field(response=""), "'response' is empty"),
    (with_field(response="   "), "'response' is empty"),
    (with_field(response=7), "'response' must be a string, got int"),
    (with_field(response_speaker=None), "'response_speaker' must be a string, got NoneType"),
    (with_field(personas="I have a cat."), "'personas' must be a list of strings, got str"),
    (with_field(personas=["fine", ""]), "'personas' item 2 is empty"),
    (with_field(response="bad\u0000text"), "'response' contains a NUL character"),
])
def test_a_malformed_line_is_named_with_its_reason_and_nothing_is_loaded(tmp_path, bad_line, reason):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD) + "\n" + bad_line + "\n" + json.dumps(GOOD) + "\n",
                    encoding="utf-8")
    with pytest.raises(PersonaFileError) as caught:
        load_persona_jsonl(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:3: ") and reason in message and "nothing was loaded" in message
    assert caught.value.line == 3


def test_the_exact_five_fields_are_pecs():
    assert FIELDS == ("context", "context_speakers", "response", "response_speaker", "personas")


@pytest.mark.parametrize("content, line, reason", [
    (b"", None, "empty file"),
    (b"\n  \n", None, "empty file"),
    (json.dumps(GOOD).encode() + b"\n\xff\xfe\n", 2, "not UTF-8"),
])
def test_empty_and_undecodable_files_are_refused(tmp_path, content, line, reason):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(content)
    with pytest.raises(PersonaFileError) as caught:
        load_persona_jsonl(path)
    assert caught.value.line == line and reason in str(caught.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(PersonaFileError, match="cannot read the file"):
        load_persona_jsonl(tmp_path / "absent.jsonl")


def test_the_hash_follows_the_texts_and_personas_only():
    examples = load_persona_jsonl(FIXTURE)
    assert examples_hash(examples) == examples_hash(list(examples))
    assert examples_hash(examples) != examples_hash(examples[:-1])
