"""A rater does a whole chat session in a real browser against the real server and its live partners (two cheap
systems of the built-in backend configuration): invite link, consent, instructions, per conversation a few
messages, the boxes ticked under each reply, End, the ratings, Next; then the comment and Submit. SQL then holds
her turns, the partner's replies as shown, the boxes she ticked and her ratings, and the receipt is shown; nothing
the page showed or received names a system. A reload mid-chat resumes with the same turns and the ticks of the
draft; a message the server stored without a reply is sent again by itself; a network error or a server error
offers Retry, which sends the same turn; a conflict shows the server's message and takes the conversation as the
server holds it. The chat and the rating views have no serious or critical accessibility violation and no
horizontal scroll on a phone, where the text box and the buttons take the whole width."""
from __future__ import annotations

import json

import pytest
from playwright.sync_api import Error as PlaywrightError
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.store.kinds.chat import ChatTurn
from empeval.server.store.models import Assignment
from tests.annotation.chat_fixtures import (
    CHAT_CRITERIA,
    CHAT_PARTNERS,
    MAX_CHARS,
    MAX_UTTERANCES,
    MIN_UTTERANCES,
    TURN_QUESTIONS,
    PartnerDown,
    assignment_of,
    chat_serving,
    chat_store,
    stored_session,
)
from tests.annotation.page_fixtures import drafts_in
from tests.axe import axe_violations, describe
from tests.browser import chromium_page

LAPTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 667}
# What the rater ticks about her partner's n-th reply (cycled): two boxes, "None of these" alone, two others.
TICKS = [("empathetic", "made_sense"), ("none",), ("off_topic", "repetitive")]
# What a rater must never receive: the keys of a system's identity or provenance in any JSON the page is sent.
HIDDEN_KEYS = {"system", "is_control", "control_target", "latency_ms", "version", "parameters", "context_sent"}
PII_NOTICE = "Please do not type any personal information (names, addresses, contact details)."


@pytest.fixture
def chat(tmp_path, sample_templates):
    engine, tokens = chat_store(tmp_path, sample_templates)
    with chat_serving(engine) as base:
        yield engine, f"{base}/annotate#{tokens['rita']}"


def begin(page, link: str) -> None:
    """Open the invite link, accept the consent, read the instructions and start."""
    page.goto(link)
    page.click("#consent-accept")
    assert PII_NOTICE in page.locator("#instructions").inner_text()
    page.click("#start")
    page.wait_for_selector("#chat-input")


def ticks_of(page, index: int) -> list[str]:
    return page.locator(f"fieldset.ticks[data-index='{index}'] input:checked").evaluate_all(
        "boxes => boxes.map(b => b.value)")


def tick(page, index: int, keys) -> None:
    for key in keys:
        page.check(f"fieldset.ticks[data-index='{index}'] input[value='{key}']")


def shown_turns(page) -> list[tuple[int, str, str]]:
    """(index, speaker, text) of the messages in the conversation on screen."""
    return [(int(i), s, t) for i, s, t in page.locator("#chat-log .chat-turn").evaluate_all(
        """turns => turns.map(t => [t.dataset.index, t.dataset.speaker,
            t.querySelector('.chat-msg').childNodes[1].textContent])""")]


def say(page, text: str, *, by_keyboard: bool) -> int:
    """Send `text` as the next message and wait for the partner's reply; the reply's index."""
    index = len(shown_turns(page))
    page.fill("#chat-input", text)
    if by_keyboard:
        page.focus("#chat-input")
        page.keyboard.press("Enter")
    else:
        page.click("#send")
    page.wait_for_selector(f"#chat-log .chat-turn[data-speaker='system'][data-index='{index + 1}']")
    return index + 1


