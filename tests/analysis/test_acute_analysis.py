"""The ACUTE-Eval analysis is the A/B kind's, over pairs of conversations: win rates, the per-pair sign test, the
Bradley-Terry ranking and position bias against small studies counted by hand; the control pairs flag a careless
rater and the report leaves her out; the contract refuses what is not an ACUTE table; the report's sections, its
files and summary lines; the linked chat study beside it, and the ACUTE study's win table in the chat report."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import empeval.analysis.kinds.registered  # noqa: F401 (every kind in registration order, before this one's part)
from empeval.analysis.kinds import LinkedStudy, ReportRequest, analysis_kind
from empeval.analysis.kinds.acute.part import acute_tables
from empeval.analysis.kinds.acute.schema import (
    ACUTE_COLUMNS,
    AcuteExportError,
    acute_rows,
    judgment_view,
    validate_acute,
)
from empeval.analysis.kinds.pairwise.schema import JudgmentError
from empeval.analysis.report.study import report_study, report_summary_lines

# --- two systems, six pairs of conversations, three raters each -------------------------------------------------
# Pairs 1-4: r1 and r2 pick a, r3 picks b; pair 5: all pick a; pair 6: all pick b. r1 always sees a on the left, r2
# always on the right, r3 on the left in the odd pairs.
PICKS = {1: "aab", 2: "aab", 3: "aab", 4: "aab", 5: "aaa", 6: "bbb"}


def two_systems() -> pd.DataFrame:
    rows = []
    for pair, picks in PICKS.items():
        for r, pick in enumerate(picks):
            a_left = r == 0 or (r == 2 and pair % 2 == 1)
            left, right = ("a", "b") if a_left else ("b", "a")
            choice = "left" if pick == left else "right"
            talks = (2 * pair, 2 * pair + 1) if a_left else (2 * pair + 1, 2 * pair)
            rows += acute_rows([(pair, talks[0], left, 40 + pair, talks[1], right, 40 + pair, choice, f"r{r + 1}")],
                               assignment_id=10 * (r + 1) + pair)
    return pd.DataFrame(rows)


def test_win_rates_and_the_per_pair_sign_test_by_hand():
    ab = acute_tables(two_systems(), n_boot=20).pairwise.ab.iloc[0]
    assert (ab["system_a"], ab["system_b"], ab["judgments"]) == ("a", "b", 18)
    assert (ab["wins"], ab["losses"], ab["ties"]) == (11, 7, 0)  # 4 x 2 + 3 picks of a
    assert ab["win_pct"] == pytest.approx(100 * 11 / 18) and ab["lose_pct"] == pytest.approx(100 * 7 / 18)
    # Per pair of conversations: a wins pairs 1-5 on balance, b pair 6: P = 2 (1 + 6) / 2**6.
    assert (ab["contexts_won"], ab["contexts_lost"], ab["contexts_even"]) == (5, 1, 0)
    assert ab["p"] == pytest.approx(14 / 64) and ab["p_adj"] == pytest.approx(14 / 64)
    assert ab["contexts"] == 6 and ab["annotators"] == 3


def test_position_bias_by_hand():
    # Left picks: r1 picks a (left) in pairs 1-5; r2 picks b (left) in pair 6; r3 picks the left one in pairs 2, 4
    # (b on the left), 5 (a on the left) and 6 (b on the left): 5 + 1 + 4 = 10 of 18.
    position = acute_tables(two_systems(), n_boot=20).pairwise.position.set_index("criterion")
    test = stats.binomtest(10, 18)
    interval = test.proportion_ci(method="exact")
    for row in ("empathy", "all"):
        assert (position.loc[row, "decisive"], position.loc[row, "left"]) == (18, 10)
        assert position.loc[row, "share_left"] == pytest.approx(10 / 18)
        assert position.loc[row, "p"] == pytest.approx(test.pvalue)
        assert (position.loc[row, "ci_low"], position.loc[row, "ci_high"]) == pytest.approx(
            (interval.low, interval.high))


def test_agreement_counts_pairs_of_conversations_as_its_units():
    agreement = acute_tables(two_systems(), n_boot=20).pairwise.agreement.set_index("coefficient")
    assert agreement.loc["fleiss_kappa", "units"] == 6 and agreement.loc["fleiss_kappa", "ratings_per_unit"] == 3
    # Fleiss by hand: P_i = 1/3 for pairs 1-4, 1 for pairs 5 and 6; P-bar = 10/18; p_a = 11/18, p_b = 7/18.
    p_bar, p_e = (4 / 3 + 2) / 6, (11 / 18) ** 2 + (7 / 18) ** 2
    assert agreement.loc["fleiss_kappa", "estimate"] == pytest.approx((p_bar - p_e) / (1 - p_e))


# --- three systems: the Bradley-Terry estimate known in closed form ----------------------------------------------
# a beats b in 3 of 4 pairs, b beats c in 3 of 4, a beats c in 9 of 10: the likelihood equations hold at log
# strengths (ln 3, 0, -ln 3), since sigma(ln 3) = 3/4 and sigma(2 ln 3) = 9/10.
MATCHES = [("a", "b", 3, 1), ("b", "c", 3, 1), ("a", "c", 9, 1)]


def three_systems() -> pd.DataFrame:
    specs, pair = [], 0
    for first, second, won, lost in MATCHES:
        for n in range(won + lost):
            pair += 1
            winner = first if n < won else second
            left, right = (first, second) if pair % 2 else (second, first)
            specs.append((pair, 100 + 2 * pair, left, pair, 101 + 2 * pair, right, pair,
                          "left" if winner == left else "right", f"r{pair % 5}"))
    return pd.DataFrame(acute_rows(specs))


def test_the_bradley_terry_ranking_is_the_closed_form_one_and_holm_adjusts_over_the_pairs_of_systems():
    tables = acute_tables(three_systems(), n_boot=200, seed=3).pairwise
    ranking = tables.ranking.set_index("system")
    assert ranking.loc[["a", "b", "c"], "rank"].tolist() == [1, 2, 3]
    assert ranking.loc[["a", "b", "c"], "strength"].tolist() == pytest.approx([math.log(3), 0, -math.log(3)],
                                                                               abs=1e-5)
    assert set(ranking["model"]) == {"bradley_terry"}  # no tie in ACUTE-Eval
    assert (ranking["ci_low"] <= ranking["strength"]).all() and (ranking["strength"] <= ranking["ci_high"]).all()
    assert "pairs of conversations" in tables.ranking_caption
    ab = tables.ab.set_index(["system_a", "system_b"])
    raw = {("a", "b"): 10 / 16, ("b", "c"): 10 / 16, ("a", "c"): 22 / 1024}  # sign tests of 3:1, 3:1 and 9:1
    assert {k: ab.loc[k, "p"] for k in raw} == pytest.approx(raw)
    assert ab.loc[("a", "c"), "p_adj"] == pytest.approx(3 * 22 / 1024)  # Holm: smallest times 3
    assert ab.loc[("a", "b"), "p_adj"] == ab.loc[("b", "c"), "p_adj"] == 1.0


# --- controls --------------------------------------------------------------------------------------------------

def with_controls() -> pd.DataFrame:
    """The two-system study, and each rater two control pairs (a vs the control): r1 and r2 pick a, "r3" picks the
    control both times on its target, empathy."""
    rows = list(two_systems().to_dict("records"))
    for r in range(3):
        for n in range(2):
            pick = "left" if r < 2 else "right"
            rows += acute_rows([(100 + 10 * r + n, 500 + 10 * r + n, "a", 60 + n, 700 + 10 * r + n, "ctrl", 60 + n,
                                 pick, f"r{r + 1}")], is_control=True, control_target="empathy",
                               assignment_id=10 * (r + 1) + 7)
    return pd.DataFrame(rows)


def test_the_control_pairs_flag_the_rater_who_picked_the_control_and_the_report_leaves_her_out():
    table = with_controls()
    assert analysis_kind("acute").flagged_raters(table, {"controls": ["ctrl"]}) == {"r3"}
    done = acute_tables(table, control_systems={"ctrl"}, n_boot=20)
    controls = done.pairwise.controls.set_index("annotator")
    assert controls["pass_rate"].to_dict() == {"r1": 1.0, "r2": 1.0, "r3": 0.0}  # every rater listed
    assert done.flagged == ["r3"]
    ab = done.pairwise.ab.iloc[0]
    assert (ab["judgments"], ab["wins"], ab["losses"]) == (12, 10, 2)  # r1 and r2 only
    kept = acute_tables(table, control_systems={"ctrl"}, exclude_flagged=False, n_boot=20).pairwise.ab.iloc[0]
    assert (kept["judgments"], kept["wins"]) == (18, 11)


# --- the contract ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, error, words", [
    (lambda r: r.update(choice="tie", preferred="tie"), AcuteExportError, "expected left or right"),
    (lambda r: r.update(same_prompt=False), AcuteExportError, "column 'same_prompt'"),
    (lambda r: r.update(context_id=999), AcuteExportError, "lower of context_left and context_right"),
    (lambda r: r.update(justification="   "), AcuteExportError, "column 'justification' is empty"),
    (lambda r: r.update(comparison_id="x"), AcuteExportError, "column 'comparison_id' is 'x'; expected a whole"),
    (lambda r: r.pop("justification"), AcuteExportError, "missing column(s) 'justification'"),
    (lambda r: r.update(preferred="b"), JudgmentError, "column 'preferred' is 'b'"),
])
def test_the_contract_refuses_what_is_not_an_acute_table(change, error, words):
    row = acute_rows([(1, 10, "a", 4, 11, "b", 4, "left")])[0]
    change(row)
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        validate_acute([row])


def test_one_rater_judging_one_pair_twice_is_refused_naming_the_pair():
    rows = acute_rows([(7, 10, "a", 4, 11, "b", 4, "left"), (7, 11, "b", 4, 10, "a", 4, "left")])
    with pytest.raises(AcuteExportError, match="annotator 'ann-1' judged pair of conversations 7 on 'empathy' more "
                                               r"than once \(rows 1, 2\)"):
        validate_acute(rows)


def test_the_judgment_view_is_the_ab_table_with_the_pair_as_its_unit():
    view = judgment_view(validate_acute(two_systems()))
    from empeval.analysis.kinds.pairwise.schema import JUDGMENT_COLUMNS

    assert list(view.columns) == list(JUDGMENT_COLUMNS)
    assert sorted(view["context_id"].unique()) == [1, 2, 3, 4, 5, 6]


# --- the report -----------------------------------------------------------------------------------------------

def test_the_report_has_its_sections_files_and_summary_lines_and_the_chat_study_beside_it(tmp_path):
    chat = pd.DataFrame({"system": ["a", "a", "b", "b", "ctrl"], "criterion": "empathy", "score": [5, 4, 2, 3, 1],
                         "is_control": [False, False, False, False, True]})
    request = ReportRequest(name="judge", kind="acute", table=with_controls(),
                            meta={"criteria": ["empathy"], "k": 3, "controls": ["ctrl"], "min_justification": 10},
                            linked=[LinkedStudy("talk", "chat", False, chat)])
    paths = report_study(request, tmp_path)
    report = analysis_kind("acute").report(request)
    assert [s.name for s in report.sections] == ["summary", "linked", "results", "controls", "justifications",
                                                 "methods"]
    text = paths["markdown"].read_text(encoding="utf-8")
    assert "pairs of conversations (won / lost / even)" in text and "Tie %" not in text
    assert "chat study **talk**" in text and "Flagged (control pairs passed less than 50% of the time): r3" in text
    assert "Examples for empathy:" in text and "Li, Weston & Roller 2019" in text
    beside = pd.read_csv(paths["table_acute_beside_chat"]).set_index("system")
    assert beside.loc["a", "chat mean (empathy)"] == 4.5 and beside.loc["b", "chat mean (empathy)"] == 2.5
    assert beside.loc["a", "picked % (empathy)"] == pytest.approx(100 * 10 / 12)  # r3 left out
    ab = pd.read_csv(paths["table_acute_ab_table"])
    assert ab.loc[0, "wins"] == 10
    assert report_summary_lines(paths)[1].startswith("  empathy    a vs b: win 83.3%  lose 16.7%")


def test_the_chat_report_shows_the_linked_acute_studys_win_table():
    from tests.analysis.test_chat_analysis import make_study

    chat = make_study(n_raters=4)
    request = ReportRequest(name="chat-pilot", kind="chat", table=chat["chat"],
                            meta={"criteria": ["empathy", "relevance", "fluency"]},
                            linked=[LinkedStudy("judge", "acute", True, with_controls()),
                                    LinkedStudy("later", "acute", True, None)])
    report = analysis_kind("chat").report(request)
    linked = next(s for s in report.sections if s.name == "linked_acute")
    from empeval.analysis.report.document import Paragraph, Table

    texts = [b.text for b in linked.blocks if isinstance(b, Paragraph)]
    assert any("**judge**" in t and "1 flagged by the control pairs and left out" in t for t in texts)
    assert any("**later**" in t and "has no choices yet" in t for t in texts)
    table = next(b.frame for b in linked.blocks if isinstance(b, Table))
    assert table.iloc[0]["Win %"] == "83.3" and table.iloc[0]["pairs of conversations (won / lost / even)"] == \
        "5 / 1 / 0"


def test_columns_are_the_ab_tables_and_its_own():
    from empeval.analysis.kinds.pairwise.schema import JUDGMENT_COLUMNS

    assert ACUTE_COLUMNS[:len(JUDGMENT_COLUMNS)] == JUDGMENT_COLUMNS
    assert {"comparison_id", "conversation_left", "conversation_right", "justification"} <= set(ACUTE_COLUMNS)
    assert np.isin(["comparison_id", "justification"], list(analysis_kind("acute").columns)).all()
