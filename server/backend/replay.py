"""`replay`: published outputs of real models on the ED test set, served for the context they belong to.

By default the outputs come from the derived file shipped in server/data/replay/ (the bundled sample's
test contexts; see replay_align for how they were aligned and why none is guessed). Given
`model_outputs` (the folder of published files) and `ed_test` (ED's test.csv), the alignment is rebuilt
from the full files instead, covering the whole ED test set.
"""
from __future__ import annotations

import json
from pathlib import Path

from empeval.server.backend.base import (
    DialogueContext,
    Reply,
    ResponseModel,
    ResponseUnavailable,
    parameters_hash,
)
from empeval.server.backend.replay_align import DERIVED_FILE, REPLAY_SYSTEMS, align_all


def load_replay_outputs(resources, *, model_outputs: str | None, ed_test: str | None
                        ) -> tuple[dict[str, dict[str, str]], dict[str, dict]]:
    """(system -> ED context key -> text, system -> source info), shared per process."""

    def build():
        if model_outputs:
            folder = Path(model_outputs)
            test_csv = Path(ed_test) if ed_test else folder.parent / "test.csv"
            aligned, _ = align_all(folder, test_csv)
            return aligned.outputs, aligned.sources
        payload = json.loads(DERIVED_FILE.read_text(encoding="utf-8"))
        outputs: dict[str, dict[str, str]] = {}
        for key, texts in payload["outputs"].items():
            for system, text in texts.items():
                outputs.setdefault(system, {})[key] = text
        return outputs, payload["sources"]

    if resources is None:
        return build()
    return resources.get_or_build(f"replay:{model_outputs}:{ed_test}", build)


class ReplayModel(ResponseModel):
    """Parameters: `source` (one of REPLAY_SYSTEMS, e.g. "moel"), optional `model_outputs` and `ed_test`."""

    kind = "replay"

    def __init__(self, name, parameters=None, resources=None):
        parameters = dict(parameters or {})
        parameters.setdefault("source", name)
        if parameters["source"] not in REPLAY_SYSTEMS:
            raise ValueError(f"replay system {name!r}: unknown source {parameters['source']!r}; "
                             f"expected one of {', '.join(REPLAY_SYSTEMS)}")
        super().__init__(name, parameters)
        self.resources = resources

    def _loaded(self):
        outputs, sources = load_replay_outputs(self.resources, model_outputs=self.parameters.get("model_outputs"),
                                               ed_test=self.parameters.get("ed_test"))
        return outputs.get(self.parameters["source"], {}), sources[self.parameters["source"]]

    def data_version(self) -> str:
        # The published file's hash and field: the shipped file and a rebuild from the full files agree.
        _, source = self._loaded()
        return f"{source['sha256'][:12]}:{source['field']}"

    @property
    def version(self) -> str:
        # Where the files were read from is not part of the version: the same published text is the same system.
        return f"{self.data_version()}-p{parameters_hash({'source': self.parameters['source']})}"

    def describe(self) -> dict:
        _, source = self._loaded()
        return {**super().describe(), "source": {k: source[k] for k in ("model", "repo", "commit", "path", "field")
                                                 if k in source}}

    def respond_one(self, context: DialogueContext) -> Reply:
        outputs, source = self._loaded()
        text = outputs.get(context.key()) if context.conv_id else None
        if text is None:
            where = ("the published file has no unambiguous output for it" if self.parameters.get("model_outputs")
                     else "the shipped file covers the bundled sample's test contexts; set model_outputs to "
                          "serve the full ED test set")
            raise ResponseUnavailable(f"replay {self.parameters['source']!r} has no aligned published output for "
                                      f"context {context.key()} ({where})")
        return Reply(text, {"source_model": source["model"], "source_repo": source.get("repo"),
                            "source_commit": source.get("commit"), "source_file": source["file"],
                            "source_field": source["field"]})
