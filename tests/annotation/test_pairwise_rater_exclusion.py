"""`empeval report` on an A/B study in a real store (issue 30, item 6): the raters the A/B quality rules flag (here one
who always picks the left response, one who fails her control pairs) are named with their reasons, left out of the
A/B table and the agreement unless --keep-flagged, shown with and without in their own tables, and counted in the
methods paragraph; agreement carries bootstrap intervals."""
from __future__ import annotations

import pandas as pd
import pytest
from click.testing import CliRunner
from sqlalchemy import update
from sqlalchemy.orm import Session

from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.store.kinds.pairwise import Choice
from empeval.server.store.models import Assignment
from empeval.server.store.queries import now_utc
from tests.annotation.conftest import SYSTEMS
from tests.annotation.pairwise_fixtures import AB_CRITERIA, assignment_ids, give, make_ab_study, placements

# The better system of any pair: the one listed first; a careful rater ties on one context in four.
RANK = {system: place for place, system in enumerate(SYSTEMS)}


def _careful(placement, rater: int) -> str:
    if not placement.is_control and (placement.context_id + rater) % 4 == 0:
        return "tie"
    if placement.is_control:  # the real response is the one that is not a control
        real_on_left = placement.left[0] in SYSTEMS
    else:
        real_on_left = RANK[placement.left[0]] < RANK[placement.right[0]]
    return "left" if real_on_left else "right"


def _control_failer(placement, rater: int) -> str:
    answer = _careful(placement, rater)
    if placement.is_control:
        return {"left": "right", "right": "left"}[answer]
    return answer


@pytest.fixture
def judged_ab(sample_engine):
    """An A/B study on 12 contexts, every assignment judged (stored as a submission stores its choices): "lefty"
    picks the left response on everything, "careless" the control side of each control pair, careful raters the
    better system (or a tie). Returns (database URL, choices per rater, pseudonym per rater)."""
    make_ab_study(sample_engine, count=12, k=3, per_assignment=5, control_rate=0.2)
    flagged_quota = {"lefty": 3, "careless": 3}  # enough pairs for the rules; the careful raters take the rest
    invited: dict[str, int] = {}
    pseudonyms: dict[str, str] = {}
    seen: dict[str, set[int]] = {}
    counts: dict[str, int] = {}
    for index, assignment_id in enumerate(assignment_ids(sample_engine, "ab")):
        placed = placements(sample_engine, assignment_id)
        items = {p.pair_item_id for p in placed}
        # A rater judges a pair once at most: the first rater with a quota left who has not seen these pairs.
        candidates = [name for name, quota in flagged_quota.items() if quota] + [f"care-{i}" for i in range(20)]
        owner = next(name for name in candidates if not items & seen.get(name, set()))
        if owner in flagged_quota:
            flagged_quota[owner] -= 1
        if owner not in invited:
            annotator = invite(sample_engine, owner, "ab")[0]
            invited[owner], pseudonyms[owner] = annotator.id, annotator.pseudonym
        seen.setdefault(owner, set()).update(items)
        give(sample_engine, assignment_id, invited[owner])
        chooser = {"lefty": lambda p, r: "left", "careless": _control_failer}.get(owner, _careful)
        with Session(sample_engine) as session, session.begin():
            session.execute(update(Assignment).where(Assignment.id == assignment_id).values(
                status="submitted", submission_id=f"sub-{index:04d}", submitted_at=now_utc()))
            session.add_all(Choice(assignment_id=assignment_id, pair_item_id=p.pair_item_id,
                                   annotator_id=invited[owner], criterion=criterion,
                                   choice=chooser(p, index), submission_id=f"sub-{index:04d}")
                            for p in placed for criterion in AB_CRITERIA)
        counts[owner] = counts.get(owner, 0) + len(placed) * len(AB_CRITERIA)
    assert flagged_quota == {"lefty": 0, "careless": 0}
    return sample_engine.url.render_as_string(hide_password=False), counts, pseudonyms


def _report(url: str, out, *options: str) -> str:
    result = CliRunner().invoke(cli, ["--database-url", url, "report", "ab", "--out", str(out), "--n-boot", "100",
                                      *options])
    assert result.exit_code == 0, result.output
    return (out / "report.md").read_text(encoding="utf-8")


