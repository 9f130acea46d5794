"""The chat analysis: the unpaired tests against scipy, the rank-biserial r by hand, Holm against statsmodels, Wilson
intervals against published values, the mixed model as the Likert report's, the controls catching a planted rater,
the four tables' contract refusing bad rows by line and column, and the report: its sections in order, with the
chat table alone, and on degenerate studies (one system, one rater, no ratings, every conversation failed)."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from empeval.analysis.kinds import ReportRefused, ReportRequest, analysis_kind
from empeval.analysis.kinds.chat.part import SECTIONS, chat_report
from empeval.analysis.kinds.chat.schema import (
    CHAT_COLUMNS,
    CONVERSATION_COLUMNS,
    TURN_ANNOTATION_COLUMNS,
    TURN_COLUMNS,
    ChatExportError,
    read_chat_file,
    validate_table,
)
from empeval.analysis.kinds.chat.tables import (
    annotation_rates,
    chat_tables,
    control_checks,
    failure_reasons,
    flagged_by_controls,
    length_latency,
    mann_whitney,
    mixed_model_table,
    rank_biserial,
    unpaired_tests,
    welch_test,
    wilson_interval,
)
from empeval.analysis.report.sections import write_report
from empeval.analysis.report.study import export_kind, report_study, report_summary_lines
from empeval.analysis.stats.rater_aware import mixed_model_pairs

CRITERIA = ("empathy", "relevance", "fluency")
QUESTIONS = ("empathetic", "made_sense", "off_topic", "repetitive", "not_fluent", "none")
MEAN = {"alpha": 4.0, "beta": 3.2, "gamma": 2.6, "ctrl": 1.3}
TICKED = {"alpha": 0.7, "beta": 0.5, "gamma": 0.3, "ctrl": 0.1}


def make_study(*, n_raters: int = 8, systems: tuple[str, ...] = ("alpha", "beta", "gamma"),
               control: str | None = "ctrl", target: str = "empathy", planted: str | None = None,
               failing: frozenset[tuple[int, str]] = frozenset(), criteria: tuple[str, ...] = CRITERIA,
               seed: int = 0) -> dict[str, pd.DataFrame]:
    """A small chat study: each rater one session with every partner (the control too), each on another prompt,
    prompts crossed with partners (prompt (r + j) mod n for rater r and partner j); scores from each system's mean
    plus the rater's leniency and noise, the control's low unless the rater is `planted`; (assignment, system)
    pairs in `failing` failed (no ratings). Returns the four tables by name."""
    rng = np.random.default_rng(seed)
    partners = [*systems, *([control] if control else [])]
    ratings, conversations, turns, annotations = [], [], [], []
    for r in range(n_raters):
        assignment, annotator = r + 1, f"r{r + 1}"
        leniency = rng.normal(0, 0.4)
        for j, system in enumerate(partners):
            is_control = system == control
            context = (r + j) % n_raters + 100
            shared = {"study": "chat-pilot", "assignment_id": assignment, "annotator": annotator,
                      "conversation_id": context * 10 + j}
            position = (j + r) % len(partners)
            failed = (assignment, system) in failing
            latencies = rng.uniform(200, 900, 3)
            conversations.append({**shared, "context_id": context, "emotion": "proud", "system": system,
                                  "is_control": is_control, "position": position,
                                  "state": "failed" if failed else "ended", "utterances": 1 if failed else 6,
                                  "system_turns": 0 if failed else 3,
                                  "mean_latency_ms": "" if failed else float(latencies.mean()),
                                  "failure": "timeout" if failed else "", "submitted": True, "late": False})
            if failed:
                continue
            for index in range(6):
                speaker = "system" if index % 2 else "rater"
                turns.append({**shared, "system": system, "index": index, "speaker": speaker,
                              "text": f"utterance {index}", "created_at": f"2025-01-01T10:00:{index:02d}Z",
                              "latency_ms": float(latencies[index // 2]) if index % 2 else "",
                              "version": "1" if index % 2 else "", "parameters": "{}" if index % 2 else "",
                              "context_sent": "[]" if index % 2 else ""})
                if index % 2:
                    for question in QUESTIONS:
                        annotations.append({**shared, "system": system, "is_control": is_control, "index": index,
                                            "question": question, "checked": bool(rng.random() < TICKED[system])})
            for criterion in criteria:
                if is_control and annotator == planted:
                    score = 5
                else:
                    score = int(np.clip(np.rint(MEAN[system] + (0 if is_control else leniency)
                                                + rng.normal(0, 0.6)), 1, 5))
                ratings.append({**shared, "context_id": context, "emotion": "proud", "system": system,
                                "is_control": is_control, "control_target": target if is_control else "",
                                "position": position, "criterion": criterion, "score": score, "utterances": 6,
                                "late": False})
    return {"chat": pd.DataFrame(ratings, columns=list(CHAT_COLUMNS)),
            "conversations": pd.DataFrame(conversations, columns=list(CONVERSATION_COLUMNS)),
            "turns": pd.DataFrame(turns, columns=list(TURN_COLUMNS)),
            "turn_annotations": pd.DataFrame(annotations, columns=list(TURN_ANNOTATION_COLUMNS))}


@pytest.fixture(scope="module")
def study() -> dict[str, pd.DataFrame]:
    tables = make_study(planted="r3")
    return {name: validate_table(name, frame) for name, frame in tables.items()}


def _scores(ratings: pd.DataFrame, criterion: str, system: str) -> np.ndarray:
    rows = ratings.loc[(ratings["criterion"] == criterion) & (ratings["system"] == system)]
    return rows["score"].to_numpy(dtype=float)


def test_welch_and_mann_whitney_are_scipys_and_holm_is_statsmodels(study):
    ratings = study["chat"]
    tests = unpaired_tests(ratings, criteria=CRITERIA)
    assert len(tests) == 3 * 3 and "ctrl" not in set(tests["system_a"]) | set(tests["system_b"])
    for row in tests.itertuples(index=False):
        a, b = _scores(ratings, row.criterion, row.system_a), _scores(ratings, row.criterion, row.system_b)
        welch = stats.ttest_ind(a, b, equal_var=False)
        assert row.welch_t == pytest.approx(welch.statistic) and row.p_welch == pytest.approx(welch.pvalue)
        assert row.welch_df == pytest.approx(welch.df)
        mw = stats.mannwhitneyu(a, b, alternative="two-sided")
        assert row.mw_u == pytest.approx(mw.statistic) and row.p_mw == pytest.approx(mw.pvalue)
        assert row.rank_biserial == pytest.approx(1 - 2 * (a.size * b.size - mw.statistic) / (a.size * b.size))
        assert np.sign(row.rank_biserial) == np.sign(row.mean_diff) or row.mean_diff == 0
    for raw, adjusted in (("p_welch", "p_welch_adj"), ("p_mw", "p_mw_adj")):
        expected = multipletests(tests[raw].to_numpy(), method="holm")[1]
        np.testing.assert_allclose(tests[adjusted].to_numpy(), expected, rtol=1e-12)
    assert tests.loc[(tests["system_a"] == "alpha") & (tests["system_b"] == "gamma"), "p_welch_adj"].max() < 0.05


def test_the_rank_biserial_r_by_hand():
    """a = [1, 2, 3], b = [2, 4]: of the 6 pairs a wins (3, 2) and ties (2, 2): U_a = 1.5, U_b = 4.5, so
    r = 2 U_a / 6 - 1 = 1 - 2 U_b / 6 = -0.5 (negative: b scores higher)."""
    u, p, r = mann_whitney(np.array([1.0, 2, 3]), np.array([2.0, 4]))
    assert u == 1.5 and r == pytest.approx(-0.5) and rank_biserial(4.5, 2, 3) == pytest.approx(0.5)
    assert mann_whitney(np.array([5.0, 4]), np.array([1.0, 2, 3]))[2] == 1.0
    assert welch_test(np.array([3.0]), np.array([1.0, 2]))[3] == "Welch: fewer than 2 conversations of a system"
    assert np.isnan(welch_test(np.array([3.0, 3]), np.array([4.0, 4]))[2])


def test_wilson_intervals_match_published_values():
    """Wilson (1927) / Newcombe (1998, Table I): 0 of 10 -> [0, 0.2775]; 5 of 10 -> [0.2366, 0.7634]."""
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.2775, abs=1e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert all(np.isnan(wilson_interval(0, 0)))
    annotations = pd.DataFrame({"system": "a", "is_control": False, "question": ["made_sense"] * 10 + ["none"] * 10,
                                "checked": [True] * 5 + [False] * 5 + [False] * 10})
    rates = annotation_rates(annotations, questions=["made_sense", "none"]).set_index("question")
    assert rates.loc["made_sense", ["ci_low", "ci_high"]].tolist() == pytest.approx([0.2366, 0.7634], abs=1e-4)
    assert rates.loc["none", "ci_high"] == pytest.approx(0.2775, abs=1e-4)


def test_annotation_rates_order_the_study_questions_and_put_controls_last(study):
    rates = annotation_rates(study["turn_annotations"], questions=QUESTIONS)
    assert list(dict.fromkeys(rates["system"])) == ["alpha", "beta", "gamma", "ctrl"]
    assert list(rates.loc[rates["system"] == "alpha", "question"]) == list(QUESTIONS)
    assert (rates["turns"] == 8 * 3).all()
    assert rates.groupby("system")["rate"].mean()["alpha"] > rates.groupby("system")["rate"].mean()["ctrl"]


def test_the_mixed_model_is_the_likert_reports_with_rater_and_prompt_intercepts(study):
    ratings = study["chat"]
    mixed = mixed_model_table(ratings, criteria=CRITERIA)
    direct = mixed_model_pairs(ratings, criterion="empathy", random_effects=("annotator", "context_id"))
    ours = mixed.loc[mixed["criterion"] == "empathy"]
    np.testing.assert_allclose(ours["lmm_diff"].to_numpy(), direct["lmm_diff"].to_numpy())
    np.testing.assert_allclose(ours["lmm_p"].to_numpy(), direct["lmm_p"].to_numpy())
    np.testing.assert_allclose(mixed["lmm_p_adj"], multipletests(mixed["lmm_p"], method="holm")[1], rtol=1e-12)
    assert set(mixed["raters"]) == {8} and set(mixed["prompts"]) == {8}


def test_a_mixed_model_that_cannot_be_fitted_says_why_instead_of_raising(study):
    one_rater = study["chat"].loc[study["chat"]["annotator"] == "r1"]
    mixed = mixed_model_table(one_rater)
    assert mixed["lmm_p"].isna().all() and mixed["note"].str.startswith("one rater (r1)").all()
    one_system = study["chat"].loc[study["chat"]["system"].isin(["alpha", "ctrl"])]
    assert mixed_model_table(one_system)["note"].str.startswith("one system (alpha)").all()


def test_the_controls_flag_a_planted_rater_who_scored_a_control_high(study):
    checks = control_checks(study["chat"], scale=(1, 5))
    assert len(checks) == 8 and flagged_by_controls(checks) == ["r3"]
    assert analysis_kind("chat").flagged_raters(make_study(planted="r3")["chat"], {}) == {"r3"}
    assert analysis_kind("chat").flagged_raters(make_study(planted="r3")["chat"], {"scale": [1, 7]}) == set()
    assert analysis_kind("chat").flagged_raters(pd.DataFrame(), {}) == set()
    done = chat_tables(study["chat"], scale=(1, 5))
    assert done.excluded == ["r3"] and "r3" not in set(done.ratings["annotator"])
    assert "r3" in set(chat_tables(study["chat"], exclude_flagged=False).ratings["annotator"])


def test_a_control_without_target_flags_only_a_rater_who_scored_every_criterion_high():
    base = {"assignment_id": 1, "conversation_id": 5, "system": "ctrl", "is_control": True, "control_target": None}
    ratings = pd.DataFrame([{**base, "annotator": "r1", "criterion": "empathy", "score": 4},
                            {**base, "annotator": "r1", "criterion": "fluency", "score": 5},
                            {**base, "annotator": "r2", "assignment_id": 2, "criterion": "empathy", "score": 2},
                            {**base, "annotator": "r2", "assignment_id": 2, "criterion": "fluency", "score": 5}])
    checks = control_checks(ratings)
    assert checks["high"].tolist() == [True, False] and flagged_by_controls(checks) == ["r1"]


def test_length_latency_and_failures_by_hand():
    conversations = validate_table("conversations", make_study(n_raters=3, failing=frozenset({(1, "beta"),
                                                                                                (2, "beta")}))
                                   ["conversations"])
    length = length_latency(conversations).set_index("system")
    assert length.loc["beta", ["ended", "failed", "open"]].tolist() == [1, 2, 0]
    assert length.loc["beta", "failure_rate"] == pytest.approx(2 / 3)
    assert length.loc["alpha", "failure_rate"] == 0 and length.loc["alpha", "utterances_mean"] == 6
    assert length.loc["beta", ["failure_ci_low", "failure_ci_high"]].tolist() == pytest.approx(
        list(wilson_interval(2, 3)))
    kept = conversations.loc[conversations["system"] == "alpha"]
    assert length.loc["alpha", "latency_mean_ms"] == pytest.approx(kept["mean_latency_ms"].mean())
    assert failure_reasons(conversations).values.tolist() == [["beta", "timeout", 2]]


@pytest.mark.parametrize("name, change, column, why", [
    ("chat", {"score": "4.5"}, "score", "is '4.5'; expected a whole number"),
    ("chat", {"is_control": "perhaps"}, "is_control", "is 'perhaps'; expected true or false"),
    ("chat", {"annotator": " "}, "annotator", "is empty; every row needs one"),
    ("conversations", {"state": "paused"}, "state", "is 'paused'; expected one of open, ended, failed"),
    ("conversations", {"mean_latency_ms": "-3"}, "mean_latency_ms", "is '-3'; expected a number of at least 0"),
    ("turns", {"speaker": "rater"}, "speaker", "is 'rater' but index 1 is odd; even indices are the rater's"),
    ("turns", {"created_at": "yesterday"}, "created_at", "is 'yesterday'; expected an ISO-8601 timestamp"),
    ("turns", {"parameters": "{oops"}, "parameters", "is '{oops'; expected JSON text"),
    ("turn_annotations", {"index": "2"}, "index", "is 2; annotations are about the system's turns"),
])
def test_a_malformed_export_file_is_refused_naming_line_and_column(tmp_path, name, change, column, why):
    frame = make_study(n_raters=2)[name].astype(object).head(3).copy()
    for key, value in change.items():
        frame.loc[1, key] = value
    path = tmp_path / f"{name}.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(ChatExportError, match=f"^{re.escape(str(path))}: line 3, column {column!r} "
                                              f"{re.escape(why)}"):
        read_chat_file(path, name)
    records = [{k: (None if v == "" else v) for k, v in row.items()} for row in frame.to_dict("records")]
    jsonl = tmp_path / f"{name}.jsonl"
    jsonl.write_text("\n".join(json.dumps(r, default=str) for r in records) + "\n")
    with pytest.raises(ChatExportError, match=f"line 2, column {column!r}"):
        read_chat_file(jsonl, name)


def test_the_reader_refuses_missing_columns_duplicates_and_unknown_formats(tmp_path):
    chat = make_study(n_raters=2)["chat"]
    chat.drop(columns=["utterances"]).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(ChatExportError, match="missing column\\(s\\) 'utterances'; the chat 'chat' table has: study"):
        analysis_kind("chat").read_export(tmp_path / "a.csv")
    pd.concat([chat.head(2), chat.head(1)]).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ChatExportError, match="line 2 and line 4 hold the same rating"):
        read_chat_file(tmp_path / "b.csv")
    (tmp_path / "c.jsonl").write_text('{"study": "x"}\n[1, 2]\n')
    with pytest.raises(ChatExportError, match="c.jsonl: line 2 is not a JSON object"):
        read_chat_file(tmp_path / "c.jsonl")
    (tmp_path / "d.xlsx").write_text("x")
    with pytest.raises(ChatExportError, match="unknown chat chat file format '.xlsx'"):
        read_chat_file(tmp_path / "d.xlsx")


def test_an_export_file_is_recognised_and_read_as_csv_or_json_lines(tmp_path):
    chat = make_study(n_raters=2)["chat"]
    chat.to_csv(tmp_path / "chat.csv", index=False)
    chat.to_json(tmp_path / "chat.jsonl", orient="records", lines=True)
    assert export_kind(tmp_path / "chat.csv").name == "chat"
    kind = analysis_kind("chat")
    assert kind.read_export(tmp_path / "chat.csv").equals(kind.read_export(tmp_path / "chat.jsonl"))
    assert not kind.recognises(CONVERSATION_COLUMNS) and not kind.recognises(TURN_ANNOTATION_COLUMNS)
    assert not kind.recognises(["item_id", "score", "criterion", "annotator"])


def test_the_report_builds_with_its_sections_in_order(tmp_path):
    request = ReportRequest(name="chat-pilot", kind="chat", table=make_study(planted="r3")["chat"],
                            meta={"criteria": list(CRITERIA), "scale": [1, 5], "turn_questions": list(QUESTIONS[:-1]),
                                  "chat": {"min_utterances": 4, "max_utterances": 8}},
                            tables={k: v for k, v in make_study(planted="r3").items() if k != "chat"}, latex=True)
    report = analysis_kind("chat").report(request)
    assert [section.name for section in report.sections] == list(SECTIONS)
    paths = write_report(report, tmp_path, latex=True)
    for name in ("chat_means", "chat_pairwise_tests", "chat_mixed_model", "chat_turn_annotation_rates",
                 "chat_length_latency", "chat_controls", "chat_control_checks"):
        assert f"table_{name}" in paths
    assert "figure_chat_means" in paths and "latex_chat_means" in paths
    markdown = paths["markdown"].read_text()
    assert "r3" in markdown and "Rashkin et al. 2019" in markdown and "Holm" in markdown and "model-chat" in markdown
    assert "Not computed" not in markdown
    lines = analysis_kind("chat").summary_lines(paths, CRITERIA)
    assert lines[0].startswith("mean conversation score per system") and lines[1].split()[0] == "empathy"
    assert lines[1].split()[1] == "alpha"  # best first


def test_a_report_from_the_chat_table_alone_notes_the_missing_tables(tmp_path):
    """As `empeval report` writes it from an export file (analysis.report.study), its summary lines read back."""
    make_study()["chat"].to_csv(tmp_path / "chat.csv", index=False)
    kind = export_kind(tmp_path / "chat.csv")
    request = ReportRequest(name="export", kind=kind.name, table=kind.read_export(tmp_path / "chat.csv"),
                            meta={"criteria": list(CRITERIA)})
    paths = report_study(request, tmp_path / "report")
    markdown = paths["markdown"].read_text()
    headings = [line for line in markdown.splitlines() if line.startswith("#")]
    assert headings[1:] == ["## Conversation ratings", "### Pairwise comparisons (unpaired)",
                            "### Mixed model: rater and prompt intercepts", "### Per-turn annotations",
                            "### Length, latency and model failures", "### Controls", "## Methods"]
    assert "Per-turn annotations\n\nNot computed: this report was given no **turn_annotations** table" in markdown
    assert "failures\n\nNot computed: this report was given no **conversations** table" in markdown
    assert report_summary_lines(paths)[1].split()[:2] == ["empathy", "alpha"]


def test_degenerate_studies_get_a_report_or_a_clear_refusal(tmp_path):
    def texts(report) -> dict[str, str]:
        return {s.name: " ".join(getattr(b, "text", "") for b in s.blocks) for s in report.sections}

    one_system = make_study(systems=("alpha",), control=None, criteria=("empathy",))
    text = texts(chat_report(one_system["chat"], name="one", tables=one_system))
    assert "only one system (alpha) was rated" in text["pairwise_tests"]
    assert "one system (alpha): nothing to compare" in text["mixed_model"]

    one_rater = make_study(n_raters=1, criteria=("empathy",))
    report = chat_report(one_rater["chat"], name="solo", tables=one_rater)
    assert "one rater (r1)" in texts(report)["mixed_model"]
    write_report(report, tmp_path / "solo")

    empty = make_study(n_raters=2)
    with pytest.raises(ReportRefused, match="study 'none' has no conversation ratings yet"):
        chat_report(empty["chat"].head(0), name="none", tables={"conversations": empty["conversations"].head(0)})
    with pytest.raises(ReportRefused, match="no conversation ratings yet"):
        chat_report(pd.DataFrame(), name="none")

    every = frozenset((a, s) for a in (1, 2) for s in ("alpha", "beta", "gamma", "ctrl"))
    failed = make_study(n_raters=2, failing=every)
    report = chat_report(failed["chat"], name="down", tables=failed)
    assert [section.name for section in report.sections] == list(SECTIONS)
    assert "Every conversation failed" in texts(report)["summary"]
    write_report(report, tmp_path / "down")

    late = make_study(n_raters=2)
    late["chat"]["late"] = True
    with pytest.raises(ReportRefused, match="submitted late"):
        chat_report(late["chat"], name="late", include_late=False)
    with pytest.raises(ChatExportError, match="column 'score' is 5; the study's scale runs from 1 to 4"):
        chat_report(make_study(n_raters=2)["chat"].assign(score=5), name="scale", meta={"scale": [1, 4]})
