"""The EmpatheticDialogues CSV layout (Rashkin et al., 2019).

Header `conv_id,utterance_idx,context,prompt,speaker_idx,utterance,selfeval,tags`; fields are never
quoted (read as csv.QUOTE_NONE, i.e. split on commas), a comma inside text is written `_comma_`, and every
line has exactly 8 fields. `context` is the emotion label, `prompt` the situation. Odd utterance_idx is
the Speaker (who wrote the situation), even the Listener. A field the store cannot hold (a conv_id longer than
its column, a NUL) is refused on its line, before anything is written.
"""
from __future__ import annotations

from pathlib import Path

from empeval.server.datasets.errors import InputFileError, read_utf8_lines
from empeval.server.datasets.model import ParsedDialogue, ParsedTurn, field_problem

HEADER = ["conv_id", "utterance_idx", "context", "prompt", "speaker_idx", "utterance", "selfeval", "tags"]
SPLITS = ("train", "valid", "test")
# The columns the store keeps, by the dialogue field each becomes and the name a message gives it.
STORED_COLUMNS = (("conv_id", "conv_id", "conv_id"), ("context", "emotion", "context (the emotion)"),
                  ("prompt", "situation", "prompt"), ("utterance", "text", "utterance"))


def decode_text(field: str) -> str:
    return field.replace("_comma_", ",")


def parse_ed_csv(path: Path, split: str) -> list[ParsedDialogue]:
    """All dialogues of one ED split file, in file order. Raises InputFileError on the first bad line."""
    if split not in SPLITS:
        raise InputFileError(path, None, f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
    lines = read_utf8_lines(path)
    if not lines or not any(line.strip() for line in lines):
        raise InputFileError(path, None, "empty file: expected the ED header and at least one utterance")
    header = lines[0].split(",")
    if header != HEADER:
        raise InputFileError(path, 1, f"header is {lines[0]!r}; expected {','.join(HEADER)!r}")

    dialogues: list[ParsedDialogue] = []
    current: dict | None = None

    def close() -> None:
        if current is not None:
            dialogues.append(
                ParsedDialogue(
                    conv_id=current["conv_id"], split=split, emotion=current["emotion"],
                    situation=current["situation"], turns=tuple(current["turns"]),
                    source=f"{path}:{current['line']}",
                )
            )

    seen: set[str] = set()
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split(",")
        if len(fields) != len(HEADER):
            raise InputFileError(path, number, f"{len(fields)} fields, expected {len(HEADER)} "
                                               "(commas inside text must be written _comma_)")
        conv_id, idx_text, emotion, prompt, _speaker_idx, utterance, _selfeval, _tags = fields
        if not conv_id:
            raise InputFileError(path, number, "empty conv_id")
        _check_storable(dict(zip(HEADER, fields, strict=True)), path, number)
        try:
            idx = int(idx_text)
        except ValueError:
            raise InputFileError(path, number, f"utterance_idx {idx_text!r} is not an integer") from None
        if current is None or conv_id != current["conv_id"]:
            close()
            if conv_id in seen:
                raise InputFileError(path, number, f"conversation {conv_id} appears again after other conversations")
            seen.add(conv_id)
            if idx != 1:
                raise InputFileError(path, number, f"conversation {conv_id} starts at utterance_idx {idx}, expected 1")
            current = {"conv_id": conv_id, "emotion": emotion or None, "situation": decode_text(prompt) or None,
                       "turns": [], "line": number}
        else:
            expected = len(current["turns"]) + 1
            if idx != expected:
                raise InputFileError(path, number, f"utterance_idx {idx} in {conv_id}, expected {expected}")
            if (emotion or None) != current["emotion"]:
                raise InputFileError(path, number, f"emotion {emotion!r} differs from {current['emotion']!r} "
                                                   f"earlier in {conv_id}")
        if not utterance.strip():
            raise InputFileError(path, number, "empty utterance")
        role = "speaker" if idx % 2 == 1 else "listener"
        current["turns"].append(ParsedTurn(idx=idx, role=role, text=decode_text(utterance)))
    close()
    if not dialogues:
        raise InputFileError(path, None, "no utterances after the header")
    return dialogues


def _check_storable(row: dict[str, str], path: Path, number: int) -> None:
    for column, field, named in STORED_COLUMNS:
        value = decode_text(row[column]) if column in ("prompt", "utterance") else row[column]
        if problem := field_problem(field, value, named=named):
            raise InputFileError(path, number, problem)


def ed_split_files(path: Path, split: str) -> list[tuple[Path, str]]:
    """The (file, split) pairs to read for `empeval data import-ed PATH --split SPLIT`.

    PATH is either an ED folder (with train.csv, valid.csv, test.csv) or one CSV file.
    """
    path = Path(path)
    valid_choices = (*SPLITS, "all")
    if split not in valid_choices:
        raise InputFileError(path, None, f"unknown split {split!r}; expected one of {', '.join(valid_choices)}")
    if not path.exists():
        raise InputFileError(path, None, "no such file or folder")
    if path.is_file():
        if split == "all":
            stem = path.stem
            if stem not in SPLITS:
                raise InputFileError(path, None,
                                     "cannot tell the split from the file name: pass --split train|valid|test")
            return [(path, stem)]
        return [(path, split)]
    wanted = SPLITS if split == "all" else (split,)
    pairs = []
    for name in wanted:
        file = path / f"{name}.csv"
        if not file.is_file():
            raise InputFileError(file, None, f"missing: the {name} split of ED is expected at this path")
        pairs.append((file, name))
    return pairs