def test_flagged_ab_raters_are_named_left_out_shown_both_ways_counted_and_kept_on_request(judged_ab, tmp_path):
    url, counts, named = judged_ab
    lefty, careless = named["lefty"], named["careless"]
    markdown = _report(url, tmp_path / "ab")
    tables = tmp_path / "ab" / "tables"
    quality = pd.read_csv(tables / "rater_quality.csv").set_index("annotator")
    assert sorted(quality.index[quality["flagged"]]) == sorted([careless, lefty])
    assert quality.loc[lefty, "flag_position"]  # (and, picking left, she fails the controls shown on the left)
    assert quality.loc[careless, "flag_controls"] and not quality.loc[careless, "flag_position"]
    reasons = {line.split(": ", 1)[0][2:]: line for line in markdown.splitlines() if line.startswith("- local-")}
    assert "picked one screen side in 100% of" in reasons[lefty]
    assert reasons[careless].startswith(f"- {careless}: passed 0 of")

    # The A/B table counts only the careful raters' real judgments; the side-by-side table has both.
    ab = pd.read_csv(tables / "ab_table.csv")
    export = pd.DataFrame(_export(url))
    real = export.loc[export["is_control"].astype(str).str.lower() != "true"]
    kept = real.loc[~real["annotator"].isin([lefty, careless])]
    assert ab["judgments"].sum() == len(kept) < len(real)
    both = pd.read_csv(tables / "ab_side_by_side.csv")
    by_raters = both.groupby("raters")["judgments"].sum()
    assert by_raters.to_dict() == {"all raters": len(real), "excluding flagged": len(kept)}

    # Agreement with its bootstrap interval, in the table and in the methods paragraph.
    agreement = pd.read_csv(tables / "choice_agreement.csv")
    alphas = agreement.loc[agreement["coefficient"] == "krippendorff_alpha"]
    assert alphas["estimate"].notna().all()
    assert ((alphas["ci_low"] <= alphas["estimate"]) & (alphas["estimate"] <= alphas["ci_high"])).all()
    methods = markdown.split("## Methods", 1)[1]
    first = alphas.iloc[0]
    assert f"{first['criterion']} {first['estimate']:.2f} [{first['ci_low']:.2f}, {first['ci_high']:.2f}]" in methods
    flagged_choices = counts["lefty"] + counts["careless"]
    failed_controls = int(quality["flag_controls"].sum())
    assert (f"2 of {len(counts)} annotators were flagged ({failed_controls} for failed control pairs, 1 for one "
            f"screen side throughout) and were excluded with their {flagged_choices} choices, leaving "
            f"{len(counts) - 2} annotators and {sum(counts.values()) - flagged_choices} choices") in methods
    assert f"The quality checks flag 2 of {len(counts)} annotators: left out of every table" in markdown
    # The control pairs' table still lists every rater: it is where one of the flags comes from.
    assert set(pd.read_csv(tables / "control_pairs.csv")["annotator"]) >= {lefty, careless}

    # --keep-flagged keeps them in the A/B table and says so (one test: each report costs a few seconds).
    markdown = _report(url, tmp_path / "kept", "--keep-flagged")
    assert pd.read_csv(tmp_path / "kept" / "tables" / "ab_table.csv")["judgments"].sum() == len(real)
    assert "were kept (on request)" in markdown and "kept in every table (--keep-flagged" in markdown


def _export(url: str) -> list[dict]:
    from empeval.server.annotation.export import export_rows
    from empeval.server.store.engine import make_engine

    engine = make_engine(url)
    try:
        return export_rows(engine, "ab")
    finally:
        engine.dispose()


def test_when_every_rater_is_flagged_the_report_says_so_and_how_to_see_them():
    from empeval.analysis.kinds.pairwise.part import pairwise_report
    from empeval.analysis.kinds.pairwise.schema import judgment_rows
    from empeval.analysis.report.document import Document, to_markdown

    lefty = judgment_rows([(c, "gold", "moel", "left") for c in range(10)]
                          + [(c, "moel", "gold", "left") for c in range(10, 20)])
    report = pairwise_report(pd.DataFrame(lefty), name="x", n_boot=20)
    text = to_markdown(Document("x", [block for section in report.sections for block in section.blocks]))
    assert "Every annotator who judged a real pair is flagged" in text and "--keep-flagged" in text
    kept = pairwise_report(pd.DataFrame(lefty), name="x", n_boot=20, exclude_flagged=False)
    assert [s.name for s in kept.sections if s.name == "note"] == []
