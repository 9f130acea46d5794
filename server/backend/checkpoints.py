"""Where trained models live: one folder per run under the cache directory, named by what produced it.

    <cache_dir>/trained/<kind>-<key12>/
        model/          the selected (best) model, loadable by its library (SentenceTransformer(path), ...)
        manifest.json   written last, when the run has finished: kind, key, base model, data hash, parameters,
                        measured figures; a folder without it is an unfinished run (resumable, never served)
        ...             whatever the trainer keeps to resume (e.g. trainer/checkpoint-N/)

`key12` is `cache_key(data_hash, base_model_id, parameters)`: the first 12 hex digits of a SHA-256 over the
training data's hash, the base model's id and the training parameters, so another corpus, another base model or
another setting trains into another folder and never overwrites, or is mistaken for, an earlier run. The key
is part of the trained system's version (its provenance). Checkpoints stay in the cache directory, never git.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from empeval.server.errors import BadInput

TRAINED_DIR = "trained"
MODEL_DIR = "model"
MANIFEST = "manifest.json"
KEY_LENGTH = 12

# The command that trains each kind, named by the error when its checkpoint is missing.
TRAIN_COMMANDS: dict[str, str] = {
    "retrieval-ft": "empeval train retrieval",
    "cobert": "empeval train cobert",
}


class MissingCheckpoint(BadInput):
    """A trained system was asked for but no finished training run of its kind is in the cache."""


def cache_key(data_hash: str, base_model_id: str, parameters: Mapping[str, Any]) -> str:
    """The 12-hex-digit key of a training run: SHA-256 of the data hash, the base model id and the
    parameters (as canonical JSON, keys sorted), so any change to one of them gives another key."""
    payload = json.dumps({"data": data_hash, "base_model": base_model_id, "parameters": dict(parameters)},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:KEY_LENGTH]


def trained_root(cache_dir: Path) -> Path:
    return Path(cache_dir) / TRAINED_DIR


def run_dir(cache_dir: Path, kind: str, key: str) -> Path:
    """The folder of one training run: `<cache_dir>/trained/<kind>-<key>`."""
    return trained_root(cache_dir) / f"{kind}-{key}"


def is_finished(run: Path) -> bool:
    return (run / MANIFEST).is_file() and (run / MODEL_DIR).is_dir()


def read_manifest(run: Path) -> dict[str, Any]:
    """The manifest of a finished run (`run` may also be its `model/` folder)."""
    run = run.parent if run.name == MODEL_DIR else run
    return json.loads((run / MANIFEST).read_text(encoding="utf-8"))


def write_manifest(run: Path, manifest: Mapping[str, Any]) -> None:
    """Mark a run finished: the manifest is written to a scratch file and renamed, so a crash never leaves a
    half-written manifest that would make an unfinished run look finished."""
    scratch = run / f"{MANIFEST}.{os.getpid()}.tmp"
    scratch.write_text(json.dumps(dict(manifest), indent=2, sort_keys=True, default=str), encoding="utf-8")
    scratch.replace(run / MANIFEST)


def checkpoint_key(model_path: Path) -> str:
    """The key of the run a `find_checkpoint` path belongs to (the 12 hex digits after the kind)."""
    run = model_path.parent if model_path.name == MODEL_DIR else model_path
    return run.name.rsplit("-", 1)[1]


def find_checkpoint(cache_dir: Path, kind: str, key: str | None = None) -> Path:
    """The `model/` folder of the finished `kind` run with `key`, or, without a key, of the most recently
    finished one. Raises MissingCheckpoint naming the command that trains it when there is none: a trained
    system never falls back to an untrained model silently."""
    command = TRAIN_COMMANDS.get(kind, f"empeval train {kind}")
    root = trained_root(cache_dir)
    if key is not None:
        run = run_dir(cache_dir, kind, key)
        if is_finished(run):
            return run / MODEL_DIR
        raise MissingCheckpoint(f"no finished {kind} checkpoint {key!r} under {root} "
                                f"({'unfinished run' if run.is_dir() else 'no such run'}): run `{command}` first "
                                f"(with the same data and parameters), or drop the pinned checkpoint key")
    runs = [run for run in root.glob(f"{kind}-*") if run.name[len(kind) + 1:].isalnum() and is_finished(run)] \
        if root.is_dir() else []
    if not runs:
        raise MissingCheckpoint(f"no fine-tuned {kind} checkpoint under {root}: run `{command}` first "
                                f"(or point --cache-dir / EMPEVAL_CACHE_DIR at the cache it trained into)")
    latest = max(runs, key=lambda run: (run / MANIFEST).stat().st_mtime)
    return latest / MODEL_DIR
