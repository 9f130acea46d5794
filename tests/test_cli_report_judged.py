"""`empeval report STUDY --judge NAME`: the model-assisted section on a real SQLite study (the bundled ED sample,
three systems) rated by simulated raters through the real hand-out and submit, part of its contexts only, and
scored by the length judge with `empeval judge`. The section's PPI figures are analysis.stats.ppi.estimates' own
on the same ratings; the judge-only column says it is biased; the calibration figure is written; a judge failure
stops the report (exit 2, nothing written) unless --allow-missing, which drops and counts it; a learned judge
(scores with folds) is estimated by cross-PPI; without --judge the report is what it was."""
from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.stats.ppi.estimates import ppi_paired_differences, ppi_system_means
from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.export import export_rows
from empeval.server.annotation.handout import assignment_payload, next_assignment
from empeval.server.annotation.submission import submit_assignment
from empeval.server.backend.judges.scores import judge_scores
from empeval.server.store import make_engine, unit_of_work
from empeval.server.store.models import JudgeScore
from tests.annotation.conftest import add_responses, make_study, new_submission_id
from tests.backend.test_judge_store import SYSTEMS, TEXTS
from tests.conftest import sample_store_copy

QUALITY = {"sys-terse": 2.0, "sys-plain": 3.0, "sys-warm": 3.8}
N_ASSIGNMENTS = 5  # 30 of the 48 items rated once; the design (k = 2) holds 16 assignments


def warmth(context_id: int) -> int:
    """How many words of sympathy a response to this context adds: what the length judge sees and, in part,
    what the simulated raters reward."""
    return context_id % 5


def judged_store(path, *, contexts: int = 16):
    """A SQLite store with the ED sample's test split, three systems whose responses grow longer with
    warmth(context), and a Likert study `pilot` over `contexts` contexts (no controls, k = 2, 6 items each)."""
    engine = sample_store_copy(f"sqlite:///{path}")
    add_responses(engine, SYSTEMS, 40, text=lambda system, context_id: TEXTS[system]
                  + " I am truly so sorry." * warmth(context_id))
    make_study(engine, name="pilot", count=contexts, k=2, per_assignment=6, systems=SYSTEMS, controls=[])
    return engine


def simulate_raters(engine, *, n_raters: int = 12, seed: int = 7) -> None:
    """Raters with their own severity take assignments through the hand-out in turn and submit a rating of
    every item (the system's quality, the response's context, the rater's severity, noise), until
    N_ASSIGNMENTS are submitted."""
    rng = random.Random(seed)
    raters = [(invite(engine, f"rater-{i}", "pilot")[0].id, rng.gauss(0, 0.4)) for i in range(n_raters)]
    submitted = 0
    while submitted < N_ASSIGNMENTS:
        progressed = False
        for annotator_id, severity in raters:
            if submitted == N_ASSIGNMENTS:
                break
            assignment_id = next_assignment(engine, "pilot", annotator_id)
            if assignment_id is None:
                continue
            ratings = []
            for item in assignment_payload(engine, assignment_id)["items"]:
                system, context_id = item_system(engine, item["item_id"])
                quality = QUALITY[system] + 0.3 * warmth(context_id) - 0.6
                scores = {criterion: int(np.clip(round(quality + severity + rng.gauss(0, 0.5)), 1, 5))
                          for criterion in ("empathy", "relevance", "fluency")}
                ratings.append({"item_id": item["item_id"], "seconds": 10.0 + rng.random() * 10, "scores": scores})
            submit_assignment(engine, assignment_id, annotator_id,
                              {"submission_id": new_submission_id(), "ratings": ratings})
            submitted += 1
            progressed = True
        assert progressed, "the study ran out of work before N_ASSIGNMENTS"


def item_system(engine, item_id: int) -> tuple[str, int]:
    """The system and context of a study item."""
    from empeval.server.store.kinds.likert import StudyItem
    from empeval.server.store.models import Response, System

    with unit_of_work(engine) as session:
        row = session.execute(select(System.name, Response.context_id).join(Response, Response.system_id == System.id)
                              .join(StudyItem, StudyItem.response_id == Response.id)
                              .where(StudyItem.id == item_id)).one()
    return row[0], int(row[1])


@pytest.fixture(scope="module")
def rated_store(tmp_path_factory):
    """A study of 16 contexts x 3 systems, two thirds of it rated, scored by the length judge (a copy per test:
    some tests write to it)."""
    path = tmp_path_factory.mktemp("judged") / "study.db"
    engine = judged_store(path, contexts=16)
    simulate_raters(engine)
    engine.dispose()
    url = f"sqlite:///{path}"
    scored = run(url, "judge", "pilot", "--judges", "length")
    assert scored.exit_code == 0, scored.output
    return path


@pytest.fixture
def store(rated_store, tmp_path):
    copy = tmp_path / "copy.db"
    for suffix in ("", "-wal", "-shm"):  # the store is in WAL mode: recent writes may sit in its -wal file
        source = rated_store.with_name(rated_store.name + suffix)
        if source.exists():
            copy.with_name(copy.name + suffix).write_bytes(source.read_bytes())
    return f"sqlite:///{copy}"