def first_reply_held_back(page, text: str) -> int:
    """Send a message of two lines (Shift+Enter between them) with the server's answer held back: meanwhile her
    message is shown, Send and End are off and her partner is typing; then the answer goes through. The reply's
    index."""
    held = []
    page.route("**/conversations/*/turns", lambda route: held.append(route))
    first = "Hello, something happened to me last week."
    page.fill("#chat-input", first)
    page.keyboard.press("Shift+Enter")  # a new line, not a send
    page.keyboard.type(text)
    assert page.locator("#chat-input").input_value() == f"{first}\n{text}"
    page.click("#send")
    page.wait_for_function("() => document.querySelector('#typing').textContent.includes('typing')")
    assert page.locator("#typing").inner_text() == "Your partner is typing\u2026"
    assert page.locator("#typing").get_attribute("aria-live") == "polite"
    assert page.locator("#send").is_disabled() and page.locator("#end-conversation").is_disabled()
    assert shown_turns(page) == [(0, "rater", f"{first}\n{text}")]
    for _ in range(100):  # the page's request reaches the route
        if held:
            break
        page.wait_for_timeout(50)
    assert len(held) == 1 and json.loads(held[0].request.post_data) == {"index": 0, "text": f"{first}\n{text}"}
    held[0].continue_()
    page.unroute("**/conversations/*/turns")
    page.wait_for_selector("#chat-log .chat-turn[data-speaker='system'][data-index='1']")
    assert page.locator("#typing").inner_text() == ""
    return 1


def rate(page, scores: dict[str, int]) -> None:
    for criterion, score in scores.items():
        page.check(f"#rating input[name='{criterion}'][value='{score}']")


def names_in(text: str) -> list[str]:
    return [name for name in CHAT_PARTNERS if name in text]


def hidden_keys_in(value) -> set[str]:
    if isinstance(value, dict):
        found = HIDDEN_KEYS & set(value)
        for inner in value.values():
            found |= hidden_keys_in(inner)
        return found
    if isinstance(value, list):
        return set().union(*(hidden_keys_in(inner) for inner in value)) if value else set()
    return set()


def assert_clean(page, where: str) -> None:
    found = axe_violations(page)
    assert found == [], f"{where}:\n{describe(found)}"


def assert_fits(page, viewport) -> None:
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1"), viewport


def assert_full_width_on_a_phone(page) -> None:
    """The text box and the buttons under it take the composer's whole width."""
    composer = page.locator("#composer").bounding_box()
    for selector in ("#chat-input", "#send", "#end-conversation"):
        b = page.locator(selector).bounding_box()
        assert b["width"] >= composer["width"] - 2 * 24, (selector, b, composer)  # all but the card's padding


