"""The best-worst analysis: the contract's refusals, the counting scores against a hand count, the comparisons an
answer implies, the ranking and the scores recovering a simulated truth, split-half reliability rising with the
raters' care, the position check catching a rater who favours the first response, control tuples scored per rater,
the Likert study beside, and the report on degenerate studies (one rater, no real answers, every answer late)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from empeval.analysis.kinds import ReportRefused, analysis_kind
from empeval.analysis.kinds.best_worst.part import best_worst_report
from empeval.analysis.kinds.best_worst.schema import BestWorstError, choice_rows, read_choices, validate_choices
from empeval.analysis.kinds.best_worst.tables import (
    best_worst_scores,
    best_worst_tables,
    control_table,
    implied_comparisons,
    position_table,
    reliability_table,
)
from empeval.analysis.report.sections import write_report
from empeval.analysis.simulate.best_worst import simulate_best_worst_study
from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.stats.split_half import spearman_brown

ROW = {"study": "bws", "assignment_id": 1, "annotator": "ann-1", "context_id": 7, "criterion": "empathy",
       "tuple": "a|b|c", "shown": "c|a|b", "best": "a", "worst": "b", "position": 0, "is_control": False,
       "control_system": "", "control_target": "", "late": False}


@pytest.mark.parametrize("change, message", [
    ({"shown": "c|a|a", "tuple": "a|a|c"}, "row 1, column 'shown' is 'c|a|a'; a tuple shows at least two different "
                                           "systems, each once"),
    ({"tuple": "a|b|d"}, "row 1, column 'tuple' is 'a|b|d'; the systems shown ('c|a|b') make the tuple of their "
                         "names sorted, joined by '|'"),
    ({"best": "z"}, "row 1, column 'best' is 'z' but the tuple shown holds 'c|a|b'; pick one of its systems"),
    ({"worst": "a"}, "row 1, column 'worst' is 'a', the same as best; the best and the worst response are two "
                     "different ones"),
    ({"is_control": True}, "row 1, column 'control_system' is '' but is_control is true; a control tuple names "
                           "its control's system and the criterion it is built to be the worst on"),
    ({"is_control": True, "control_system": "x", "control_target": "empathy"},
     "row 1, column 'control_system' is 'x' but the tuple shown holds 'c|a|b'"),
    ({"position": "first"}, "row 1, column 'position' is 'first'; expected a whole number"),
    ({"late": "maybe"}, "row 1, column 'late' is 'maybe'; expected true or false"),
    ({"annotator": " "}, "row 1, column 'annotator' is empty; every row needs one"),
])
def test_the_contract_refuses_a_bad_row_naming_row_and_column(change, message):
    with pytest.raises(BestWorstError, match=f"^bws.csv: {re.escape(message)}$"):
        validate_choices([{**ROW, **change}], source="bws.csv")


def test_the_contract_refuses_a_missing_column_and_an_answer_given_twice():
    with pytest.raises(BestWorstError, match="missing column\\(s\\) 'worst'; the best-worst contract has: study"):
        validate_choices([{k: v for k, v in ROW.items() if k != "worst"}])
    with pytest.raises(BestWorstError, match=r"annotator 'ann-1' answered tuple 'a\|b\|c' on context 7 for "
                                             r"'empathy' more than once \(rows 1, 2\)"):
        validate_choices([ROW, {**ROW, "assignment_id": 2}])


def test_an_export_file_is_read_as_csv_or_json_lines_and_anything_else_is_refused(tmp_path):
    rows = choice_rows([(1, ("a", "b", "c"), "a", "c"), (2, ("c", "b", "a"), "b", "a")])
    pd.DataFrame(rows).to_csv(tmp_path / "bws.csv", index=False)
    pd.DataFrame(rows).to_json(tmp_path / "bws.jsonl", orient="records", lines=True)
    assert read_choices(tmp_path / "bws.csv").equals(read_choices(tmp_path / "bws.jsonl"))
    (tmp_path / "bws.xlsx").write_text("x")
    with pytest.raises(BestWorstError, match="unknown best-worst file format '.xlsx'"):
        read_choices(tmp_path / "bws.xlsx")
    (tmp_path / "bad.jsonl").write_text('{"study": \n')
    with pytest.raises(BestWorstError, match="bad.jsonl: line 1 is not valid JSON"):
        read_choices(tmp_path / "bad.jsonl")


def test_the_scores_are_best_minus_worst_over_the_times_shown_by_hand():
    """a: shown 3 times, best 2, worst 0 -> +66.7; d: shown once, worst once -> -100; controls left out."""
    rows = choice_rows([(1, ("a", "b", "c"), "a", "c"), (2, ("c", "b", "a"), "a", "b"),
                        (3, ("b", "a", "d"), "b", "d")])
    rows.append({**rows[0], "context_id": 4, "is_control": True, "control_system": "c", "control_target": "empathy",
                 "best": "c", "worst": "a"})
    scores = best_worst_scores(validate_choices(rows), n_boot=200).set_index("system")
    assert scores["shown"].to_dict() == {"a": 3, "b": 3, "c": 2, "d": 1}
    assert scores["best"].to_dict() == {"a": 2, "b": 1, "c": 0, "d": 0}
    assert scores["score"].round(2).to_dict() == {"a": 66.67, "b": 0.0, "c": -50.0, "d": -100.0}
    assert scores.loc["a", "ci_low"] <= scores.loc["a", "score"] <= scores.loc["a", "ci_high"]
    assert scores["rank"].to_dict() == {"a": 1, "b": 2, "c": 3, "d": 4}


def test_an_answer_about_an_m_tuple_implies_2m_minus_3_comparisons():
    for m in (3, 4, 5, 6):
        shown = tuple("abcdef"[:m])
        comparisons = implied_comparisons(validate_choices(choice_rows([(1, shown, "c", "a")])))
        assert len(comparisons) == 2 * m - 3
        assert (comparisons["preferred"] == comparisons["system_left"]).all()
        assert set(comparisons.loc[comparisons["system_left"] == "c", "system_right"]) == set(shown) - {"c"}
        assert set(comparisons.loc[comparisons["system_right"] == "a", "system_left"]) == set(shown) - {"a"}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_scores_and_the_ranking_recover_the_true_order(seed):
    effects = {"gold": 0.9, "moel": 0.3, "mime": 0.0, "baseline": -0.6}
    study = simulate_best_worst_study(n_contexts=60, system_effects=effects, size=3, seed=seed)
    tables = best_worst_tables(study.choices, n_boot=100, n_splits=10, seed=seed)
    for criterion in ("empathy", "fluency"):
        truth = study.true_ranking(criterion)
        by_score = tables.scores.loc[tables.scores["criterion"] == criterion].sort_values("rank")["system"].tolist()
        by_strength = tables.ranking.loc[tables.ranking["criterion"] == criterion].sort_values("rank")
        assert by_score == truth and by_strength["system"].tolist() == truth


def test_reliability_is_higher_for_careful_raters_than_for_random_clickers():
    careful = simulate_best_worst_study(n_contexts=80, n_raters=8, judgments_per_tuple=4, noise_sd=0.3, seed=4)
    careless = simulate_best_worst_study(n_contexts=80, n_raters=8, judgments_per_tuple=4, n_random_clickers=8,
                                         seed=4)
    good = reliability_table(careful.choices, n_splits=20).set_index("criterion")
    bad = reliability_table(careless.choices, n_splits=20).set_index("criterion")
    assert (good["spearman"] > 0.5).all() and (bad["spearman"].abs() < 0.25).all()
    assert np.allclose(good["spearman_brown"], spearman_brown(good["spearman"]))
    assert (good["responses"] == 80 * 3).all() and (good["method"] == "best-worst").all()


def test_the_position_check_catches_a_rater_who_favours_the_first_response():
    fair = simulate_best_worst_study(n_contexts=120, n_raters=6, seed=5)
    biased = simulate_best_worst_study(n_contexts=120, n_raters=6, position_bias=2.0, seed=5)
    fair_table, biased_table = position_table(fair.choices), position_table(biased.choices)
    assert (fair_table["p_best"] > 0.001).all()
    first = biased_table.loc[biased_table["place"] == 0]
    assert (first["best_pct"] > 50).all() and (first["p_best"] < 1e-6).all()
    assert set(biased_table["label"]) == {"A", "B", "C"} and (biased_table["expected_pct"].round(2) == 33.33).all()


def test_control_tuples_pass_when_the_control_is_marked_worst_on_its_target_only():
    control = {"is_control": True, "control_system": "ctl", "control_target": "relevance", "tuple": "a|b|ctl",
               "shown": "a|ctl|b"}
    rows = [{**ROW, **control, "annotator": "ann-1", "criterion": "relevance", "best": "a", "worst": "ctl"},
            {**ROW, **control, "annotator": "ann-1", "criterion": "empathy", "best": "a", "worst": "b"},
            {**ROW, **control, "annotator": "ann-2", "criterion": "relevance", "best": "ctl", "worst": "b"}]
    table = control_table(validate_choices(rows))
    assert table.to_dict("records") == [
        {"annotator": "ann-2", "controls": 1, "passed": 0, "pass_rate": 0.0},
        {"annotator": "ann-1", "controls": 1, "passed": 1, "pass_rate": 1.0}]


def test_a_linked_likert_study_stands_beside_with_its_reliability():
    bws = simulate_best_worst_study(n_contexts=40, seed=6)
    likert = simulate_study(n_contexts=40, n_random_clickers=0, n_straight_liners=0, seed=6)
    from empeval.analysis.kinds.likert.load import tidy_from_export

    ratings = tidy_from_export(likert.export)
    tables = best_worst_tables(bws.choices, likert=ratings, n_boot=50, n_splits=10)
    assert set(tables.reliability["method"]) == {"best-worst", "likert"}
    likert_rows = tables.reliability.loc[tables.reliability["method"] == "likert"]
    assert likert_rows["alpha_interval"].between(0, 1).all() and likert_rows["spearman"].between(0, 1).all()
    beside = tables.likert
    assert set(beside["system"]) == {"gold", "moel", "baseline"} and beside["rho"].notna().all()
    assert (beside.groupby("criterion")["likert_rank"].apply(sorted).map(list) == pd.Series(
        {c: [1, 2, 3] for c in beside["criterion"].unique()})).all()


def test_the_report_writes_its_tables_figure_and_summary_lines(tmp_path):
    study = simulate_best_worst_study(n_contexts=20, seed=7)
    report = best_worst_report(study.choices, name="bws", meta={"k": 3, "tuple_size": 3}, n_boot=50, n_splits=5)
    paths = write_report(report, tmp_path)
    assert {"table_bws_scores", "table_bws_ranking", "table_bws_reliability", "table_bws_position",
            "figure_bws_scores"} <= set(paths)
    text = paths["markdown"].read_text()
    assert "Best-worst scores" in text and "each tuple was answered by 3 different annotators" in text
    lines = analysis_kind("best_worst").summary_lines(paths, ["relevance", "empathy", "fluency"])
    assert lines[0].startswith("best-worst score per system") and lines[1].split()[0] == "relevance"
    assert lines[1].split()[1] == "gold"


def test_degenerate_studies_get_a_report_or_a_clear_refusal(tmp_path):
    one_rater = simulate_best_worst_study(n_contexts=6, n_raters=1, judgments_per_tuple=1, seed=8)
    paths = write_report(best_worst_report(one_rater.choices, name="solo", n_boot=20, n_splits=5), tmp_path / "solo")
    reliability = pd.read_csv(paths["table_bws_reliability"])
    assert (reliability["responses"] == 0).all() and reliability["spearman"].isna().all()  # no halves with one rater
    only_controls = [{**ROW, "is_control": True, "control_system": "c", "control_target": "empathy"}]
    report = best_worst_report(pd.DataFrame(only_controls), name="controls", n_boot=20, n_splits=5)
    assert "No answers about real tuples yet." in write_report(report, tmp_path / "c")["markdown"].read_text()
    late = pd.DataFrame([{**ROW, "late": True}])
    with pytest.raises(ReportRefused, match="all 1 assignment\\(s\\) of 'late' were submitted late"):
        best_worst_report(late, name="late", include_late=False)
    assert best_worst_report(late, name="late", n_boot=20, n_splits=5).title.endswith("(best-worst scaling)")
