"""`learned-judge`: a regression from MiniLM embeddings of (context, response) to the study's own human
scores, fitted with cross-fitting over contexts so that no item is scored by a model that saw its ratings.

The features of an item are the all-MiniLM-L6-v2 embedding of its context (the turns joined by spaces) beside
the embedding of its response (768 numbers). The fitting is ``empeval.analysis.stats.ppi.crossfit.cross_fit_judge``
(handed down by the entry point as ``JudgedStudy.cross_fit``): the human-rated contexts are split into
`n_folds` folds (default 5, seeded by `seed`, default 0), all items of a context in one fold; the ridge model of
fold k is trained on the other folds and scores fold k's items; an item nobody rated is scored by the mean of
the fold models. Each stored score keeps its fold and, for unrated items, each fold model's score (the raw
output, JSON), which cross-prediction-powered inference needs.

The judge's version includes a hash of the human ratings it was fitted on: when more ratings arrive, the next
`empeval judge` run fits again and scores every item anew rather than mixing models.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from empeval.server.backend.judges.base import Judge, JudgedItem, JudgedStudy, Verdict, text_hash
from empeval.server.errors import BadInput
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.study_parts import Criterion


class LearnedJudge(Judge):
    kind = "learned-judge"

    def __init__(self, name, parameters=None, resources=None):
        parameters = {"n_folds": 5, "seed": 0, **(parameters or {})}
        n_folds, seed = parameters["n_folds"], parameters["seed"]
        if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 2:
            raise ValueError(f"learned-judge {name!r}: n_folds must be a whole number of at least 2, got {n_folds!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"learned-judge {name!r}: seed must be a whole number, got {seed!r}")
        if resources is None:
            raise ValueError(f"learned-judge {name!r} needs the backend's resources (the MiniLM encoder)")
        super().__init__(name, parameters, resources)
        self._labels_hash = ""
        self._scores: dict[tuple[str, str, int], dict[str, Any]] = {}

    def base_version(self) -> str:
        return f"learned-ridge-{self.resources.encoder().model_id}"

    def version(self, study: JudgedStudy) -> str:
        if not self._labels_hash:
            raise RuntimeError("LearnedJudge.version is known once the judge is prepared (fitted) on the study")
        return f"{super().version(study)}-y{self._labels_hash[:8]}"

    def features(self, items: Sequence[JudgedItem]) -> np.ndarray:
        """[MiniLM(context) | MiniLM(response)] per item, one row each."""
        encoder = self.resources.encoder()
        contexts = encoder.encode([" ".join(turn.text for turn in item.context.turns) for item in items],
                                  description=f"{self.name}: contexts")
        responses = encoder.encode([item.response for item in items], description=f"{self.name}: responses")
        return np.hstack([contexts, responses])

    def prepare(self, study: JudgedStudy) -> None:
        if study.cross_fit is None:
            raise BadInput(f"learned judge {self.name!r} needs the cross-fitting function "
                           "(analysis.stats.ppi.crossfit.cross_fit_judge) in JudgedStudy.cross_fit; `empeval judge` "
                           "hands it down")
        keys = [criterion.key for criterion in study.criteria]
        ratings = study.human_ratings.loc[study.human_ratings["criterion"].isin(keys)]
        unrated = [key for key in keys if key not in set(ratings["criterion"])]
        if unrated:
            raise BadInput(f"learned judge {self.name!r} learns from the study's own human ratings, and study "
                           f"{study.name!r} has none yet on {', '.join(unrated)}: collect ratings first, or "
                           "choose other --criteria")
        items = pd.DataFrame({"context_id": [item.context.context_id for item in study.items],
                              "system": [item.system for item in study.items]})
        try:
            fitted = study.cross_fit(items, self.features(study.items), ratings,
                                     n_folds=self.parameters["n_folds"], seed=self.parameters["seed"])
        except ValueError as error:
            raise BadInput(f"learned judge {self.name!r} on study {study.name!r}: {error}") from None
        # All the study's ratings, not only the chosen criteria's: one version whichever criteria a run scores.
        self._labels_hash = text_hash(sorted(map(tuple, study.human_ratings.astype(str).to_numpy().tolist())))
        fold_columns = sorted((c for c in fitted.columns if c.startswith("fold_score_")),
                              key=lambda c: int(c.rsplit("_", 1)[1]))
        model = text_hash(self._labels_hash, self.parameters)
        self._scores = {}
        for row in fitted.to_dict("records"):
            fold_scores = [float(row[c]) for c in fold_columns]
            self._scores[(row["criterion"], row["system"], int(row["context_id"]))] = {
                "score": float(row["judge_score"]), "fold": int(row["fold"]), "model": model,
                "fold_scores": [None if np.isnan(s) else s for s in fold_scores],
            }

    def score_batch(self, items: Sequence[JudgedItem], criterion: Criterion, scale: Scale) -> list[Verdict]:
        verdicts = []
        for item in items:
            start = time.perf_counter()
            fitted = self._scores.get((criterion.key, item.system, int(item.context.context_id or 0)))
            if fitted is None:
                verdicts.append(Verdict(item.response_id, None, None, 0.0, "", error="the learned judge was not "
                                        "fitted on this item (prepare the judge on the study first)"))
                continue
            raw = json.dumps({"fold": fitted["fold"], "fold_scores": fitted["fold_scores"]})
            verdicts.append(Verdict(item.response_id, fitted["score"], raw, (time.perf_counter() - start) * 1000,
                                    fitted["model"], details={"fold": fitted["fold"],
                                                              "n_folds": self.parameters["n_folds"]}))
        return verdicts
