"""A chat study through the app: the study file and the design, the payload (blind), live turns answered by real
backend systems, resends and two tabs, every refusal of a hostile turn, ending, submitting, the bound of sessions
per rater, a release, a model that fails, and the export's four tables. On both databases."""
from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.handout import release
from empeval.server.annotation.kinds import annotation_kind
from empeval.server.store.kinds.chat import AssignmentConversation, ChatConversation, ChatRating, ChatTurn
from empeval.server.store.models import Assignment, SeenContext
from empeval.server.web import create_app
from empeval.server.web.chat_api import close_live_replies
from empeval.tasks.kind_parts import StudyFileError, StudySetupError
from empeval.tasks.kinds.chat import plan_sessions
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study

PARTNERS = ("control-generic", "control-mismatched")
CONTROL = "control-scrambled"
ALL = (*PARTNERS, CONTROL)
SPEAKER = ["I finally got the job I wanted after months of trying!", "It was a long road, I almost gave up.",
           "Thanks, I am going to celebrate with my family tonight."]


def chat_file(name="talk", **chat):
    return {"name": name, "kind": "chat", "seed": 3, "contexts": {"split": "test", "count": 6},
            "systems": {"names": list(PARTNERS), "controls": [CONTROL]},
            "chat": {"conversations_per_system": 3, "min_utterances": 4, "max_utterances": 6, "max_chars": 200,
                     "min_reply_seconds": 0, "turn_timeout_seconds": 10, **chat}}


def make_chat(engine, name="talk", *, extra=None, **chat):
    """The chat study `name` (`extra`: further top-level sections of its study file, e.g. recruitment)."""
    return create_study(engine, parse_study({**chat_file(name, **chat), **(extra or {})}))


@pytest.fixture
def chat_app(sample_engine):
    make_chat(sample_engine)
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    yield app
    close_live_replies(app)


def rater(app, engine, name="rita", study="talk"):
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {invite(engine, name, study)[1]}"
    return client


def turn(client, assignment_id, position, index, text):
    return client.post(f"/api/assignments/{assignment_id}/conversations/{position}/turns",
                       json={"index": index, "text": text})


def talk(client, page, position, n=2):
    """n rater turns in the conversation at `position`, each answered; then end it."""
    for i in range(n):
        reply = turn(client, page["assignment_id"], position, 2 * i, SPEAKER[i])
        assert reply.status_code == 200, reply.get_json()
    ended = client.post(f"/api/assignments/{page['assignment_id']}/conversations/{position}/end", json={})
    assert ended.status_code == 200, ended.get_json()


def full_body(page, *, score=4, submission_id="chat-submit-0001"):
    entries = []
    for item in page["items"]:
        entries.append({"item_id": item["item_id"], "ratings": {c["key"]: score for c in page["criteria"]},
                        "turns": {str(t["index"]): ["made_sense"] for t in item["turns"] if t["speaker"] == "system"},
                        "seconds": 30.0})
    return {"submission_id": submission_id, "conversations": entries}


def test_sessions_cross_prompts_with_partners_and_each_session_meets_every_partner_once():
    plan = plan_sessions(list(range(100, 106)), ("a", "b", "c"), 6, seed=1)
    assert len(plan) == 6
    for session in plan:
        assert sorted(c.partner for c in session.items) == ["a", "b", "c"]
        assert len({c.context for c in session.items}) == 3
    pairs = Counter((c.context, c.partner) for s in plan for c in s.items)
    assert set(pairs.values()) == {1} and len(pairs) == 18  # every prompt with every partner, once
    assert len({tuple(c.partner for c in s.items) for s in plan}) > 1  # the order rotates


