"""`--latex`: booktabs tables of the main results (and of the A/B table) that would compile: balanced environments
and braces, every row as wide as the header, LaTeX's special characters in system names escaped. No TeX is
installed here, so the check is structural (tests/analysis/latex_check.py)."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from click.testing import CliRunner

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.likert.report import write_report
from empeval.analysis.report.latex import booktabs, cell, escape
from empeval.analysis.simulate.likert import simulate_study
from empeval.cli import cli
from tests.analysis.latex_check import latex_problems, tabular_rows

HOSTILE = "moel_v2 & co #1 50% {x} ~^\\"


def test_special_characters_are_escaped_one_by_one():
    assert escape("a_b & c% #1 $5 {x} ~ ^ \\ < >") == (
        r"a\_b \& c\% \#1 \$5 \{x\} \textasciitilde{} \textasciicircum{} \textbackslash{} \textless{} "
        r"\textgreater{}")


def test_report_cells_keep_bold_and_the_significance_mark():
    assert cell("**4.10 [3.90, 4.30]**") == r"\textbf{4.10 [3.90, 4.30]}"
    assert cell("3.21 [2.98, 3.44] †") == r"3.21 [2.98, 3.44] \textsuperscript{\dag}"
    assert cell("Δ mean (a−b) – χ²") == r"$\Delta$ mean (a$-$b) -- $\chi$\textsuperscript{2}"


def test_a_table_is_a_booktabs_tabular_with_one_column_per_header_cell():
    frame = pd.DataFrame({"System": [HOSTILE, "[gold]"], "n": ["3 (9)", "3 (9)"], "Empathy": ["**4.00**", "3.00 †"]})
    tex = booktabs(frame, caption="Means & CIs (100%)", label="tab:main results")
    assert latex_problems(tex) == []
    header, *rows = tabular_rows(tex)
    assert header == ["System", "n", "Empathy"] and len(rows) == 2
    assert rows[0][0] == escape(HOSTILE)
    assert "{}[gold]" in tex  # a row starting with "[" is not read as the optional argument of the "\\" before it
    assert r"\caption{Means \& CIs (100\%)}" in tex and r"\label{tab:main-results}" in tex
    assert tex.index(r"\toprule") < tex.index(r"\midrule") < tex.index(r"\bottomrule")


def test_the_structure_check_catches_what_would_not_compile():
    good = booktabs(pd.DataFrame({"a": ["1"], "b": ["2"]}))
    assert latex_problems(good.replace(r"\end{tabular}", "")) != []
    assert latex_problems(good.replace("1 & 2", "1 & 2 & 3")) != []
    assert latex_problems(good.replace("1 & 2", "1_x & 2")) != []
    assert latex_problems(good.replace("1 & 2", "{1 & 2")) != []


@pytest.fixture(scope="module")
def hostile_study(tmp_path_factory):
    study = simulate_study(n_contexts=10, n_honest=5, n_random_clickers=0, n_straight_liners=0, seed=2)
    ratings = tidy_from_export(study.export)
    ratings["system"] = ratings["system"].replace({"moel": HOSTILE})
    return ratings, tmp_path_factory.mktemp("latex")


def test_write_report_with_latex_writes_the_main_results_table(hostile_study):
    ratings, folder = hostile_study
    paths = write_report(ratings, folder / "with", n_boot=50, latex=True,
                         study_meta={"criteria": ["empathy", "relevance", "fluency"]})
    tex = paths["latex_main_results"].read_text(encoding="utf-8")
    assert latex_problems(tex) == []
    header, *rows = tabular_rows(tex)
    assert header == ["System", "n", "Empathy", "Relevance", "Fluency"]
    assert sorted(row[0] for row in rows) == sorted(escape(s) for s in ratings["system"].unique()
                                                   if not s.startswith("control"))
    assert re.search(r"\\textbf\{\d\.\d\d \[\d\.\d\d, \d\.\d\d\]\}", tex)
    without = write_report(ratings, folder / "without", n_boot=50)
    assert not any(key.startswith("latex_") for key in without) and not (folder / "without" / "latex").exists()


def test_the_report_command_writes_latex_of_an_export(tmp_path):
    study = simulate_study(n_contexts=8, n_honest=4, n_random_clickers=0, n_straight_liners=0, seed=5)
    export = tmp_path / "pilot.csv"
    study.export.to_csv(export, index=False)
    result = CliRunner().invoke(cli, ["report", "pilot", "--export", str(export), "--out", str(tmp_path / "r"),
                                      "--latex"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "r" / "latex" / "main_results.tex"
    assert f"latex: {path}" in result.output
    assert latex_problems(path.read_text(encoding="utf-8")) == []
    # An export does not carry its study's order: the default study file's (empathy, relevance, fluency).
    assert tabular_rows(path.read_text(encoding="utf-8"))[0][2:] == ["Empathy", "Relevance", "Fluency"]


def test_a_pairwise_report_with_latex_writes_the_ab_table(tmp_path):
    from empeval.analysis.kinds.pairwise.blocks import ab_display
    from empeval.analysis.kinds.pairwise.part import pairwise_report
    from empeval.analysis.report.sections import write_report
    from empeval.analysis.simulate.pairwise import simulate_pairwise_study

    judgments = simulate_pairwise_study(n_contexts=8, anchor="moel", seed=3).judgments
    renamed = {"gold": "gold_v2 & co"}  # sorts where "gold" does, so every pair label keeps its order
    judgments = judgments.assign(**{column: judgments[column].replace(renamed)
                                    for column in ("system_left", "system_right", "preferred")},
                                 pair=judgments["pair"].str.replace("gold", "gold_v2 & co", regex=False))
    paths = write_report(pairwise_report(judgments, name="ab", focus="moel", n_boot=20), tmp_path, latex=True)
    tex = paths["latex_ab_table"].read_text(encoding="utf-8")
    assert latex_problems(tex) == []
    header, *rows = tabular_rows(tex)
    shown = ab_display(pd.read_csv(paths["table_ab_table"]))
    assert header == [cell(c) for c in shown.columns] and len(rows) == len(shown)
    assert any(r"gold\_v2 \& co" in row[1] for row in rows)
    assert r"\label{tab:ab}" in tex
