"""Paper output (issue 30, item 6): the demo's LaTeX tables compile with pdflatex (where it is installed: Debian's
texlive-latex-base for pdflatex and texlive-latex-recommended for booktabs), numbers right-aligned, systems by their
display names and in one order (the study file's, or by mean when asked) in every table of both reports, criteria
in the study file's order, captions without placeholders."""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from empeval.analysis.kinds import ReportRequest, analysis_kind
from empeval.analysis.report.latex import escape
from empeval.analysis.report.study import report_study
from tests.analysis.latex_check import latex_problems, tabular_rows

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
NAMES = {"moel": "MoEL", "kemp": "KEMP", "mime": "MIME", "gold": "Human", "retrieval": "Retrieval_v1 & co"}
SYSTEMS = ["gold", "retrieval", "mime", "kemp", "moel"]  # the study file's order, not the alphabet's
CRITERIA = ["relevance", "empathy", "fluency"]
META = {"systems": SYSTEMS, "display_names": NAMES, "criteria": CRITERIA}
SHOWN = [NAMES[s] for s in SYSTEMS]


def _report(kind: str, export: Path, out: Path, meta: dict) -> dict[str, Path]:
    table = analysis_kind(kind).read_export(export)
    return report_study(ReportRequest(name=f"demo-{kind}", kind=kind, table=table, meta=meta, latex=True), out)


@pytest.fixture(scope="module")
def likert(tmp_path_factory) -> dict[str, Path]:
    return _report("likert", FIXTURES / "demo_export" / "demo.csv", tmp_path_factory.mktemp("likert"), META)


@pytest.fixture(scope="module")
def ab(tmp_path_factory) -> dict[str, Path]:
    return _report("pairwise", FIXTURES / "demo_ab_export" / "demo_ab.csv", tmp_path_factory.mktemp("ab"),
                   {**META, "anchor": "moel"})


def _spec(tex: str) -> str:
    found = re.search(r"\\begin\{tabular\}\{([^}]*)\}", tex)
    assert found is not None, tex
    return found.group(1)


def _markdown_tables(markdown: str) -> list[list[list[str]]]:
    """Every table of a report.md, as rows of cells (header first, the separator row left out)."""
    tables, current = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            if not re.fullmatch(r"\|[\s|:-]+\|", line):
                current.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    return tables


def test_the_main_table_right_aligns_its_numbers_and_names_systems_by_display_name(likert):
    tex = likert["latex_main_results"].read_text(encoding="utf-8")
    assert latex_problems(tex) == []
    assert _spec(tex) == "lrrrr"  # System left, n and the three criteria right
    header, *rows = tabular_rows(tex)
    assert header == ["System", "n", "Relevance", "Empathy", "Fluency"]
    assert [row[0] for row in rows] == [escape(name) for name in SHOWN]
    assert r"Retrieval\_v1 \& co" in tex and "retrieval &" not in tex


def test_the_ab_table_right_aligns_its_numbers_and_has_no_placeholder_in_its_caption(ab):
    tex = ab["latex_ab_table"].read_text(encoding="utf-8")
    assert latex_problems(tex) == []
    header, *rows = tabular_rows(tex)
    spec = dict(zip(header, _spec(tex), strict=True))
    assert {column: spec[column] for column in ("Criterion", "Pair", "sig.")} == dict.fromkeys(
        ("Criterion", "Pair", "sig."), "l")
    assert all(spec[column] == "r" for column in ("Win \\%", "Lose \\%", "Tie \\%", "judgments", "p adj."))
    found = re.search(r"\\caption\{(.*)\}", tex)
    assert found is not None
    caption = found.group(1)
    assert "(description)" not in caption and not re.search(r"TODO|XXX|\{\}|<[a-z_]+>", caption)
    # The anchor first, then the other systems in the study file's order, criteria in the study file's order.
    assert [row[1] for row in rows] == [f"MoEL vs {escape(name)}" for name in SHOWN if name != "MoEL"] * 3
    assert [row[0] for row in rows[::4]] == CRITERIA


def test_every_likert_table_lists_the_systems_in_the_study_files_order(likert):
    markdown = likert["markdown"].read_text(encoding="utf-8")
    for table in _markdown_tables(markdown):
        header = table[0]
        if "System" in header:
            column = header.index("System")
            named = [row[column] for row in table[1:] if row[column] in SHOWN]
            order = [s for s in SHOWN if s in named]
            if "Criterion" in header:  # one block per criterion, each in the one order
                for criterion in CRITERIA:
                    block = [row[column] for row in table[1:] if row[header.index("Criterion")] == criterion]
                    assert block == [s for s in SHOWN if s in block], (header, criterion)
            else:
                assert named == order, header
    rank = {name: place for place, name in enumerate(SHOWN)}
    pair_tables = [table for table in _markdown_tables(markdown) if "Pair (a vs b)" in table[0]]
    assert len(pair_tables) >= 2
    for table in pair_tables:
        at_criterion, at_pair = table[0].index("Criterion"), table[0].index("Pair (a vs b)")
        for name in CRITERIA:
            places = [tuple(rank[s] for s in row[at_pair].split(" vs ")) for row in table[1:]
                      if row[at_criterion] == name]
            assert places == sorted(places), (table[0], name)
    methods = markdown.split("## Methods", 1)[1]
    assert ", ".join(SHOWN) in methods
    assert "the study file's order" in markdown