def test_the_study_file_is_checked_field_by_field(sample_engine):
    with pytest.raises(StudyFileError, match="chat.min_utterances: must be even"):
        parse_study(chat_file(min_utterances=3))
    with pytest.raises(StudyFileError, match="chat.max_utterances: must be an integer >= 4"):
        parse_study(chat_file(max_utterances=2))
    with pytest.raises(StudyFileError, match=r"chat.turn_questions\[0\].key: 'none' is offered"):
        parse_study(chat_file(turn_questions=[{"key": "none", "label": "x"}]))
    with pytest.raises(StudyFileError, match="chat.colour: unknown field"):
        parse_study(chat_file(colour="red"))
    with pytest.raises(StudyFileError, match="contexts.count"):
        parse_study({**chat_file(), "contexts": {"split": "test", "count": 2}})
    with pytest.raises(StudyFileError, match="design.ratings_per_response"):
        parse_study({**chat_file(), "design": {"ratings_per_response": 3}})
    spec = parse_study({**chat_file(), "systems": {"names": ["moel"], "controls": []}})
    with pytest.raises(StudySetupError, match="'moel' \\(replay\\) replays stored responses"):
        create_study(sample_engine, spec)
    spec = parse_study({**chat_file(), "systems": {"names": ["my-bot"], "controls": []}})
    with pytest.raises(StudySetupError, match="'my-bot' \\(a chat partner\\) is not configured"):
        create_study(sample_engine, spec)


def test_a_session_holds_one_conversation_per_partner_on_distinct_prompts(sample_engine):
    summary = make_chat(sample_engine)
    assert summary.assignments == 3 and summary.items == 6 and summary.control_items == 3
    with Session(sample_engine) as session:
        rows = session.execute(select(AssignmentConversation.assignment_id, ChatConversation.system,
                                      ChatConversation.context_id, ChatConversation.is_control)
                               .join(ChatConversation)).all()
    by_session: dict[int, list] = {}
    for assignment_id, system, context, is_control in rows:
        by_session.setdefault(assignment_id, []).append((system, context))
        assert is_control == (system == CONTROL)
    for talks in by_session.values():
        assert sorted(s for s, _ in talks) == sorted(ALL) and len({c for _, c in talks}) == 3


def test_a_whole_session_is_talked_ended_rated_and_exported(chat_app, sample_engine):
    client = rater(chat_app, sample_engine)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    assert page["kind"] == "chat" and len(page["items"]) == 3
    assert {i["state"] for i in page["items"]} == {"open"} and page["chat"]["turn_questions"][-1]["key"] == "none"
    text = str(page)
    assert not any(name in text for name in ALL) and "control" not in text  # blind
    first = turn(client, page["assignment_id"], 0, 0, SPEAKER[0])
    reply = first.get_json()
    assert first.status_code == 200 and reply["index"] == 1 and reply["text"] and not reply["can_end"]
    assert set(reply) == {"index", "text", "utterances", "can_end", "must_end"}
    for position in range(3):
        if position == 0:
            turn(client, page["assignment_id"], 0, 2, SPEAKER[1])
            assert client.post(f"/api/assignments/{page['assignment_id']}/conversations/0/end").status_code == 200
        else:
            talk(client, page, position)
    page = client.get("/api/annotate/next").get_json()["assignment"]  # resumed, as stored
    assert [i["state"] for i in page["items"]] == ["ended"] * 3
    assert all(len(i["turns"]) == 4 for i in page["items"])
    receipt = client.post(f"/api/assignments/{page['assignment_id']}/submit", json=full_body(page))
    assert receipt.status_code == 200, receipt.get_json()
    assert receipt.get_json()["ratings"] == 9
    again = client.post(f"/api/assignments/{page['assignment_id']}/submit", json=full_body(page))
    assert again.status_code == 200 and again.get_json()["ratings"] == 9  # idempotent
    kind = annotation_kind("chat")
    rows = kind.export_rows(sample_engine, "talk")
    assert len(rows) == 9 and set(rows[0]) == set(kind.export_columns)
    assert Counter(r["system"] for r in rows) == {name: 3 for name in ALL}
    extra = kind.extra_exports(sample_engine, "talk")
    columns, conversations = extra["conversations"]
    assert len(conversations) == 3 and {c["state"] for c in conversations} == {"ended"}
    assert all(set(c) == set(columns) for c in conversations)
    _, turns = extra["turns"]
    system_turns = [t for t in turns if t["speaker"] == "system"]
    assert len(turns) == 12 and len(system_turns) == 6
    assert all(t["version"] and t["latency_ms"] is not None and '"role": "speaker"' in t["context_sent"]
               for t in system_turns)
    _, ticks = extra["turn_annotations"]
    assert len(ticks) == 6 * 6 and sum(t["checked"] for t in ticks) == 6


