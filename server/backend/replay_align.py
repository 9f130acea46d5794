"""Aligning published model outputs on the ED test set to ED contexts, and the shipped derived file.

The published files (MoEL, MIME, EmpDG, KEMP repositories; see SOURCES) list, per test context, the
context turns as a Python-list string, the model's output and the reference (`Ref`), in their own order,
lower-cased and tokenised with MoEL's preprocessing (contractions such as "don't" expanded to "do not",
then NLTK tokenisation: "n't" split off, punctuation spaced; `_comma_` decoded to ",").

Alignment: both sides are normalised the same way (`normalise`: lower-case, MoEL's contraction
expansions, then only letters and digits are kept, so tokenisation spaces and quote styles do not
matter) and matched on the whole context (all turns, turn boundaries kept). A published record is
- aligned when its context matches exactly one ED context; when it matches several ED contexts
  (duplicated openings such as "hi"), the Ref text and emotion label are used to pick one: sound, because
  they are the published file's own copy of the ED data, not the model's output; if exactly one candidate
  agrees on both it is aligned, else the record is ambiguous;
- ambiguous also when two published records align to the same ED context (we cannot tell which is right);
- unmatched when no ED context matches.
No alignment is ever guessed: ambiguous and unmatched records are not used.
"""
from __future__ import annotations

import ast
import hashlib
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from empeval.server.datasets.ed_csv import parse_ed_csv

DERIVED_FILE = Path(__file__).resolve().parent.parent / "data" / "replay" / "ed_sample_test_outputs.json"
SAMPLE_TEST_CSV = Path(__file__).resolve().parent.parent / "data" / "ed_sample" / "test.csv"

SOURCES = {
    "MoEL_repo/generation_result.txt": {"repo": "HLTCHKUST/MoEL", "commit": "116a37de98205d0585760070046fb70b5b5f50f9",
                                        "path": "generation_result.txt"},
    "MIME_repo/output.txt": {"repo": "declare-lab/MIME", "commit": "7c34f3ae6dc8f8b9e6fb89b5bfa016fbaa445018",
                             "path": "output.txt"},
    "EmpDG_repo/EmpDG.txt": {"repo": "qtli/EmpDG", "commit": "b3054b1df452305352e2024c9485044e422d6551",
                             "path": "Predictions/EmpDG.txt"},
    "EmpDG_repo/EmoPrepend.txt": {"repo": "qtli/EmpDG", "commit": "b3054b1df452305352e2024c9485044e422d6551",
                                  "path": "Predictions/EmoPrepend.txt"},
    "KEMP_repo/KEMP.txt": {"repo": "qtli/KEMP", "commit": "b9a4fd58fa48556856c83d3d04125422d15e0b36",
                           "path": "result/KEMP/KEMP.txt"},
}

# Replay system name -> (file under model_outputs/, output field, the model's name in the papers).
REPLAY_SYSTEMS = {
    "transformer": ("MoEL_repo/generation_result.txt", "trs", "Transformer"),
    "multi-trs": ("MoEL_repo/generation_result.txt", "trs+multitask", "Multi-TRS"),
    "moel": ("MoEL_repo/generation_result.txt", "MOE", "MoEL"),
    "moel-oracle": ("MoEL_repo/generation_result.txt", "MOE+oracle", "MoEL+oracle"),
    "mime": ("MIME_repo/output.txt", "Greedy", "MIME"),
    "empdg": ("EmpDG_repo/EmpDG.txt", "Pred", "EmpDG"),
    "emoprepend": ("EmpDG_repo/EmoPrepend.txt", "Pred", "EmoPrepend-1"),
    "kemp": ("KEMP_repo/KEMP.txt", "Pred", "KEMP"),
}

ATTRIBUTION = {
    "what": "Published test-set generations of empathetic dialogue models, aligned to EmpatheticDialogues test "
            "contexts (conv_id#n_turns); only the contexts of empeval's bundled ED sample are included.",
    "data": "EmpatheticDialogues, Rashkin, Smith, Li, Boureau, ACL 2019 (facebookresearch/EmpatheticDialogues), "
            "CC BY-NC 4.0: the outputs are derived from ED and inherit that licence (non-commercial use only).",
    "code_licence": "The source repositories are MIT-licensed "
                    "(HLTCHKUST/MoEL, declare-lab/MIME, qtli/EmpDG, qtli/KEMP).",
    "rebuild": "empeval systems replay-align MODEL_OUTPUTS_DIR --ed-test ED_DIR/test.csv",
}

