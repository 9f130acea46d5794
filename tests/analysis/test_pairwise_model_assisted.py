"""The A/B report's model-assisted net preferences (analysis.kinds.pairwise.judged) within the report itself:
they use the judgments the results use, so --without-late leaves late judgments out of them too (a review found
them counted), and a study whose every context people judged says it leaves nothing to the judge alone."""
from __future__ import annotations

import numpy as np
import pandas as pd

from empeval.analysis.kinds import JudgeRequest
from empeval.analysis.kinds.pairwise.part import pairwise_report
from empeval.analysis.simulate.pairwise import simulate_pairwise_study


def _report(*, include_late: bool, judge_only: int = 10):
    judgments = simulate_pairwise_study(n_contexts=20, anchor="moel", k=2, seed=3).judgments.copy()
    contexts = sorted(judgments["context_id"].unique())
    judgments["late"] = judgments["context_id"].isin(contexts[:10])  # every judgment of half the contexts is late
    everywhere = contexts + [10_000 + i for i in range(judge_only)]
    pairs = judgments.loc[~judgments["is_control"], "pair"].unique()
    rng = np.random.default_rng(0)
    verdicts = pd.DataFrame([{"criterion": criterion, "context_id": c, "system_a": pair.split("|")[0],
                              "system_b": pair.split("|")[1], "judge_diff": float(rng.normal()), "error": None}
                             for c in everywhere for pair in pairs for criterion in judgments["criterion"].unique()])
    sample = pd.DataFrame({"context_id": everywhere, "sampled": [c in contexts for c in everywhere]})
    report = pairwise_report(judgments, name="ab", focus="moel", include_late=include_late, n_boot=20,
                             judge=JudgeRequest(name="pairs", scores=pd.DataFrame(), design_sample=sample,
                                                pair_scores=verdicts, pair_judge="pairs"))
    (section,) = [s for s in report.sections if s.name == "model_assisted"]
    return section


def test_without_late_judgments_the_model_assisted_table_leaves_them_out_too():
    on_time = _report(include_late=False).tables["ab_model_assisted"]
    everyone = _report(include_late=True).tables["ab_model_assisted"]
    assert set(on_time["n_human"]) == {10} and set(everyone["n_human"]) == {20}
    assert set(on_time["n_judge_only"]) == {10}


def test_a_study_whose_every_context_people_judged_says_the_judge_has_none_alone():
    section = _report(include_late=True, judge_only=0)
    text = " ".join(block.text for block in section.blocks if hasattr(block, "text"))
    assert "all of them: with no context left to the judge alone, it cannot narrow the intervals" in text
    assert set(section.tables["ab_model_assisted"]["note"]) == {
        "no context only the judge compared (a study with design.human_share has some)"}