def test_a_resend_is_answered_from_the_store_and_another_text_at_a_taken_index_is_refused(chat_app, sample_engine):
    client = rater(chat_app, sample_engine)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    a = page["assignment_id"]
    first = turn(client, a, 0, 0, SPEAKER[0]).get_json()
    assert turn(client, a, 0, 0, SPEAKER[0]).get_json() == first
    refused = turn(client, a, 0, 0, "something else")
    assert refused.status_code == 409 and "another text" in refused.get_json()["message"]
    skipped = turn(client, a, 0, 4, SPEAKER[1])
    assert skipped.status_code == 409 and "out of order" in skipped.get_json()["message"]
    with Session(sample_engine) as session:
        assert session.scalar(select(func.count()).select_from(ChatTurn)) == 2


@pytest.mark.parametrize("body, status, words", [
    ({"index": 0, "text": ""}, 400, "empty"),
    ({"index": 0, "text": "   "}, 400, "empty"),
    ({"index": 0, "text": "x" * 201}, 400, "at most 200"),
    ({"index": 0, "text": "hi\x00there"}, 400, "NUL"),
    ({"index": 0, "text": "hi\udc80"}, 400, "surrogate"),
    ({"index": 0, "text": "bell\x07"}, 400, "control character"),
    ({"index": 1, "text": "hello"}, 400, "partner's turn"),
    ({"index": -2, "text": "hello"}, 400, "non-negative"),
    ({"index": True, "text": "hello"}, 400, "non-negative integer"),
    ({"index": 0, "text": ["hello"]}, 400, "must be a string"),
    ({"index": 0, "text": "hello", "system": "x"}, 400, "unknown field"),
    (["hello"], 400, "JSON object"),
    ({"index": 2, "text": "hello"}, 409, "out of order"),
])
def test_hostile_turns_are_refused_with_a_message_and_store_nothing(chat_app, sample_engine, body, status, words):
    client = rater(chat_app, sample_engine)
    a = client.get("/api/annotate/next").get_json()["assignment"]["assignment_id"]
    refused = client.post(f"/api/assignments/{a}/conversations/0/turns", json=body)
    assert refused.status_code == status and words in refused.get_json()["message"]
    with Session(sample_engine) as session:
        assert session.scalar(select(func.count()).select_from(ChatTurn)) == 0


def test_turns_are_refused_where_they_do_not_belong(chat_app, sample_engine):
    client = rater(chat_app, sample_engine)
    a = client.get("/api/annotate/next").get_json()["assignment"]["assignment_id"]
    assert client.post(f"/api/assignments/{a}/conversations/7/turns", json={"index": 0, "text": "hi"}
                       ).status_code == 404
    other = rater(chat_app, sample_engine, "otto")
    assert turn(other, a, 0, 0, "hi").status_code == 404  # not hers
    assert client.post(f"/api/assignments/{a}/conversations/0/turns", data="hi",
                       content_type="text/plain").status_code == 400
    early = client.post(f"/api/assignments/{a}/conversations/0/end")
    assert early.status_code == 409 and "at least 4" in early.get_json()["message"]
    for i in range(3):
        assert turn(client, a, 0, 2 * i, SPEAKER[i]).get_json()["must_end"] is (i == 2)
    full = turn(client, a, 0, 6, "one more")
    assert full.status_code == 409 and "6 utterances" in full.get_json()["message"]
    client.post(f"/api/assignments/{a}/conversations/0/end")
    after = turn(client, a, 0, 6, "one more")
    assert after.status_code == 409 and "ended" in after.get_json()["message"]
    page = client.get("/api/annotate/next").get_json()["assignment"]
    open_one = client.post(f"/api/assignments/{a}/submit", json=full_body(page))
    assert open_one.status_code == 400 and "still open" in open_one.get_json()["message"]


def test_two_tabs_sending_the_same_turn_at_once_store_one_turn_and_one_reply(chat_app, sample_engine):
    tabs = [rater(chat_app, sample_engine), None]
    a = tabs[0].get("/api/annotate/next").get_json()["assignment"]["assignment_id"]
    tabs[1] = rater(chat_app, sample_engine)
    answers: list = [None, None]
    go = threading.Barrier(2)

    def send(i):
        go.wait()
        answers[i] = turn(tabs[i], a, 0, 0, SPEAKER[0])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.status_code for r in answers] == [200, 200]
    assert answers[0].get_json()["text"] == answers[1].get_json()["text"]
    with Session(sample_engine) as session:
        assert session.scalar(select(func.count()).select_from(ChatTurn)) == 2


