"""Per-item comments in the Likert report's Comments section (issue 30 #4; analysis.report.comments): from a real store
through `empeval export`, each rater's comment on an item is listed once with its item, system and context, counted in
the text and written to tables/item_comments.csv, beside the comments on assignments; free text stays text."""
from __future__ import annotations

import pandas as pd
from click.testing import CliRunner
from sqlalchemy import select
from sqlalchemy.orm import Session

from empeval.analysis.kinds.likert.load import read_export
from empeval.analysis.report.comments import comments_section, item_comments
from empeval.analysis.report.sections import Report, write_report
from empeval.cli import cli
from empeval.server.annotation.annotators import invite
from empeval.server.annotation.submission import submit_assignment
from empeval.server.store.item_comment_tables import ItemComment
from empeval.server.store.kinds.likert import StudyItem
from empeval.server.store.models import Response, System
from tests.annotation.researcher_helpers import claim
from tests.annotation.test_item_comments import commented, ratings_body  # noqa: F401 - the study fixture

HOSTILE = "**Rude**\nand <script>x</script> | cut"


def test_item_comments_reach_the_comments_section_with_their_item_and_a_csv(commented, tmp_path):  # noqa: F811
    engine = commented
    rita, _ = invite(engine, "rita", "notes")
    sam, _ = invite(engine, "sam", "notes")
    first = claim(engine, rita.id, "notes")
    body = ratings_body(engine, first, {0: "The response ignores her exam.", 2: HOSTILE})
    submit_assignment(engine, first, rita.id, {**body, "comment": "Long but fine"})
    second = claim(engine, sam.id, "notes")
    submit_assignment(engine, second, sam.id, ratings_body(engine, second, {1: "Generic."}))
    out = tmp_path / "notes.csv"
    exported = CliRunner().invoke(cli, ["--database-url", engine.url.render_as_string(hide_password=False), "export",
                                        "notes", "--format", "csv", "--out", str(out)])
    assert exported.exit_code == 0, exported.output

    ratings = read_export(out)
    found = item_comments(ratings)
    with Session(engine) as session:  # what the store holds, joined to each item's system and context
        stored = {(assignment, comment): (system, str(context)) for assignment, comment, system, context in
                  session.execute(select(ItemComment.assignment_id, ItemComment.comment, System.name,
                                         Response.context_id)
                                  .join(StudyItem, StudyItem.id == ItemComment.item_id)
                                  .join(Response, Response.id == StudyItem.response_id)
                                  .join(System, System.id == Response.system_id))}
    assert len(found) == len(stored) == 3  # once per item, not once per criterion
    folded = {(a, " ".join(c.split())): where for (a, c), where in stored.items()}  # line breaks folded
    assert {(int(r.assignment), r.item_comment): (r.system, r.context) for r in found.itertuples()} == folded

    section = comments_section(ratings)
    assert section is not None
    paths = write_report(Report(title="notes", sections=[section]), tmp_path / "report")
    markdown = paths["markdown"].read_text(encoding="utf-8")
    assert "1 comment left on assignments" in markdown and "Long but fine" in markdown
    assert "3 comments on 3 items by 2 annotators" in markdown
    assert "<script>" not in paths["html"].read_text(encoding="utf-8")
    assert "\\*\\*Rude\\*\\* and" in markdown  # as written, not read as bold, on one line
    csv = pd.read_csv(paths["table_item_comments"], dtype=str)
    assert sorted(csv["item_comment"]) == sorted(found["item_comment"])
    assert list(csv.columns) == ["item", "context", "system", "annotator", "assignment", "item_comment"]

    # The Likert report itself carries the section and the table, from the store as from the export.
    reported = CliRunner().invoke(cli, ["--database-url", engine.url.render_as_string(hide_password=False), "report",
                                        "notes", "--out", str(tmp_path / "likert"), "--keep-flagged"])
    assert reported.exit_code == 0, reported.output
    assert "3 comments on 3 items by 2 annotators" in (tmp_path / "likert" / "report.md").read_text(encoding="utf-8")
    from_store = pd.read_csv(tmp_path / "likert" / "tables" / "item_comments.csv", dtype=str)
    assert sorted(from_store["item_comment"]) == sorted(csv["item_comment"])


def test_no_comments_no_section(tmp_path):
    ratings = pd.DataFrame({"item": ["1:a"], "context": ["1"], "system": ["a"], "annotator": ["r"],
                            "assignment": ["1"], "comment": [""], "item_comment": [None]})
    assert comments_section(ratings) is None
