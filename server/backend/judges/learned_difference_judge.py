"""`learned-difference-judge`: a judge of differences learned from the study's own human ratings: a ridge
regression from the difference of two responses' MiniLM embeddings to the difference of their labels, cross-fitted
over contexts so that no pair is scored by a model that saw its context's ratings. On an A/B study it learns the
pairs' net preferences from people's choices (``JudgedStudy.pair_labels``) and compares the pairs the design
compares.

The features of a pair (A, B) are emb(A) - emb(B), the all-MiniLM-L6-v2 embeddings of the two responses (the
context is the same for both and cancels). The fitting is ``empeval.analysis.stats.ppi.crossfit
.cross_fit_difference_judge`` (handed down by the entry point as ``JudgedStudy.cross_fit_differences``): the contexts
people rated for both systems of a pair are split into `n_folds` folds (default 5, seeded by `seed`, default 0);
the model of fold k, fitted without an intercept on both orientations of the other folds' pairs (so that
swapping A and B negates its score), scores fold k's pairs; any other pair is scored by the mean of the fold
models. A context rated for one system only trains no model: its pairs have no label difference. Each stored
verdict keeps its fold and, for a pair without a label difference, each fold model's score (the raw output,
JSON), as the learned judge's scores do.

A per-item learned judge differenced would mostly learn what two responses to one context share; this one is
trained on the differences the decision rests on. The analysis uses its verdicts as it uses a pairwise judge's
(``empeval.analysis.stats.ppi.differences``): PPI++ with the out-of-fold verdict on the rated contexts and the mean
of the fold models elsewhere is cross-prediction-powered inference's estimate (Zrnic and Candès 2024) with its
weight tuned.

The judge's version includes a hash of the human ratings it was fitted on, as the learned judge's does.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from empeval.server.backend.judges.base import JudgedPair, JudgedStudy, PairJudge, PairVerdict, text_hash
from empeval.server.errors import BadInput
from empeval.server.store.kinds.likert import Scale
from empeval.server.store.study_parts import Criterion


class LearnedDifferenceJudge(PairJudge):
    kind = "learned-difference-judge"

    def __init__(self, name, parameters=None, resources=None):
        parameters = {"n_folds": 5, "seed": 0, **(parameters or {})}
        n_folds, seed = parameters["n_folds"], parameters["seed"]
        if isinstance(n_folds, bool) or not isinstance(n_folds, int) or n_folds < 2:
            raise ValueError(f"learned-difference-judge {name!r}: n_folds must be a whole number of at least 2, got "
                             f"{n_folds!r}")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ValueError(f"learned-difference-judge {name!r}: seed must be a whole number, got {seed!r}")
        if resources is None:
            raise ValueError(f"learned-difference-judge {name!r} needs the backend's resources (the MiniLM encoder)")
        super().__init__(name, parameters, resources)
        self._labels_hash = ""
        self._scores: dict[tuple[str, int, int], dict[str, Any]] = {}

    def base_version(self) -> str:
        return f"learned-difference-ridge-{self.resources.encoder().model_id}"

    def version(self, study: JudgedStudy) -> str:
        if not self._labels_hash:
            raise RuntimeError("LearnedDifferenceJudge.version is known once the judge is prepared on the study")
        return f"{super().version(study)}-y{self._labels_hash[:8]}"

    def features(self, pairs: Sequence[JudgedPair]) -> np.ndarray:
        """emb(A) - emb(B) per pair, one row each."""
        encoder = self.resources.encoder()
        responses = {item.response_id: item.response for pair in pairs for item in (pair.first, pair.second)}
        ids = sorted(responses)
        embedded = encoder.encode([responses[i] for i in ids], description=f"{self.name}: responses")
        row_of = {response_id: row for row, response_id in enumerate(ids)}
        return np.asarray([embedded[row_of[p.first.response_id]] - embedded[row_of[p.second.response_id]]
                           for p in pairs], dtype=float).reshape(len(pairs), -1)

    def prepare(self, study: JudgedStudy) -> None:
        if study.cross_fit_differences is None:
            raise BadInput(f"learned difference judge {self.name!r} needs the cross-fitting function "
                           "(analysis.stats.ppi.crossfit.cross_fit_difference_judge) in "
                           "JudgedStudy.cross_fit_differences; `empeval judge` hands it down")
        keys = [criterion.key for criterion in study.criteria]
        # An A/B study's labels are its pairs' net preferences (people choose); a Likert study's, rating differences.
        choices = study.pairs is not None
        trained_on = study.pair_labels if choices else study.human_ratings
        if trained_on is None:
            trained_on = pd.DataFrame(columns=["criterion"])
        labels = trained_on.loc[trained_on["criterion"].isin(keys)]
        unrated = [key for key in keys if key not in set(labels["criterion"])]
        if unrated:
            what = "choices" if choices else "ratings"
            raise BadInput(f"learned difference judge {self.name!r} learns from the study's own human {what}, and "
                           f"study {study.name!r} has none yet on {', '.join(unrated)}: collect {what} first, or "
                           "choose other --criteria")
        pairs = study.pairs_to_compare()
        table = pd.DataFrame({"context_id": [p.first.context.context_id for p in pairs],
                              "system_a": [p.first.system for p in pairs],
                              "system_b": [p.second.system for p in pairs]})
        ratings, fit = (study.human_ratings, {"pair_labels": labels}) if choices else (labels, {})
        try:
            fitted = study.cross_fit_differences(table, self.features(pairs), ratings,
                                                 n_folds=self.parameters["n_folds"], seed=self.parameters["seed"],
                                                 **fit)
        except ValueError as error:
            raise BadInput(f"learned difference judge {self.name!r} on study {study.name!r}: {error}") from None
        self._labels_hash = text_hash(sorted(map(tuple, trained_on.astype(str).to_numpy().tolist())))
        fold_columns = sorted((c for c in fitted.columns if c.startswith("fold_score_")),
                              key=lambda c: int(c.rsplit("_", 1)[1]))
        model = text_hash("differences", self._labels_hash, self.parameters)
        ids = {(p.first.context.context_id, p.first.system, p.second.system): p for p in pairs}
        self._scores = {}
        for row in fitted.to_dict("records"):
            pair = ids[(row["context_id"], row["system_a"], row["system_b"])]
            fold_scores = [float(row[c]) for c in fold_columns]
            self._scores[(row["criterion"], pair.first.response_id, pair.second.response_id)] = {
                "score": float(row["judge_diff"]), "fold": int(row["fold"]), "model": model,
                "fold_scores": [None if np.isnan(s) else s for s in fold_scores]}

    def score_pairs(self, pairs: Sequence[JudgedPair], criterion: Criterion, scale: Scale) -> list[PairVerdict]:
        verdicts = []
        for pair in pairs:
            start = time.perf_counter()
            a, b = pair.first.response_id, pair.second.response_id
            fitted = self._scores.get((criterion.key, a, b))
            if fitted is None:
                verdicts.append(PairVerdict(a, b, None, None, 0.0, "", error="the learned difference judge was not "
                                            "fitted on this pair (prepare the judge on the study first)"))
                continue
            raw = json.dumps({"fold": fitted["fold"], "fold_scores": fitted["fold_scores"]})
            verdicts.append(PairVerdict(a, b, fitted["score"], raw, (time.perf_counter() - start) * 1000,
                                        fitted["model"], details={"fold": fitted["fold"],
                                                                  "n_folds": self.parameters["n_folds"]}))
        return verdicts