def test_a_rater_takes_at_most_the_sessions_the_study_allows(chat_app, sample_engine):
    client = rater(chat_app, sample_engine)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    for position in range(3):
        talk(client, page, position)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    assert client.post(f"/api/assignments/{page['assignment_id']}/submit", json=full_body(page)).status_code == 200
    after = client.get("/api/annotate/next").get_json()
    assert after["assignment"] is None  # one session each: she has met every partner
    with Session(sample_engine) as session:
        open_left = session.scalar(select(func.count()).select_from(Assignment).where(Assignment.status == "open"))
    assert open_left == 2


def test_a_release_forgets_the_turns_and_the_session_starts_afresh_for_the_next_rater(chat_app, sample_engine):
    client = rater(chat_app, sample_engine)
    a = client.get("/api/annotate/next").get_json()["assignment"]["assignment_id"]
    turn(client, a, 0, 0, SPEAKER[0])
    with Session(sample_engine) as session, session.begin():
        holder = session.scalar(select(Assignment.annotator_id).where(Assignment.id == a))
        assert release(session, a, holder)
    with Session(sample_engine) as session:
        assert session.scalar(select(func.count()).select_from(ChatTurn)) == 0
        assert session.scalar(select(func.count()).select_from(SeenContext)) == 0


def test_a_model_that_fails_ends_the_conversation_which_then_needs_no_ratings(sample_engine, tmp_path):
    # The researcher's own model, configured in the study file's systems file, behind an address nothing answers:
    # a real failure on the real path (the http system, LiveReplies' retries, the failed mark).
    config = tmp_path / "my-systems.toml"
    config.write_text('[systems.my-bot]\nkind = "http"\nprotocol = "openai"\nurl = "http://127.0.0.1:9"\n'
                      'model = "m"\ntimeout = 1\nretries = 0\n\n[systems.control-generic]\nkind = "control-generic"\n',
                      encoding="utf-8")
    study = {**chat_file(turn_timeout_seconds=5, turn_retries=1, systems_config=str(config)),
             "systems": {"names": ["my-bot"], "controls": ["control-generic"]}}
    with pytest.raises(StudySetupError, match="'my-bot' \\(a chat partner\\) is not configured"):
        create_study(sample_engine, parse_study({**study, "chat": {k: v for k, v in study["chat"].items()
                                                                   if k != "systems_config"}}))
    create_study(sample_engine, parse_study(study))
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    try:
        client = rater(app, sample_engine)
        page = client.get("/api/annotate/next").get_json()["assignment"]
        position = next(p for p, item in enumerate(page["items"])
                        if turn(client, page["assignment_id"], p, 0, SPEAKER[0]).get_json().get("failed"))
        again = turn(client, page["assignment_id"], position, 0, SPEAKER[0])
        assert again.status_code == 409 and "could not answer" in again.get_json()["message"]
        with Session(sample_engine) as session:
            placed = session.scalars(select(AssignmentConversation).where(
                AssignmentConversation.assignment_id == page["assignment_id"],
                AssignmentConversation.position == position)).one()
            assert placed.failed and "my-bot" in placed.failure and "2 attempts" in placed.failure
        page = client.get("/api/annotate/next").get_json()["assignment"]
        failed = page["items"][position]
        assert failed["state"] == "failed" and "not be penalised" in failed["message"]
        assert "127.0.0.1" not in str(page) and "my-bot" not in str(page)
        other = 1 - position
        turn(client, page["assignment_id"], other, 2, SPEAKER[1])
        assert client.post(f"/api/assignments/{page['assignment_id']}/conversations/{other}/end").status_code == 200
        page = client.get("/api/annotate/next").get_json()["assignment"]
        body = full_body(page)
        refused = client.post(f"/api/assignments/{page['assignment_id']}/submit", json=body)
        assert refused.status_code == 400 and "takes no ratings" in refused.get_json()["message"]
        body["conversations"][position].pop("ratings")
        receipt = client.post(f"/api/assignments/{page['assignment_id']}/submit", json=body)
        assert receipt.status_code == 200 and receipt.get_json()["ratings"] == 3
        conversations = annotation_kind("chat").extra_exports(sample_engine, "talk")["conversations"][1]
        assert sorted(c["state"] for c in conversations) == ["ended", "failed"]
    finally:
        close_live_replies(app)


