"""The schema itself refuses double counting, whatever the Python code above it does."""
import pytest
from sqlalchemy.exc import IntegrityError

from empeval.server.store import make_engine, unit_of_work, upgrade
from empeval.server.store.kinds.likert import AssignmentItem, Rating, StudyItem
from empeval.server.store.models import Annotator, Assignment, Context, Dataset, Dialogue, Response, Study, System, Turn
from empeval.server.store.study_config import StudyConfig


@pytest.fixture
def rated_store(store_url):
    engine = make_engine(store_url)
    upgrade(engine)
    with unit_of_work(engine) as s:
        dataset = Dataset(name="d")
        dialogue = Dialogue(dataset=dataset, conv_id="c1", split="test", emotion="sad", situation="x", content_hash="h")
        t1 = Turn(dialogue=dialogue, idx=1, role="speaker", text="I lost my dog.")
        t2 = Turn(dialogue=dialogue, idx=2, role="listener", text="I'm so sorry.")
        context = Context(dialogue=dialogue, n_turns=1, reference_turn=t2)
        system = System(name="gold", kind="gold", version="1", parameters={})
        response = Response(context=context, system=system, text="I'm so sorry.", provenance={}, latency_ms=0.0)
        study = Study(name="s", config=StudyConfig(name="s"), seed=1)
        item = StudyItem(study=study, response=response)
        annotator = Annotator(provider="local", pseudonym="a1")
        s.add_all([t1, context, item, annotator])
        s.flush()
        assignment = Assignment(study_id=study.id, annotator=annotator, status="assigned")
        s.add(AssignmentItem(assignment=assignment, item=item, position=0))
        s.add(Rating(assignment=assignment, item_id=item.id, annotator=annotator, criterion="empathy", score=4,
                     submission_id="sub-1"))
        s.flush()
        ids = dict(assignment=assignment.id, item=item.id, annotator=annotator.id, study=study.id,
                   response=response.id, context=context.id, system=system.id)
    yield engine, ids
    engine.dispose()


def _insert_fails(engine, row) -> None:
    with pytest.raises(IntegrityError):
        with unit_of_work(engine) as s:
            s.add(row)


def test_same_item_and_criterion_cannot_be_rated_twice_in_one_assignment(rated_store):
    engine, ids = rated_store
    _insert_fails(engine, Rating(assignment_id=ids["assignment"], item_id=ids["item"], annotator_id=ids["annotator"],
                                 criterion="empathy", score=2, submission_id="sub-2"))


def test_an_annotator_cannot_rate_the_same_item_twice_through_another_assignment(rated_store):
    engine, ids = rated_store
    with unit_of_work(engine) as s:
        other = Assignment(study_id=ids["study"], annotator_id=ids["annotator"], status="submitted")
        s.add(other)
        s.flush()
        other_id = other.id
    _insert_fails(engine, Rating(assignment_id=other_id, item_id=ids["item"], annotator_id=ids["annotator"],
                                 criterion="empathy", score=2, submission_id="sub-3"))


def test_a_submission_id_belongs_to_one_assignment_only(rated_store):
    engine, ids = rated_store
    with unit_of_work(engine) as s:
        s.get(Assignment, ids["assignment"]).submission_id = "sub-1"
    _insert_fails(engine, Assignment(study_id=ids["study"], status="submitted", submission_id="sub-1"))


def test_a_system_answers_a_context_once(rated_store):
    engine, ids = rated_store
    _insert_fails(engine, Response(context_id=ids["context"], system_id=ids["system"], text="again", provenance={},
                                   latency_ms=1.0))


def test_foreign_keys_are_enforced(rated_store):
    engine, ids = rated_store
    _insert_fails(engine, Rating(assignment_id=999999, item_id=ids["item"], annotator_id=ids["annotator"],
                                 criterion="fluency", score=3, submission_id="x"))


def test_a_control_item_must_name_the_criterion_it_targets(rated_store):
    engine, ids = rated_store
    # A response the study does not hold yet, so that only the CHECK constraint can refuse the row (the
    # study's own response would be refused first by the unique (study, response) constraint).
    with unit_of_work(engine) as s:
        control = System(name="control-generic", kind="control-generic", version="1", parameters={})
        s.add(control)
        s.flush()
        response = Response(context_id=ids["context"], system_id=control.id, text="OK. What else is new?",
                            provenance={}, latency_ms=0.0)
        s.add(response)
        s.flush()
        response_id = response.id
    with pytest.raises(IntegrityError, match="(?i)check|control_has_target"):
        with unit_of_work(engine) as s:
            s.add(StudyItem(study_id=ids["study"], response_id=response_id, is_control=True))
    with unit_of_work(engine) as s:  # the same row naming its target is fine
        s.add(StudyItem(study_id=ids["study"], response_id=response_id, is_control=True, control_target="empathy"))
