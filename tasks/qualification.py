"""A study file's [qualification] section, read and checked, and its gold items written when the study is created.

A study of a kind that has a qualification (Likert, A/B, ACUTE-Eval) may ask every local or Prolific rater to pass a
short training before her first real assignment: a few gold items whose right answers are known, each followed by
feedback, and a pass rule. The section's shared fields are read here; each gold item's table is read by the study's
kind (TaskKind.qualification_items, in the kind's own terms: see tasks/kinds/likert.py, pairwise.py and acute.py):

    [qualification]
    min_correct = 3                 # gold items answered right to pass (default: all of them); an item is right
                                    # when every question of it is
    attempts = 1                    # goes through the items allowed (1-5); a rater who fails her last one fails
    intro = "..."                   # optional: shown before the first item
    code_on_failure = "screened_out"   # Prolific: the completion code a participant who fails is given,
                                       # recruitment.screened_out_code (the default) or "failed_checks"
    [[qualification.items]]         # 1-20 of them, in the order shown; the fields are the kind's
    context = ["I finally passed my driving test!"]
    response = "Driving tests are held on weekdays."
    answer = { empathy = [1, 2], relevance = [1, 3], fluency = [4, 5] }
    feedback = "The reply states a fact about tests and ignores the speaker's joy: low empathy, fluent English."

A kind without a qualification refuses the section, naming the kinds that have one. So does an MTurk study (crowd
workers are onboarded by Mephisto: `empeval crowd launch --onboarding`), and a Prolific study that has no completion
code for those who fail.

The hand-out (server/annotation/hot_sql.py) hands real work only to a rater whose outcome is `passed`; her answers
and outcome are taken by server/annotation/qualification.py.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from empeval.server.store.kinds import StudySetup
from empeval.server.store.models import Study
from empeval.server.store.qualification import CODES_ON_FAILURE, MAX_ATTEMPTS, MAX_GOLD_ITEMS, Qualification
from empeval.server.store.qualification_tables import QualificationItem
from empeval.server.store.study_config import StudyConfig
from empeval.server.store.study_parts import Criterion, Recruitment
from empeval.tasks.kind_parts import StudyFileReader, StudySetupError
from empeval.tasks.kinds import TaskKind, has_qualification, task_kinds

FIELDS = {"items", "min_correct", "attempts", "intro", "code_on_failure"}


def parse_qualification(reader: StudyFileReader, data: dict[str, Any], kind: TaskKind, setup: StudySetup,
                        criteria: tuple[Criterion, ...], controls: tuple[str, ...],
                        recruitment: Recruitment) -> Qualification | None:
    """The study file's [qualification] (see the module docstring), None when it has none; StudyFileError naming the
    field and what to do otherwise."""
    if "qualification" not in data:
        return None
    if not has_qualification(kind):
        having = ", ".join(other.name for other in task_kinds() if has_qualification(other))
        raise reader.error("qualification", f"a {setup.label} study has no qualification (the kinds that have one: "
                           f"{having}); remove the [qualification] section")
    section = reader.table(data, "qualification", "qualification", FIELDS)
    if recruitment.platform == "mturk":
        raise reader.error("qualification", "is for local and Prolific raters; MTurk workers are onboarded by "
                           "Mephisto (`empeval crowd launch STUDY --onboarding`): remove the section")
    raw = section.get("items")
    if not isinstance(raw, list) or not raw or not all(isinstance(entry, dict) for entry in raw):
        raise reader.error("qualification.items", "must list the gold items as tables ([[qualification.items]]), at "
                           f"least one; {kind.name} studies' fields are documented in tasks/kinds/{kind.name}.py")
    if len(raw) > MAX_GOLD_ITEMS:
        raise reader.error("qualification.items", f"lists {len(raw)} gold items; a qualification is a short training "
                           f"of at most {MAX_GOLD_ITEMS}")
    items = kind.qualification_items(reader, raw, setup, criteria, controls)
    min_correct = reader.integer(section, "min_correct", "qualification.min_correct", len(items), minimum=1,
                                 maximum=len(items))
    attempts = reader.integer(section, "attempts", "qualification.attempts", 1, minimum=1, maximum=MAX_ATTEMPTS)
    intro = reader.string(section, "intro", "qualification.intro") if "intro" in section else ""
    code = reader.string(section, "code_on_failure", "qualification.code_on_failure", CODES_ON_FAILURE[0])
    if code not in CODES_ON_FAILURE:
        raise reader.error("qualification.code_on_failure", f"unknown code {code!r}; expected "
                           f"{' or '.join(map(repr, CODES_ON_FAILURE))}")
    if recruitment.platform == "prolific" and recruitment.code_for(code) is None:
        raise reader.error(f"recruitment.{code}_code", "is required on Prolific when the study has a "
                           f"[qualification]: a participant who fails it is given this code (qualification."
                           f"code_on_failure = {code!r}); copy it from the study's page on Prolific")
    assert min_correct is not None and attempts is not None
    return Qualification(items=items, min_correct=min_correct, attempts=attempts, intro=intro, code_on_failure=code)


def write_gold_items(session: Session, kind: TaskKind, spec: StudyConfig, study: Study) -> int:
    """Write what each gold item of the study's qualification shows and accepts (the kind's qualification_rows), in
    the creation's transaction; how many were written (0 without a qualification)."""
    if spec.qualification is None:
        return 0
    rows = kind.qualification_rows(session, spec)
    if len(rows) != len(spec.qualification.items):
        raise StudySetupError(f"qualification: {len(spec.qualification.items)} gold items but {len(rows)} written")
    session.add_all(QualificationItem(
        study_id=study.id, position=position, feedback=row.feedback,
        panels=[{"title": panel.title, "note": panel.note,
                 "turns": [{"role": turn.role, "text": turn.text, "label": turn.label} for turn in panel.turns]}
                for panel in row.panels],
        accepted={accepted.criterion: list(accepted.answers) for accepted in row.accepted})
        for position, row in enumerate(rows))
    session.flush()
    return len(rows)


def describe(spec: StudyConfig) -> str:
    """What the study summary adds of its qualification ("" without one)."""
    rule = spec.qualification
    if rule is None:
        return ""
    tries = "one attempt" if rule.attempts == 1 else f"{rule.attempts} attempts"
    return (f"; raters first pass a qualification of {len(rule.items)} gold item{'' if len(rule.items) == 1 else 's'} "
            f"({rule.min_correct} right to pass, {tries})")