def test_the_report_is_written_from_the_store_with_the_further_tables(chat_app, sample_engine, tmp_path):
    from empeval.reporting import write_study_report

    for name, score in (("rita", 4), ("otto", 2)):
        client = rater(chat_app, sample_engine, name)
        page = client.get("/api/annotate/next").get_json()["assignment"]
        for position in range(3):
            talk(client, page, position)
        page = client.get("/api/annotate/next").get_json()["assignment"]
        body = full_body(page, score=score, submission_id=f"chat-submit-{name}-01")
        assert client.post(f"/api/assignments/{page['assignment_id']}/submit", json=body).status_code == 200
    written = write_study_report(sample_engine, "talk", tmp_path / "report")
    # The sections that need the further tables (turns, ticks, conversations) are there: they came from the store.
    assert {"table_chat_turn_annotation_rates", "table_chat_length_latency", "table_chat_failures"} <= set(written)
    report = written["markdown"].read_text(encoding="utf-8")
    assert "6 conversations were claimed: 6 ended" in report and "Per-turn annotations" in report
    rates = written["table_chat_turn_annotation_rates"].read_text(encoding="utf-8")
    assert "Control: generic" in rates and "made_sense" in rates  # by its display name


def test_simulated_speakers_talk_live_and_their_sessions_are_accepted(sample_engine):
    import random

    from empeval.server.annotation.handout import next_assignment_payload
    from empeval.server.annotation.submission import submit_assignment
    from empeval.tasks.kinds import task_kind
    from empeval.tasks.simulate import CrowdModel, Rater

    make_chat(sample_engine)
    answer = task_kind("chat").simulated_answers(sample_engine, "talk", CrowdModel(), seed=1)
    annotator, _ = invite(sample_engine, "sim-000", "talk")
    page = next_assignment_payload(sample_engine, "talk", annotator.id)
    body = answer(Rater("sim-000", "good", 0.0, 1.0), random.Random(1), page)
    receipt = submit_assignment(sample_engine, page["assignment_id"], annotator.id,
                                {"submission_id": "sim-chat-0001", **body}, study="talk")
    assert receipt["ratings"] == 9
    with Session(sample_engine) as session:
        speakers = Counter(session.scalars(select(ChatTurn.speaker)))
    assert speakers["rater"] == speakers["system"] >= 6  # at least min_utterances / 2 exchanges per conversation
    ratings = {r["system"]: r["score"] for r in annotation_kind("chat").export_rows(sample_engine, "talk")
               if r["criterion"] == "empathy"}
    assert ratings["control-generic"] < 3  # the simulation's quality table: a generic reply shows no empathy


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_empeval_export_writes_every_table_and_the_analysis_reads_each_back(chat_app, sample_engine, tmp_path, fmt):
    from click.testing import CliRunner

    from empeval.analysis.kinds.chat.schema import read_chat_file
    from empeval.cli import cli

    client = rater(chat_app, sample_engine)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    for position in range(3):
        talk(client, page, position)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    assert client.post(f"/api/assignments/{page['assignment_id']}/submit", json=full_body(page)).status_code == 200
    url = sample_engine.url.render_as_string(hide_password=False)
    sizes = {"chat": 9, "conversations": 3, "turns": 12, "turn_annotations": 36}
    for table, n in sizes.items():
        out = tmp_path / f"{table}.{fmt}"
        args = ["--database-url", url, "export", "talk", "--format", fmt, "--out", str(out)]
        ran = CliRunner().invoke(cli, args + ([] if table == "chat" else ["--table", table]))
        assert ran.exit_code == 0, ran.output
        read = read_chat_file(out, table)  # the analysis's validated reader: the export keeps its contract
        assert len(read) == n
    wrong = CliRunner().invoke(cli, ["--database-url", url, "export", "talk", "--table", "ratings"])
    assert wrong.exit_code != 0 and "further tables: 'conversations', 'turns', 'turn_annotations'" in wrong.output