def test_the_likert_report_orders_criteria_as_the_study_file_does(likert):
    markdown = likert["markdown"].read_text(encoding="utf-8")
    for table in _markdown_tables(markdown):
        if "Criterion" in table[0]:
            seen = list(dict.fromkeys(row[table[0].index("Criterion")] for row in table[1:]))
            assert seen == [c for c in CRITERIA if c in seen], table[0]
        for key in ("Control targets", "built to fail"):
            if key in table[0]:
                seen = [row[table[0].index(key)] for row in table[1:]]
                assert seen == [c for c in CRITERIA if c in seen], table[0]
        columns = [c.lower() for c in table[0] if c.lower() in CRITERIA]
        assert columns == [c for c in CRITERIA if c in columns], table[0]


def test_asked_for_the_mean_order_every_table_follows_it(tmp_path):
    paths = _report("likert", FIXTURES / "demo_export" / "demo.csv", tmp_path / "r", {**META, "system_order": "mean"})
    means = pd.read_csv(paths["table_system_means"])
    overall = means.groupby("system")["mean"].mean().sort_values(ascending=False)
    header, *rows = tabular_rows(paths["latex_main_results"].read_text(encoding="utf-8"))
    assert [row[0] for row in rows] == [escape(s) for s in overall.index]
    assert "best mean over the criteria first" in paths["markdown"].read_text(encoding="utf-8")


def test_an_unknown_order_is_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="system_order is 'alphabet'"):
        _report("likert", FIXTURES / "demo_export" / "demo.csv", tmp_path / "r", {**META, "system_order": "alphabet"})


@pytest.mark.skipif(shutil.which("pdflatex") is None,
                    reason="pdflatex is not installed (Debian: texlive-latex-base and texlive-latex-recommended)")
def test_the_demos_latex_tables_compile_with_pdflatex(likert, ab, tmp_path):
    tables = [path for paths in (likert, ab) for name, path in paths.items() if name.startswith("latex_")]
    assert {path.name for path in tables} >= {"main_results.tex", "ab_table.tex"}
    inputs = "\n".join(rf"\input{{{path.as_posix()}}}" for path in tables)
    (tmp_path / "paper.tex").write_text(
        "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + inputs + "\n\\end{document}\n",
        encoding="utf-8")
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    log = (tmp_path / "paper.log").read_text(encoding="utf-8", errors="replace")
    assert run.returncode == 0, log[-3000:]
    assert (tmp_path / "paper.pdf").stat().st_size > 0
    assert "Missing character" not in log and "Undefined control sequence" not in log


def test_the_icc_is_estimated_after_excluding_flagged_raters_and_the_note_says_on_what(likert):
    markdown = likert["markdown"].read_text(encoding="utf-8")
    assert "flagged annotators excluded" in markdown  # the demo's flagged raters leave items with 2 or 3 ratings
    agreement = pd.read_csv(likert["table_agreement"])
    icc = agreement.loc[(agreement["coefficient"] == "icc") & (agreement["system"] == "(all)")]
    assert len(icc) == 3 and icc["estimate"].between(-1, 1).all() and (icc["ci_low"] < icc["ci_high"]).all()
    icc_row = next(table for table in _markdown_tables(markdown) if table[0][0] == "Coefficient" and any(
        row[0] == "ICC" for row in table[1:]))
    assert all(re.fullmatch(r"-?\d\.\d\d \[-?\d\.\d\d, -?\d\.\d\d\]", cell)
               for row in icc_row[1:] if row[0] == "ICC" for cell in row[1:])
    for criterion in CRITERIA:
        assert re.search(rf"- ICC, {criterion}: ICC\(1,1\), one-way design, k = \d ratings per item; unbalanced "
                         r"design \(\d to \d ratings per item\): on its largest balanced subset, \d+ of \d+ items",
                         markdown)


def test_the_ab_methods_paragraph_gives_the_numbers_of_its_tables(ab):
    methods = ab["markdown"].read_text(encoding="utf-8").split("## Methods", 1)[1]
    export = pd.read_csv(FIXTURES / "demo_ab_export" / "demo_ab.csv")
    real = export.loc[~export["is_control"]]
    assert (f"We collected {len(export)} choices on 3 criteria (relevance, empathy, fluency) for "
            f"{len(export.drop_duplicates(['assignment_id', 'context_id', 'pair']))} shown pairs") in methods
    assert (f"over {real['context_id'].nunique()} dialogue contexts and 5 systems ({', '.join(SHOWN)}), from "
            f"{export['annotator'].nunique()} annotators in {export['assignment_id'].nunique()} assignments") in methods
    table = pd.read_csv(ab["table_ab_table"])
    assert f"Of the {len(table)} comparisons (4 pairs of systems × 3 criteria), {int(table['significant'].sum())} " \
           "differed significantly (p adj. < 0.05): relevance: Human over MoEL" in methods
    agreement = pd.read_csv(ab["table_choice_agreement"]).set_index(["criterion", "coefficient"])
    alphas = "; ".join(f"{c} {agreement.loc[(c, 'krippendorff_alpha'), 'estimate']:.2f} "
                       f"[{agreement.loc[(c, 'krippendorff_alpha'), 'ci_low']:.2f}, "
                       f"{agreement.loc[(c, 'krippendorff_alpha'), 'ci_high']:.2f}] "
                       f"({int(agreement.loc[(c, 'krippendorff_alpha'), 'units'])} units)" for c in CRITERIA)
    assert f"Krippendorff's α (nominal) {alphas} (95% percentile bootstrap intervals over units" in methods
    pooled = pd.read_csv(ab["table_position_bias"]).set_index("criterion").loc["all"]
    assert (f"a share of {pooled['share_left']:.2f} [{pooled['ci_low']:.2f}, {pooled['ci_high']:.2f}] of "
            f"{int(pooled['decisive'])} decisive shown pairs went to the left") in methods
    controls = pd.read_csv(ab["table_control_pairs"])
    assert f"passed in {controls['passed'].sum()} of {controls['controls'].sum()} judgments" in methods