# MoEL's preprocessing (data_reader.clean): these substrings are replaced before tokenising.
MOEL_WORD_PAIRS = {
    "it's": "it is", "don't": "do not", "doesn't": "does not", "didn't": "did not", "you'd": "you would",
    "you're": "you are", "you'll": "you will", "i'm": "i am", "they're": "they are", "that's": "that is",
    "what's": "what is", "couldn't": "could not", "i've": "i have", "we've": "we have", "can't": "cannot",
    "i'd": "i would", "aren't": "are not", "isn't": "is not", "wasn't": "was not", "weren't": "were not",
    "won't": "will not", "there's": "there is", "there're": "there are",
}
_NOT_WORD = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    """Lower-cased, MoEL's contraction expansions applied, then letters and digits only."""
    text = text.replace("_comma_", ",").lower()
    for short, long in MOEL_WORD_PAIRS.items():
        text = text.replace(short, long)
    return _NOT_WORD.sub("", text)


def context_key(turns) -> str:
    return "|".join(normalise(t) for t in turns)


@dataclass
class PublishedRecord:
    index: int  # 0-based position in the file
    emotion: str | None
    context: list[str]
    fields: dict[str, str]


_FIELD = re.compile(r"^([A-Za-z_+]+):\s?(.*)$")


def parse_published(path: Path) -> list[PublishedRecord]:
    """Records of one published output file (all four layouts: `Emotion:`/`emotion:` starts a record)."""
    records: list[PublishedRecord] = []
    current: dict | None = None
    for line in path.read_text(encoding="utf-8").splitlines():
        match = _FIELD.match(line.rstrip())
        if not match:
            continue
        key, value = match.group(1), match.group(2)
        if key.lower() == "emotion":
            if current is not None:
                records.append(_record(len(records), current))
            # MIME puts "vader-score: ..." and "predicted_emotion: ..." on the same line, tab-separated.
            current = {"emotion": value.split("\t")[0].strip(), "fields": {}}
        elif current is not None:
            current["fields"][key] = value.strip()
    if current is not None:
        records.append(_record(len(records), current))
    return records


def _record(index: int, raw: dict) -> PublishedRecord:
    context_text = raw["fields"].get("Context", "[]")
    try:
        context = ast.literal_eval(context_text)
    except (ValueError, SyntaxError):
        context = []
    return PublishedRecord(index, raw["emotion"] or None, [str(t) for t in context], raw["fields"])


@dataclass
class EdTestContext:
    conv_id: str
    n_turns: int
    emotion: str | None
    reference: str

    @property
    def key(self) -> str:
        return f"{self.conv_id}#{self.n_turns}"


def ed_test_index(ed_test_csv: Path) -> dict[str, list[EdTestContext]]:
    """Normalised whole-context text -> the ED test contexts with that text."""
    index: dict[str, list[EdTestContext]] = defaultdict(list)
    for dialogue in parse_ed_csv(ed_test_csv, "test"):
        for n_turns, turn_index in dialogue.context_prefix_lengths():
            turns = [t.text for t in dialogue.turns[:n_turns]]
            index[context_key(turns)].append(
                EdTestContext(dialogue.conv_id, n_turns, dialogue.emotion, dialogue.turns[turn_index].text))
    return index


@dataclass
class Coverage:
    file: str
    records: int = 0
    aligned: int = 0
    aligned_by_reference: int = 0  # of `aligned`: several ED contexts matched, Ref + emotion picked one
    ambiguous: int = 0
    unmatched: int = 0
    reference_differs: int = 0  # aligned records whose Ref text differs from the ED reference (diagnostic)
    unmatched_examples: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "unmatched_examples"}