def _ended_session(chat_app, sample_engine):
    client = rater(chat_app, sample_engine)
    page = client.get("/api/annotate/next").get_json()["assignment"]
    for position in range(3):
        talk(client, page, position)
    return client, client.get("/api/annotate/next").get_json()["assignment"]


@pytest.mark.parametrize("spoil, words", [
    (lambda e: e[0]["ratings"].pop("empathy"), "has no score for 'empathy'"),
    (lambda e: e[0]["ratings"].update(empathy=6), "must be an integer from 1 to 5"),
    (lambda e: e[0]["ratings"].update(empathy=4.5), "must be an integer from 1 to 5"),
    (lambda e: e[0]["ratings"].update(empathy=True), "must be an integer from 1 to 5"),
    (lambda e: e[0]["ratings"].update(warmth=3), "unknown criterion 'warmth'"),
    (lambda e: e[0].update(ratings=[4, 4, 4]), "ratings must be an object"),
    (lambda e: e[0]["turns"].pop("1"), "turn 1 in conversation"),
    (lambda e: e[0]["turns"].update({"0": ["none"]}), "'0' is not one of your partner's turns"),
    (lambda e: e[0]["turns"].update({"9": ["none"]}), "'9' is not one of your partner's turns"),
    (lambda e: e[0]["turns"].update({"1": []}), "must list at least one question"),
    (lambda e: e[0]["turns"].update({"1": ["none", "empathetic"]}), "cannot be ticked with other questions"),
    (lambda e: e[0]["turns"].update({"1": ["kind"]}), "unknown question 'kind'"),
    (lambda e: e[0]["turns"].update({"1": ["made_sense", "made_sense"]}), "lists a question twice"),
    (lambda e: e[0].update(turns="all good"), "turns must be an object"),
    (lambda e: e.pop(), "has no entry"),
    (lambda e: e.append(dict(e[0])), "answered twice"),
    (lambda e: e[0].update(item_id=10**6), "is not part of this assignment"),
    (lambda e: e[0].update(system="control-generic"), "unknown field"),
])
def test_a_hostile_session_submission_is_refused_naming_where_and_stores_nothing(chat_app, sample_engine, spoil,
                                                                                 words):
    client, page = _ended_session(chat_app, sample_engine)
    body = full_body(page)
    spoil(body["conversations"])
    refused = client.post(f"/api/assignments/{page['assignment_id']}/submit", json=body)
    assert refused.status_code == 400 and words in refused.get_json()["message"], refused.get_json()
    with Session(sample_engine) as session:
        assert session.scalar(select(func.count()).select_from(ChatRating)) == 0
        assert session.scalar(select(Assignment.status).where(Assignment.id == page["assignment_id"])) == "assigned"


def test_no_reply_comes_back_sooner_than_the_study_floor(sample_engine):
    import time

    make_chat(sample_engine, min_reply_seconds=0.6)
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    try:
        client = rater(app, sample_engine)
        a = client.get("/api/annotate/next").get_json()["assignment"]["assignment_id"]
        for position in range(3):  # a stock-reply control answers in microseconds; the page sees 0.6 s for all
            started = time.monotonic()
            assert turn(client, a, position, 0, SPEAKER[0]).status_code == 200
            assert time.monotonic() - started >= 0.6
    finally:
        close_live_replies(app)


def test_a_study_of_one_system_and_one_rater_runs_and_its_report_says_nothing_was_compared(sample_engine, tmp_path):
    from empeval.reporting import write_study_report

    create_study(sample_engine, parse_study({**chat_file(conversations_per_system=1),
                                             "systems": {"names": ["control-generic"], "controls": []}}))
    app = create_app({"DATABASE_URL": sample_engine.url.render_as_string(hide_password=False), "TESTING": True})
    try:
        client = rater(app, sample_engine)
        page = client.get("/api/annotate/next").get_json()["assignment"]
        assert len(page["items"]) == 1
        talk(client, page, 0)
        page = client.get("/api/annotate/next").get_json()["assignment"]
        assert client.post(f"/api/assignments/{page['assignment_id']}/submit", json=full_body(page)).status_code == 200
        assert client.get("/api/annotate/next").get_json()["assignment"] is None
    finally:
        close_live_replies(app)
    written = write_study_report(sample_engine, "talk", tmp_path / "report")
    assert "Only one system was rated: no pair of systems was tested." in written["markdown"].read_text()