@pytest.mark.slow
@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_a_rater_does_a_whole_chat_session_and_sql_holds_her_turns_ticks_and_ratings(chat, viewport):
    engine, link = chat
    by_keyboard = viewport is LAPTOP
    expected = {}  # position -> {"turns", "ticks", "ratings"}
    with chromium_page() as page:
        page.set_viewport_size(viewport)
        responses = []
        page.on("response", lambda response: responses.append(response))
        begin(page, link)
        n = int(page.locator("#progress-text").inner_text().split(" of ")[1].split()[0])
        assert n == len(CHAT_PARTNERS)
        assert page.locator("#chat-input").get_attribute("maxlength") == str(MAX_CHARS)
        for c in range(n):
            item = page.locator("#item")
            position = int(item.get_attribute("data-position"))
            assert page.locator("#item-heading").inner_text() == f"Conversation {c + 1} of {n}"
            assert page.locator("#chat-prompt").inner_text().startswith("You are talking about a time you felt ")
            assert page.locator("#pii-notice").inner_text() == PII_NOTICE
            assert page.locator("#chat-log").get_attribute("role") == "log"
            assert page.locator("#end-conversation").is_disabled()
            exchanges = MAX_UTTERANCES // 2 if c == 0 else MIN_UTTERANCES // 2
            ticked = {}
            for e in range(exchanges):
                text = f"Conversation {c + 1}, message {e + 1}: I still think about it every day."
                if c == 0 and e == 0:
                    reply = first_reply_held_back(page, text)
                else:
                    reply = say(page, text, by_keyboard=by_keyboard)
                # Nothing goes on before the reply is annotated; "None of these" excludes the others.
                if reply + 1 < MAX_UTTERANCES:
                    page.fill("#chat-input", "waiting")
                    assert page.locator("#send").is_disabled()
                assert page.locator("#end-conversation").is_disabled()
                tick(page, reply, ["empathetic", "made_sense"])
                tick(page, reply, ["none"])
                assert ticks_of(page, reply) == ["none"]
                tick(page, reply, ["off_topic"])
                assert ticks_of(page, reply) == ["off_topic"]
                page.uncheck(f"fieldset.ticks[data-index='{reply}'] input[value='off_topic']")
                keys = TICKS[(c + e) % len(TICKS)]
                tick(page, reply, keys)
                assert ticks_of(page, reply) == list(keys)
                ticked[reply] = frozenset(keys)
                if reply + 1 < MIN_UTTERANCES:
                    assert page.locator("#send").is_enabled() and page.locator("#end-conversation").is_disabled()
                else:
                    assert page.locator("#end-conversation").is_enabled()
            if c == 0:  # at max_utterances the text box closes and only End remains
                assert page.locator("#chat-input").count() == 0 and page.locator("#send").count() == 0
            elif viewport is PHONE:
                assert_full_width_on_a_phone(page)
            assert_fits(page, viewport)
            turns = shown_turns(page)
            assert [t[:2] for t in turns] == [(i, "rater" if i % 2 == 0 else "system") for i in range(2 * exchanges)]
            assert not names_in(page.content())
            page.click("#end-conversation")
            page.wait_for_selector("#rating")
            assert page.locator("#item-heading").inner_text() == f"Conversation {c + 1} of {n}: your ratings"
            assert page.locator("#rating fieldset.question").count() == len(CHAT_CRITERIA)
            assert page.locator("#rating .scale").first.get_attribute("role") == "radiogroup"
            labels = page.locator("#rating fieldset.question").first.locator("label").all_inner_texts()
            assert labels == ["1 - Not at all", "2 - Slightly", "3 - Moderately", "4 - Mostly", "5 - Completely"]
            assert page.locator("#next-conversation").is_disabled()
            scores = {criterion: 1 + (c + q) % 5 for q, criterion in enumerate(CHAT_CRITERIA)}
            rate(page, scores)
            assert_fits(page, viewport)
            expected[position] = {"turns": turns, "ticks": ticked, "ratings": scores}
            page.click("#next-conversation")
        page.wait_for_selector("#review")
        page.fill("#comment", "Nice partners.")
        page.click("#submit")
        page.wait_for_selector("#submitted")
        assert "saved" in page.locator("#submitted").inner_text()
        assert not names_in(page.content())
        assert not any(key.startswith("empeval-draft") for key in drafts_in(page))  # dropped once sent
        bodies = []
        for response in responses:
            try:
                bodies.append((response.url, response.headers.get("content-type", ""), response.text()))
            except PlaywrightError:  # a redirect or an aborted request: no body
                continue
    assert any("/turns" in url for url, _, _ in bodies)
    for url, content_type, body in bodies:
        assert not names_in(body), url
        if "json" in content_type:
            assert not hidden_keys_in(json.loads(body)), (url, body)

    assignment = assignment_of(engine)
    with Session(engine) as session:
        assert session.get(Assignment, assignment).status == "submitted"
    stored = {s.position: s for s in stored_session(engine, assignment)}
    assert set(stored) == set(expected)
    for position, shown in expected.items():
        s = stored[position]
        assert s.ended and not s.failed
        assert s.turns == tuple(shown["turns"])  # her messages as typed, the replies as shown
        assert s.ticks == shown["ticks"]
        assert s.ratings == shown["ratings"]
    assert {s.system for s in stored.values()} == set(CHAT_PARTNERS)