def run(url: str, *args: str):
    return CliRunner().invoke(cli, ["--database-url", url, *args])


def section(markdown: str) -> str:
    return markdown.split("\n## Model-assisted estimates", 1)[1].split("\n## Methods", 1)[0]


def table_rows(text: str, caption_start: str) -> list[list[str]]:
    """The rows of the Markdown table whose caption starts with ``caption_start``, as cells."""
    after = text.split(f"*{caption_start}", 1)[1]
    lines = [line for line in after.split("\n\n", 2)[1].splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def analysed_ratings(url: str) -> pd.DataFrame:
    """The study's ratings as the report analyses them (nobody is flagged by these raters: checked below)."""
    engine = make_engine(url)
    try:
        ratings = tidy_from_export(pd.DataFrame(export_rows(engine, "pilot")))
    finally:
        engine.dispose()
    return ratings.rename(columns={"context": "context_id", "assignment": "assignment_id"})


def stored_scores(url: str, judge: str = "length") -> pd.DataFrame:
    engine = make_engine(url)
    try:
        scores = judge_scores(engine, "pilot", judge)
    finally:
        engine.dispose()
    return scores.assign(context_id=scores["context_id"].astype(str))


@pytest.mark.slow  # writes a whole report: 7-13 s
def test_the_section_shows_analysis_judged_estimates_figures(store, tmp_path):
    out = tmp_path / "report"
    result = run(store, "report", "pilot", "--out", str(out), "--judge", "length", "--latex", "--n-boot", "100")
    assert result.exit_code == 0, result.output
    tex = (out / "latex" / "judge_means.tex").read_text()
    assert r"\label{tab:judge-means}" in tex and "judge-only mean (biased)" in tex and r"$\lambda$" in tex
    assert f"latex: {out / 'latex' / 'judge_means.tex'}" in result.output
    lines = result.output.splitlines()
    start = lines.index("model-assisted mean per system (PPI++; effective human-rated contexts in brackets):")
    assert [line.split()[0] for line in lines[start + 1:start + 4]] == ["empathy", "relevance", "fluency"]
    markdown = (out / "report.md").read_text()
    assert "flagged annotators excluded" not in markdown  # the ratings compared below are the analysed ones
    text = section(markdown)
    ratings, scores = analysed_ratings(store), stored_scores(store)
    expected = ppi_system_means(ratings, scores)
    assert set(expected["n_judge_only"]) != {0} and (expected["n_human"] >= 2).all()  # a real PPI design
    rows = table_rows(text, "Mean label per system")
    header, body = rows[0], rows[2:]
    assert header == ["Criterion", "System", "n human-rated", "n judge-only", "human-only mean [CI]",
                      "judge-only mean (biased)", "PPI++ mean [CI]", "λ", "effective n human"]
    assert len(body) == len(expected) == 9
    shown = {(row[0], row[1]): row for row in body}
    for row in expected.itertuples():
        cells = shown[(row.criterion, row.system)]
        assert cells[2] == str(row.n_human) and cells[3] == str(row.n_judge_only)
        assert cells[4] == f"{row.human_mean:.2f} [{row.human_ci_low:.2f}, {row.human_ci_high:.2f}]"
        assert cells[5] == f"{row.judge_mean_biased:.2f}"
        assert cells[6] == f"{row.ppi_mean:.2f} [{row.ppi_ci_low:.2f}, {row.ppi_ci_high:.2f}]"
        assert cells[7] == f"{row.lam:.2f}" and cells[8] == f"{row.effective_n_human:.0f}"
        assert f"{row.system} {row.ppi_mean:.2f} ({row.effective_n_human:.0f})" in lines[start + 1 + [
            "empathy", "relevance", "fluency"].index(row.criterion)]
    written = pd.read_csv(out / "tables" / "judge_means.csv")
    np.testing.assert_allclose(written["ppi_ci_low"], expected["ppi_ci_low"], atol=1e-12)
    pairs = ppi_paired_differences(ratings, scores)
    pair_rows = table_rows(text, "Paired differences a − b per context")[2:]
    assert len(pair_rows) == len(pairs) == 9
    assert [row[0] for row in pair_rows[::3]] == ["empathy", "relevance", "fluency"]  # the study's order
    shown_pairs = {(row[0], row[1]): row for row in pair_rows}
    for row in pairs.itertuples():
        cells = shown_pairs[(row.criterion, f"{row.system_a} − {row.system_b}")]
        assert cells[5] == f"{row.ppi_diff:.2f} [{row.ppi_ci_low:.2f}, {row.ppi_ci_high:.2f}]"
        assert cells[7] == ("< 0.001" if row.p_adj < 0.001 else f"{row.p_adj:.3f}")
    assert "Holm-Bonferroni correction over all pairs within each criterion" in text
    # Agreement against the label, the calibration figure, no failures, the methods with the references.
    assert "Krippendorff's α (interval)" in text and "Spearman" in text
    assert (out / "figures" / "judge_calibration.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](figures/judge_calibration.png)" in text
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3  # the report's two figures and the calibration plot
    assert "None: the judge scored every item." in text
    assert "PPI++ (Angelopoulos, Duchi and Zrnic 2023)" in text and "Science 2023" in text
    assert "n × (human-only width / model-assisted width)²" in text


@pytest.mark.slow  # writes a whole report: 7-13 s
def test_a_judge_failure_stops_the_report_naming_the_count_and_the_flag(store, tmp_path):
    engine = make_engine(store)
    with unit_of_work(engine) as session:
        failed = session.scalars(select(JudgeScore.id).where(JudgeScore.criterion == "empathy")
                                 .order_by(JudgeScore.id).limit(2)).all()
        session.execute(update(JudgeScore).where(JudgeScore.id.in_(failed))
                        .values(score=None, error="judge answered 'maybe'"))
    engine.dispose()
    out = tmp_path / "refused"
    refused = run(store, "report", "pilot", "--out", str(out), "--judge", "length")
    assert refused.exit_code == 2, refused.output
    message = " ".join(refused.output.split())
    assert "judge 'length' has no score for 2 item(s)" in message and "--allow-missing" in message
    assert "judge answered 'maybe'" in message
    assert not out.exists(), "nothing is written when the report refuses"

    allowed = run(store, "report", "pilot", "--out", str(out), "--judge", "length", "--allow-missing",
                  "--n-boot", "100")
    assert allowed.exit_code == 0, allowed.output
    text = section((out / "report.md").read_text())
    assert "**2 item(s) the judge failed on were dropped**" in text
    failures = table_rows(text, "2 item(s) without a judge score")
    assert failures[0] == ["Context", "System", "Criterion", "Error"] and len(failures) == 4
    assert {row[2] for row in failures[2:]} == {"empathy"}
    assert {row[3] for row in failures[2:]} == {"judge answered 'maybe'"}
    assert "Items the judge failed on were dropped with their ratings (allow missing): 2." in text
    means = pd.read_csv(out / "tables" / "judge_means.csv")
    dropped = means.loc[means["criterion"] == "empathy"]
    assert (dropped["n_human"] + dropped["n_judge_only"]).sum() == 16 * 3 - 2


@pytest.mark.slow  # writes a whole report: 7-13 s
def test_a_learned_judge_is_estimated_by_cross_ppi(store, tmp_path):
    """A learned judge's stored scores with folds (here the length judge's scores re-labelled as a learned
    judge's, folds over the rated contexts as cross_fit_judge draws them) take the cross-PPI path."""
    import json

    ratings = analysed_ratings(store)
    rated = sorted(set(ratings["context_id"]))
    fold_of = {context: k % 3 for k, context in enumerate(rated)}
    engine = make_engine(store)
    from empeval.server.store.models import Response

    with unit_of_work(engine) as session:
        for score, context_id in session.execute(select(JudgeScore, Response.context_id)
                                                 .join(Response, Response.id == JudgeScore.response_id)).all():
            fold = fold_of.get(str(context_id), -1)
            fold_scores = [None] * 3 if fold >= 0 else [score.score - 0.1, score.score, score.score + 0.1]
            score.judge_kind = "learned-judge"
            score.raw_output = json.dumps({"fold": fold, "fold_scores": fold_scores})
    engine.dispose()
    out = tmp_path / "learned"
    result = run(store, "report", "pilot", "--out", str(out), "--judge", "length", "--n-boot", "100")
    assert result.exit_code == 0, result.output
    text = section((out / "report.md").read_text())
    assert "cross-PPI mean [CI]" in table_rows(text, "Mean label per system")[0]
    assert "PPI++ mean [CI]" not in text
    assert "cross-prediction-powered inference (Zrnic and Candès, PNAS 2024)" in text
    assert "3-fold cross-fitting" in text
    means = pd.read_csv(out / "tables" / "judge_means.csv")
    assert "crossppi_mean" in means.columns and (means["n_folds"] == 3).all()
    assert (means["rater_variance"] >= 0).all() and "judge-only mean (biased)" in text


@pytest.mark.slow  # writes a whole report: 7-13 s
def test_without_judge_the_report_has_no_model_assisted_section(store, tmp_path):
    out = tmp_path / "plain"
    result = run(store, "report", "pilot", "--out", str(out), "--n-boot", "100")
    assert result.exit_code == 0, result.output
    markdown = (out / "report.md").read_text()
    assert "Model-assisted" not in markdown and not (out / "figures" / "judge_calibration.png").exists()
    assert not list((out / "tables").glob("judge_*.csv"))


def test_judge_options_are_refused_where_they_cannot_apply(store, tmp_path):
    alone = run(store, "report", "pilot", "--allow-missing")
    assert alone.exit_code == 2 and "go with --judge NAME" in alone.output
    unknown = run(store, "report", "pilot", "--out", str(tmp_path / "x"), "--judge", "oracle")
    assert unknown.exit_code == 2 and "judge 'oracle' has scored nothing in this store" in " ".join(
        unknown.output.split())
    version = run(store, "report", "pilot", "--out", str(tmp_path / "y"), "--judge", "length",
                  "--judge-version", "v0")
    assert version.exit_code == 2 and "at version 'v0'" in version.output
