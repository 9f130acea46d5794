"""Paper output for the chat, ACUTE and best-worst reports (issue 30, item 6): every table, CSV, LaTeX table and
sentence names a system by its display name (meta "display_names", as `empeval report` passes it from systems.toml),
never by its key; the LaTeX tables right-align their numbers and escape the names."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from empeval.analysis.kinds import LinkedStudy, ReportRequest
from empeval.analysis.kinds.best_worst.part import best_worst_report
from empeval.analysis.report.latex import escape
from empeval.analysis.report.sections import write_report
from empeval.analysis.report.study import report_study
from empeval.analysis.simulate.best_worst import simulate_best_worst_study
from tests.analysis.latex_check import latex_problems, tabular_rows
from tests.analysis.test_acute_analysis import with_controls
from tests.analysis.test_chat_analysis import make_study

SYSTEM_COLUMNS = ("system", "system_a", "system_b", "System")


def _report(tmp_path: Path, kind: str, table: pd.DataFrame, names: dict[str, str], **extra) -> dict[str, Path]:
    request = ReportRequest(name=f"demo-{kind}", kind=kind, table=table, latex=True,
                            meta={"display_names": names, **extra.pop("meta", {})}, **extra)
    return report_study(request, tmp_path / kind)


def _systems_in_csvs(paths: dict[str, Path]) -> set[str]:
    """Every value of a system column in the report's CSVs (pairs split into their two systems)."""
    found: set[str] = set()
    for key, path in paths.items():
        if key.startswith("table_"):
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            for column in (c for c in SYSTEM_COLUMNS if c in frame.columns):
                found |= {value for value in frame[column] if value and value != "tie"}
    return found


def _spec(tex: str) -> str:
    found = re.search(r"\\begin\{tabular\}\{([^}]*)\}", tex)
    assert found is not None, tex
    return found.group(1)


def _check_latex(tex: str, number_columns: tuple[str, ...], shown: set[str]) -> None:
    assert latex_problems(tex) == []
    header, *rows = tabular_rows(tex)
    spec = dict(zip(header, _spec(tex), strict=True))
    assert all(spec[escape(column)] == "r" for column in number_columns), spec
    cells = " ".join(cell for row in rows for cell in row)
    assert any(escape(name) in cells for name in shown), cells


@pytest.mark.parametrize("kind", ["chat", "acute", "best_worst"])
def test_every_table_and_sentence_names_systems_by_display_name_and_latex_right_aligns_numbers(kind, tmp_path):
    if kind == "chat":
        names = {"alpha": "Alpha_v1 & co", "beta": "Beta", "gamma": "Gamma", "ctrl": "Control"}
        paths = _report(tmp_path, kind, make_study(planted="r3")["chat"], names)
        number_columns: tuple[str, ...] = ("Mean", "SD")
        latex = "latex_chat_means"
    elif kind == "acute":
        names = {"a": "System A_1 & co", "b": "System B", "ctrl": "Control"}
        chat = pd.DataFrame({"system": ["a", "a", "b", "b", "ctrl"], "criterion": "empathy",
                             "score": [5, 4, 2, 3, 1], "is_control": [False, False, False, False, True]})
        paths = _report(tmp_path, kind, with_controls(), names, meta={"controls": ["ctrl"], "criteria": ["empathy"]},
                        linked=[LinkedStudy("talk", "chat", False, chat)])
        number_columns = ("Win %", "Lose %", "p adj.")
        latex = "latex_acute_ab_table"
        # The control pairs still flag r3 (the controls are found under their display name too).
        assert "Flagged (control pairs passed less than 50% of the time): r3" in paths["markdown"].read_text()
        assert set(pd.read_csv(paths["table_acute_beside_chat"])["system"]) == {"System A_1 & co", "System B"}
    else:
        names = {"moel": "MoEL_v2 & co", "gold": "Human", "baseline": "Baseline"}
        # The kind's report function itself, for fewer resamples than `empeval report`'s (the same code path).
        report = best_worst_report(simulate_best_worst_study(n_contexts=12, seed=7).choices, name="bws",
                                   meta={"display_names": names}, n_boot=50, n_splits=5)
        paths = write_report(report, tmp_path / kind, latex=True)
        number_columns = ("Best - worst (pp)", "Best %", "Worst %")
        latex = "latex_bws_scores"
    keys = {key for key in names if len(key) > 1}  # (the key "a" is also a word of the sentences)
    found = _systems_in_csvs(paths)
    assert found and found <= set(names.values()), found - set(names.values())
    markdown = paths["markdown"].read_text(encoding="utf-8")
    words = set(re.findall(r"[A-Za-z_][\w-]*", markdown))
    assert not keys & words, keys & words
    _check_latex(paths[latex].read_text(encoding="utf-8"), number_columns, set(names.values()))