def test_a_reload_mid_chat_resumes_with_the_same_turns_the_draft_ticks_and_the_unsent_text(chat):
    engine, link = chat
    with chromium_page() as page:
        begin(page, link)
        first = say(page, "My sister got married last weekend and I cried all day.", by_keyboard=True)
        tick(page, first, ["empathetic"])
        second = say(page, "It was the happiest I have seen her in years.", by_keyboard=True)
        tick(page, second, ["made_sense", "repetitive"])
        page.fill("#chat-input", "Not sent yet")
        before = shown_turns(page)
        position = page.locator("#item").get_attribute("data-position")
        assert any("made_sense" in draft for draft in drafts_in(page).values())
        page.reload()
        page.wait_for_selector("#chat-log .chat-turn")
        assert page.locator("#item").get_attribute("data-position") == position
        assert shown_turns(page) == before
        assert ticks_of(page, first) == ["empathetic"]
        assert ticks_of(page, second) == ["made_sense", "repetitive"]
        assert page.locator("#chat-input").input_value() == "Not sent yet"
        assert page.locator("#end-conversation").is_enabled()
        page.click("#end-conversation")
        page.wait_for_selector("#rating")
        rate(page, {"empathy": 4, "fluency": 2})
        page.reload()  # in the rating form: the conversation is ended, the ratings chosen so far kept
        page.wait_for_selector("#rating")
        chosen = page.locator("#rating input:checked").evaluate_all("rs => rs.map(r => [r.name, r.value])")
        assert sorted(chosen) == [["empathy", "4"], ["fluency", "2"]]
        assert page.locator("#next-conversation").is_disabled()
    assignment = assignment_of(engine)
    stored = {s.position: s for s in stored_session(engine, assignment)}
    assert stored[int(position)].turns == tuple(before) and stored[int(position)].ended
    assert stored[int(position)].ticks == {} and stored[int(position)].ratings == {}  # stored with the submission


def test_a_message_stored_without_a_reply_is_sent_again_after_a_reload(chat):
    engine, link = chat
    with chromium_page() as page:
        begin(page, link)
        reply = say(page, "I lost my grandmother's ring at the beach.", by_keyboard=True)
        tick(page, reply, ["empathetic"])
        assignment = assignment_of(engine)
        conversation = next(s for s in stored_session(engine, assignment)
                            if s.position == int(page.locator("#item").get_attribute("data-position")))
        # The server stored her next message, then went away before it answered.
        with Session(engine) as session:
            session.add(ChatTurn(assignment_id=assignment, conversation_id=conversation.conversation_id,
                                 idx=reply + 1, speaker="rater", text="I looked for it for hours."))
            session.commit()
        page.reload()
        page.wait_for_selector(f"#chat-log .chat-turn[data-speaker='system'][data-index='{reply + 2}']")
        assert shown_turns(page)[reply + 1] == (reply + 1, "rater", "I looked for it for hours.")
        assert ticks_of(page, reply) == ["empathetic"]
    stored = next(s for s in stored_session(engine, assignment) if s.conversation_id == conversation.conversation_id)
    assert [t[:2] for t in stored.turns] == [(0, "rater"), (1, "system"), (2, "rater"), (3, "system")]
    assert stored.turns[2][2] == "I looked for it for hours."


@pytest.mark.parametrize("failure", ["lost-answer", "server-error"])
def test_a_network_or_server_error_offers_retry_which_sends_the_same_turn(chat, failure):
    engine, link = chat
    sent = []

    def fail_once(route):
        sent.append(json.loads(route.request.post_data))
        if len(sent) > 1:
            route.continue_()
        elif failure == "lost-answer":
            route.fetch()  # the server stores the turn and answers; the answer never reaches the page
            route.abort()
        else:
            route.fulfill(status=502, content_type="text/html", body="<h1>Bad gateway</h1>")

    with chromium_page() as page:
        begin(page, link)
        page.route("**/conversations/*/turns", fail_once)
        page.fill("#chat-input", "My dog ran away this morning.")
        page.keyboard.press("Enter")
        page.wait_for_selector("#turn-error")
        assert page.locator("#turn-error").inner_text().replace("\n", " ").startswith("Could not reach the server")
        assert shown_turns(page) == [(0, "rater", "My dog ran away this morning.")]
        page.click("#retry")
        page.wait_for_selector("#chat-log .chat-turn[data-speaker='system'][data-index='1']")
        assert page.locator("#turn-error").count() == 0
        assert page.locator("#chat-notice").count() == 0  # the resend was taken as the same turn, no conflict
        shown = shown_turns(page)
    assert sent == [{"index": 0, "text": "My dog ran away this morning."}] * 2
    stored = [s for s in stored_session(engine, assignment_of(engine)) if s.turns]
    assert len(stored) == 1 and stored[0].turns == tuple(shown)