def align_file(records: list[PublishedRecord], index: dict[str, list[EdTestContext]], file: str
               ) -> tuple[dict[str, int], Coverage]:
    """ED context key -> record index for every aligned record, and the file's coverage."""
    coverage = Coverage(file, records=len(records))
    claimed: dict[str, list[int]] = defaultdict(list)
    by_reference: set[int] = set()
    for record in records:
        matches = index.get(context_key(record.context), []) if record.context else []
        if not matches:
            coverage.unmatched += 1
            if len(coverage.unmatched_examples) < 5:
                coverage.unmatched_examples.append(" | ".join(record.context)[:200])
            continue
        if len(matches) > 1:
            reference = normalise(record.fields.get("Ref", record.fields.get("ref", "")))
            matches = [m for m in matches if normalise(m.reference) == reference and m.emotion == record.emotion]
            if len(matches) != 1:
                coverage.ambiguous += 1
                continue
            by_reference.add(record.index)
        claimed[matches[0].key].append(record.index)
    alignment: dict[str, int] = {}
    for key, indices in claimed.items():
        if len(indices) == 1:
            alignment[key] = indices[0]
        else:
            coverage.ambiguous += len(indices)
    coverage.aligned = len(alignment)
    coverage.aligned_by_reference = sum(1 for i in alignment.values() if i in by_reference)
    references = {m.key: m.reference for ms in index.values() for m in ms}
    for key, i in alignment.items():
        published_ref = records[i].fields.get("Ref", records[i].fields.get("ref", ""))
        if normalise(published_ref) != normalise(references[key]):
            coverage.reference_differs += 1
    return alignment, coverage


def file_sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class AlignedOutputs:
    """Per replay system: ED context key -> output text, plus where each came from."""

    outputs: dict[str, dict[str, str]]  # system -> key -> text
    sources: dict[str, dict]  # system -> file, field, repo, commit, sha256
    coverage: dict[str, dict]  # file -> coverage numbers


def align_all(model_outputs: Path, ed_test_csv: Path, systems: dict = REPLAY_SYSTEMS
              ) -> tuple[AlignedOutputs, list[Coverage]]:
    """Align every replay system's file against the full ED test set."""
    index = ed_test_index(ed_test_csv)
    per_file: dict[str, tuple[list[PublishedRecord], dict[str, int], Coverage]] = {}
    outputs: dict[str, dict[str, str]] = {}
    sources: dict[str, dict] = {}
    for system, (file, output_field, paper_name) in systems.items():
        if file not in per_file:
            records = parse_published(model_outputs / file)
            alignment, coverage = align_file(records, index, file)
            per_file[file] = (records, alignment, coverage)
        records, alignment, _ = per_file[file]
        missing = sum(1 for r in records if output_field not in r.fields)
        if missing == len(records):
            raise ValueError(f"{model_outputs / file}: no record has the field {output_field!r}")
        outputs[system] = {key: records[i].fields[output_field] for key, i in alignment.items()
                           if output_field in records[i].fields}
        sources[system] = {"file": file, "field": output_field, "model": paper_name,
                           "sha256": file_sha256(model_outputs / file), **SOURCES.get(file, {})}
    coverages = [c for _, _, c in per_file.values()]
    return AlignedOutputs(outputs, sources, {c.file: c.as_dict() for c in coverages}), coverages


def sample_context_keys(sample_test_csv: Path = SAMPLE_TEST_CSV) -> set[str]:
    return {f"{d.conv_id}#{n}" for d in parse_ed_csv(sample_test_csv, "test") for n, _ in d.context_prefix_lengths()}


def write_derived_file(aligned: AlignedOutputs, path: Path = DERIVED_FILE,
                       keys: set[str] | None = None) -> int:
    """Write the aligned outputs of the bundled sample's test contexts (or `keys`); returns their count."""
    keys = sample_context_keys() if keys is None else keys
    by_context: dict[str, dict[str, str]] = defaultdict(dict)
    for system, texts in aligned.outputs.items():
        for key, text in texts.items():
            if key in keys:
                by_context[key][system] = text
    payload = {"attribution": ATTRIBUTION, "sources": aligned.sources, "coverage_on_full_ed_test": aligned.coverage,
               "outputs": dict(sorted(by_context.items()))}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return len(by_context)


def coverage_table(coverages: list[Coverage]) -> list[str]:
    lines = [f"{'file':<34}{'records':>9}{'aligned':>9}{'(by ref)':>9}{'ambiguous':>11}{'unmatched':>11}"
             f"{'ref differs':>13}"]
    for c in coverages:
        lines.append(f"{c.file:<34}{c.records:>9,}{c.aligned:>9,}{c.aligned_by_reference:>9,}{c.ambiguous:>11,}"
                     f"{c.unmatched:>11,}{c.reference_differs:>13,}")
    return lines