def test_a_conflict_shows_the_servers_message_and_takes_the_conversation_as_the_server_holds_it(chat):
    engine, link = chat
    with chromium_page() as page:
        begin(page, link)
        reply = say(page, "I was so nervous before my driving test.", by_keyboard=True)
        tick(page, reply, ["made_sense"])
        assignment = assignment_of(engine)
        position = page.locator("#item").get_attribute("data-position")
        # Another tab of hers sends another message at the same index first.
        other = page.request.post(
            f"{link.split('/annotate')[0]}/api/assignments/{assignment}/conversations/{position}/turns",
            headers={"X-Requested-With": "empeval"},
            data={"index": reply + 1, "text": "And then I passed!"})
        assert other.ok, other.text()
        page.fill("#chat-input", "But I failed the first time.")
        page.keyboard.press("Enter")
        page.wait_for_selector("#chat-notice")
        assert page.locator("#chat-notice").inner_text()
        page.wait_for_selector(f"#chat-log .chat-turn[data-index='{reply + 2}']")
        shown = shown_turns(page)
        assert shown[reply + 1] == (reply + 1, "rater", "And then I passed!")
        assert page.locator("#chat-input").input_value() == "But I failed the first time."  # hers, to send again
    stored = next(s for s in stored_session(engine, assignment) if s.position == int(position))
    assert stored.turns == tuple(shown)


@pytest.mark.parametrize("viewport", [LAPTOP, PHONE], ids=["laptop", "phone"])
def test_the_chat_and_the_rating_views_have_no_serious_or_critical_violation_and_fit_the_screen(chat, viewport):
    _engine, link = chat
    with chromium_page() as page:
        page.set_viewport_size(viewport)
        page.goto(link)
        page.wait_for_selector("#consent")
        for where, step in (("consent", "#consent-accept"), ("instructions", "#start")):
            assert_clean(page, where)
            page.click(step)
        page.wait_for_selector("#chat-input")
        assert_clean(page, "an empty conversation")
        for e in range(MIN_UTTERANCES // 2):
            reply = say(page, f"Message {e + 1}: my best friend moved to another country.", by_keyboard=False)
            if e == 0:
                assert_clean(page, "a reply, not yet annotated")
            tick(page, reply, TICKS[e % len(TICKS)])
        assert_clean(page, "a conversation that can end")
        assert_fits(page, viewport)
        if viewport is PHONE:
            assert_full_width_on_a_phone(page)
        page.click("#end-conversation")
        page.wait_for_selector("#rating")
        assert_clean(page, "the rating form")
        rate(page, {"empathy": 3})
        page.click("#rating ~ details summary")
        assert_clean(page, "the rating form, half answered, with the conversation shown")
        assert_fits(page, viewport)
        if viewport is PHONE:
            b = page.locator("#next-conversation").bounding_box()
            assert b["width"] >= viewport["width"] - 2 * 16 - 2, b


def test_the_page_offers_only_known_turn_questions_and_none_of_these_last(chat):
    _engine, link = chat
    with chromium_page() as page:
        begin(page, link)
        reply = say(page, "I got a puppy for my birthday.", by_keyboard=True)
        keys = page.locator(f"fieldset.ticks[data-index='{reply}'] input").evaluate_all("bs => bs.map(b => b.value)")
        assert tuple(keys) == TURN_QUESTIONS
        assert page.locator(f"fieldset.ticks[data-index='{reply}'] input[value='none']").locator("xpath=..") \
            .inner_text() == "None of these"


def test_a_partner_that_cannot_answer_is_shown_kindly_the_page_moves_on_and_the_session_is_submitted(
        tmp_path, sample_templates):
    down = CHAT_PARTNERS[1]
    engine, tokens = chat_store(tmp_path, sample_templates)
    with chat_serving(engine, PartnerDown(down)) as base, chromium_page() as page:
        begin(page, f"{base}/annotate#{tokens['rita']}")
        assignment = assignment_of(engine)
        partner = {s.position: s.system for s in stored_session(engine, assignment)}
        for _ in partner:
            position = int(page.locator("#item").get_attribute("data-position"))
            if partner[position] == down:
                page.fill("#chat-input", "My cat has been ill all week.")
                page.keyboard.press("Enter")
                page.wait_for_selector("#chat-failed")
                assert "you will not be penalised" in page.locator("#chat-failed").inner_text()
                assert page.locator("#chat-input").count() == 0 and page.locator("#end-conversation").count() == 0
                assert not names_in(page.content())
                assert_clean(page, "a conversation whose partner could not answer")
                page.reload()  # the payload says it failed: the page says so again
                page.wait_for_selector("#chat-failed")
                assert "you will not be penalised" in page.locator("#chat-failed").inner_text()
                page.click("#next-conversation")
            else:
                for e in range(MIN_UTTERANCES // 2):
                    tick(page, say(page, f"Message {e + 1} about my new job.", by_keyboard=True), ["empathetic"])
                page.click("#end-conversation")
                page.wait_for_selector("#rating")
                rate(page, {criterion: 3 for criterion in CHAT_CRITERIA})
                page.click("#next-conversation")
        page.wait_for_selector("#review")
        page.click("#submit")
        page.wait_for_selector("#submitted")
    stored = {s.system: s for s in stored_session(engine, assignment)}
    assert stored[down].failed and not stored[down].ended and stored[down].ratings == {}
    assert stored[down].turns == ((0, "rater", "My cat has been ill all week."),)
    talked = stored[CHAT_PARTNERS[0]]
    assert talked.ended and talked.ratings == {criterion: 3 for criterion in CHAT_CRITERIA}
    assert talked.ticks == {1: frozenset({"empathetic"}), 3: frozenset({"empathetic"})}


def test_the_researchers_preview_of_a_chat_study_talks_locally_and_records_nothing(chat):
    engine, link = chat
    base = link.split("/annotate")[0]
    posts = []
    with chromium_page() as page:
        page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)
        page.goto(f"{base}/admin#{admin_token(secret_key(engine))}")
        page.wait_for_selector("text=chat-page")
        page.goto(f"{base}/admin/studies/chat-page/preview")
        page.click("#consent-accept")
        page.click("#start")
        assert page.locator("#preview-banner").is_visible()
        for _ in range(len(CHAT_PARTNERS)):
            page.wait_for_selector("#chat-input")
            for e in range(MIN_UTTERANCES // 2):
                tick(page, say(page, f"Preview message {e + 1}.", by_keyboard=True), ["none"])
            page.click("#end-conversation")
            rate(page, {criterion: 5 for criterion in CHAT_CRITERIA})
            page.click("#next-conversation")
        page.click("#submit")
        assert page.locator("#preview-not-submitted").is_visible()
        assert page.locator("#submitted").count() == 0
        assert not any(k.startswith(("empeval-draft:", "empeval-consent:", "empeval-submission-"))
                       for k in drafts_in(page))
    assert [url for url in posts if "/api/assignments/" in url] == []
    with Session(engine) as session:
        assert set(session.scalars(select(Assignment.status)).all()) == {"open"}  # nothing claimed
        assert session.scalar(select(func.count()).select_from(ChatTurn)) == 0
