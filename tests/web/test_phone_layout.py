"""Every page holds on a phone (375x667) and on a laptop (1280x800), measured in a real Chromium against the real
server over SQLite files: no page is wider than the screen (the rater page of each kind at each step: Likert on a
5- and a 7-point scale, A/B, best-worst, ACUTE-Eval, chat; the dashboard and its study pages; the Prolific study
link's task page, refusal and completion pages, which share the base template and its stylesheet); each question's
options stand on one row at equal widths (on a phone a rating scale shows its numbers, 44 px wide or more, and the
labels of its ends above them, each option keeping its whole label as its name); a Likert item with an ED
conversation of a typical length fits in 1.3 screens of a phone; a focused text box's focus ring keeps clear of its
label; a dashboard table wider than a phone scrolls in its own box, reachable by keyboard, and axe-core finds no
serious violation there. Boxes are measured (getBoundingClientRect), not screenshots."""
from __future__ import annotations

import uuid

import pytest

from empeval.server.annotation.annotators import invite
from empeval.server.annotation.prolific import make_study_token
from empeval.server.annotation.secrets import admin_token, secret_key
from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.importer import import_dialogues
from empeval.server.store import make_engine, upgrade
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from empeval.wiring import make_app
from tests.admin.test_study_page import submit_after
from tests.annotation.acute_fixtures import ACUTE, acute_store
from tests.annotation.best_worst_fixtures import make_bws_study
from tests.annotation.chat_fixtures import CHAT_STUDY, chat_serving, chat_store
from tests.annotation.conftest import add_responses
from tests.annotation.page_fixtures import answer, item_count
from tests.annotation.pairwise_fixtures import make_ab_study
from tests.axe import axe_violations, describe
from tests.browser import chromium_page, live_server
from tests.conftest import SAMPLE_ED
from tests.prolific.conftest import CSRF, PROLIFIC_STUDY_ID, SESSION, study_file

PHONE = {"width": 375, "height": 667}
LAPTOP = {"width": 1280, "height": 800}
VIEWPORTS = pytest.mark.parametrize("viewport", [PHONE, LAPTOP], ids=["phone", "laptop"])
# A conversation before the reply of up to this many words is a typical one: in the bundled sample's 348 test
# contexts the median is 31 words and three in four have 41 or fewer.
TYPICAL_WORDS = 60
# A reply of the length of an ED listener's turn (about 25 words): the item the height bound is about.
TYPICAL_REPLY = ("That sounds really hard. Eight years is a long time, so it is normal to feel lost for a while. "
                 "How are you coping?")
SEVEN = ["1 - Strongly disagree", "2 - Disagree", "3 - Somewhat disagree", "4 - Neither", "5 - Somewhat agree",
         "6 - Agree", "7 - Strongly agree"]
# Per study: its kind's keys answering one item (each followed by Enter), and whether its options are a scale.
KINDS = {
    "five": (["3", "4", "2"], True),
    "seven": (["4", "6", "2"], True),
    "ab": (["A", "B", "T"], False),
    "bws": (["A", "B", "B", "C", "A", "C"], False),
}


def likert(name: str, scale: dict | None = None) -> dict:
    return {"name": name, "seed": 2, "contexts": {"split": "test", "count": 8}, "systems": {"names": ["typical"]},
            "design": {"ratings_per_response": 2, "items_per_assignment": 4, "control_rate": 0.0},
            **({"scale": scale} if scale else {})}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One store (a SQLite file) holding a 5-point and a 7-point Likert study, an A/B study, a best-worst study of
    four replies and a Likert study recruited on Prolific, a submitted assignment with a comment, served by the app:
    (engine, app, base URL)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EMPEVAL_SECRET_KEY", "phone-layout-tests-" + "k" * 32)
        engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('phone') / 'phone.db'}")
        upgrade(engine)
        import_dialogues(engine, parse_ed_csv(SAMPLE_ED / "test.csv", "test"), dataset="empatheticdialogues")
        make_ab_study(engine, name="ab", count=8, k=2, per_assignment=4, control_rate=0.0)
        add_responses(engine, ["typical"], 30, text=lambda system, context_id: TYPICAL_REPLY)
        create_study(engine, parse_study(likert("five")))
        create_study(engine, parse_study(likert("seven", {"min": 1, "max": 7, "labels": SEVEN})))
        make_bws_study(engine, name="bws", size=4, control_rate=0.0, with_responses=False,
                       systems=["sys-a", "sys-b", "sys-c", "typical"])
        create_study(engine, parse_study(study_file("recruit")))
        rita, _ = invite(engine, "rita", "five")
        submit_after(engine, rita.id, 12, study="five", comment="A reply was cut off mid-sentence, and another "
                     "repeated the speaker's words back to her without adding anything.")
        app = make_app(str(engine.url))
        with live_server(app) as base:
            yield engine, app, base
        engine.dispose()


@pytest.fixture(scope="module")
def live_kinds(tmp_path_factory, sample_templates):
    """The ACUTE-Eval study over a finished chat study, and a chat study whose partners answer live, each on a
    SQLite copy of the sample store and served: {kind: (engine, base URL)}."""
    acute, _ = acute_store(tmp_path_factory.mktemp("phone-acute"), sample_templates, raters=())
    chat, _ = chat_store(tmp_path_factory.mktemp("phone-chat"), sample_templates, raters=())
    with live_server(make_app(str(acute.url))) as acute_base, chat_serving(chat) as chat_base:
        yield {"acute": (acute, acute_base), "chat": (chat, chat_base)}
    acute.dispose()


def fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def scales(page) -> list[dict]:
    """Per question on screen: the rows its options stand on, their widths, the right edge of the last, and on a
    rating scale the labels of its ends as shown and where they stand."""
    return page.evaluate("""() => [...document.querySelectorAll('#item .scale')].map(s => {
        const boxes = [...s.querySelectorAll('label')].map(l => l.getBoundingClientRect());
        const ends = s.previousElementSibling && s.previousElementSibling.matches('.scale-ends')
            ? s.previousElementSibling : null;
        const shown = ends && getComputedStyle(ends).display !== 'none';
        return { rows: new Set(boxes.map(b => Math.round(b.top))).size, widths: boxes.map(b => b.width),
                 right: Math.max(...boxes.map(b => b.right)),
                 ends: shown ? [...ends.children].map(e => e.textContent) : null,
                 endsBottom: shown ? ends.getBoundingClientRect().bottom : null,
                 top: Math.min(...boxes.map(b => b.top)),
                 labelWidths: [...s.querySelectorAll('.point-label')].map(l => l.getBoundingClientRect().width),
               }; })""")


def item_height(page) -> dict:
    """The item on screen: from its heading to the bottom of Back / Next (`span`, px), the part of it that is not the
    conversation (`questions`), and the words of the conversation before the reply to rate (`words`)."""
    return page.evaluate("""() => {
        const top = document.querySelector('#item-heading').getBoundingClientRect().top;
        const span = document.querySelector('#item .nav').getBoundingClientRect().bottom - top;
        const conversation = document.querySelector('#item .conversation').getBoundingClientRect().height;
        const words = [...document.querySelectorAll('#item .conversation .turn:not(.response)')]
            .map(t => t.childNodes[1].textContent.split(/\\s+/).filter(Boolean).length).reduce((a, b) => a + b, 0);
        return { span, questions: span - conversation, words }; }""")


def ring_clear_of_label(page, box: str, label: str) -> tuple[bool, dict]:
    """Whether the focus ring of the focused text box `box` (its border box grown by the outline's width and
    offset) stays clear of its label's box; and the numbers."""
    page.focus(box)
    found = page.evaluate("""([box, label]) => {
        const t = document.querySelector(box), s = getComputedStyle(t), l = document.querySelector(label);
        const grow = s.outlineStyle === 'none' ? 0 : parseFloat(s.outlineWidth) + parseFloat(s.outlineOffset);
        const b = t.getBoundingClientRect(), a = l.getBoundingClientRect();
        return { focused: document.activeElement === t, grow, ring: [b.left - grow, b.top - grow, b.right + grow,
                 b.bottom + grow], label: [a.left, a.top, a.right, a.bottom] }; }""", [box, label])
    ring, text = found["ring"], found["label"]
    apart = ring[0] >= text[2] or ring[2] <= text[0] or ring[1] >= text[3] or ring[3] <= text[1]
    return found["focused"] and found["grow"] > 0 and apart, found


@VIEWPORTS
@pytest.mark.parametrize("study", list(KINDS))
def test_every_step_of_the_rater_page_fits_and_a_questions_options_stand_on_one_row_at_equal_widths(
        site, study, viewport):
    engine, _, base = site
    keys, is_scale = KINDS[study]
    _, token = invite(engine, f"{study}-{viewport['width']}", study)
    phone = viewport is PHONE
    with chromium_page(viewport=viewport) as page:
        page.goto(f"{base}/annotate#{token}")
        page.wait_for_selector("#consent")
        assert fits(page), "consent"
        page.click("#consent-accept")
        page.wait_for_selector("#instructions")
        assert fits(page), "instructions"
        page.click("#start")
        typical = 0
        for i in range(item_count(page)):
            page.wait_for_selector(f"#item[data-position='{i}']")
            assert fits(page), f"item {i}"
            for q, shown in enumerate(scales(page)):
                where = f"item {i}, question {q}: {shown}"
                assert shown["rows"] == 1, where
                assert max(shown["widths"]) - min(shown["widths"]) < 1, where
                assert shown["right"] <= viewport["width"], where
                if phone:
                    assert min(shown["widths"]) >= 44, where  # a tap target
                if is_scale:
                    labels = SEVEN if study == "seven" else ["1 - Not at all", "5 - Completely"]
                    if phone:  # the numbers in the options, the ends' labels above them
                        assert shown["ends"] == [labels[0], labels[-1]], where
                        assert shown["endsBottom"] <= shown["top"], where
                        assert max(shown["labelWidths"]) <= 1, where
                    else:  # the whole labels in the options, as before
                        assert shown["ends"] is None and min(shown["labelWidths"]) > 20, where
            if phone and is_scale:
                tall = item_height(page)
                assert tall["questions"] <= 0.8 * PHONE["height"], (i, tall)  # the same whatever the conversation
                if tall["words"] <= TYPICAL_WORDS:
                    assert tall["span"] <= 1.3 * PHONE["height"], f"item {i}: {tall['span'] / 667:.2f} screens, {tall}"
                    typical += 1
            answer(page, keys)
        assert typical >= (2 if phone and is_scale else 0)  # the bound was measured on typical items
        page.wait_for_selector("#review")
        assert fits(page), "review"
        clear, found = ring_clear_of_label(page, "#comment", "label[for=comment]")
        assert clear, found


@VIEWPORTS
def test_the_acute_and_chat_pages_fit_and_a_text_boxs_focus_ring_keeps_clear_of_its_label(live_kinds, viewport):
    for kind, study, ready, box in (("acute", ACUTE, "#item", "#why-empathy"), ("chat", CHAT_STUDY, "#composer",
                                                                                   "#chat-input")):
        engine, base = live_kinds[kind]
        _, token = invite(engine, f"{kind}-{viewport['width']}", study)
        with chromium_page(viewport=viewport) as page:
            page.goto(f"{base}/annotate#{token}")
            page.wait_for_selector("#consent")
            assert fits(page), (kind, "consent")
            page.click("#consent-accept")
            page.wait_for_selector("#instructions")
            assert fits(page), (kind, "instructions")
            page.click("#start")
            page.wait_for_selector(ready)
            assert fits(page), (kind, "item")
            for shown in scales(page):
                assert shown["rows"] == 1 and max(shown["widths"]) - min(shown["widths"]) < 1, (kind, shown)
                assert shown["right"] <= viewport["width"], (kind, shown)
            clear, found = ring_clear_of_label(page, box, f"label[for={box[1:]}]")
            assert clear, (kind, found)


def test_on_a_phone_a_labelled_scale_keeps_each_options_whole_label_as_its_name(site):
    engine, _, base = site
    _, token = invite(engine, "names-phone", "seven")
    with chromium_page(viewport=PHONE) as page:
        page.goto(f"{base}/annotate#{token}")
        page.click("#consent-accept")
        page.click("#start")
        question = page.locator("#item fieldset.question").first
        for point, label in enumerate(SEVEN, start=1):
            assert question.get_by_role("radio", name=label, exact=True).get_attribute("value") == str(point)
        shown = question.locator(".scale label").evaluate_all(
            "ls => ls.map(l => getComputedStyle(l, '::before').content)")
        assert [s.split("/")[0].strip().strip('"') for s in shown] == [str(p) for p in range(1, 8)]
        assert axe_violations(page) == [], describe(axe_violations(page))


def admin_pages(base: str) -> list[str]:
    return [f"{base}/admin", *(f"{base}/admin/studies/{s}" for s in (*KINDS, "recruit")),
            f"{base}/admin/studies/five/preview"]


@VIEWPORTS
def test_the_dashboard_fits_and_its_tables_scroll_in_their_own_box(site, viewport):
    engine, _, base = site
    token = admin_token(secret_key(engine))
    with chromium_page(viewport=viewport, bypass_csp=True) as page:
        page.goto(f"{base}/admin#{token}")
        page.wait_for_selector("a.study-link")
        scrolled = []
        for url in admin_pages(base):
            page.goto(url)
            page.wait_for_load_state("load")
            if url.endswith("/preview"):
                page.wait_for_selector("#consent")
            assert fits(page), url
            tables = page.evaluate("""() => [...document.querySelectorAll('table')].map(t => ({
                right: t.getBoundingClientRect().right, wide: t.scrollWidth > t.clientWidth + 1,
                keyboard: t.tabIndex === 0 }))""")
            assert all(t["right"] <= viewport["width"] for t in tables), (url, tables)
            assert all(t["keyboard"] == t["wide"] for t in tables), (url, tables)  # a table that scrolls takes focus
            scrolled += [url for t in tables if t["wide"]]
            if viewport is PHONE and url.endswith("/five"):
                assert axe_violations(page) == [], describe(axe_violations(page))
    if viewport is PHONE:
        assert f"{base}/admin/studies/five" in scrolled  # the case this test is about: wider than the phone
    else:
        assert scrolled == []  # the laptop's tables are whole, as before


def visit(pid: str) -> str:
    """The query Prolific adds to the study link for participant `pid`."""
    return f"?PROLIFIC_PID={pid}&STUDY_ID={PROLIFIC_STUDY_ID}&SESSION_ID={SESSION}"


@VIEWPORTS
def test_the_prolific_pages_share_the_base_template_and_stylesheet_and_fit(site, viewport):
    engine, app, base = site
    link = f"{base}/prolific/{make_study_token(secret_key(engine), 'recruit')}"
    pid = uuid.uuid4().hex[:24]
    done = app.test_client()  # a participant who came in and submitted already
    assert done.get(link.removeprefix(base) + visit(pid)).status_code == 303
    assignment = done.get("/api/annotate/next", headers=CSRF).get_json()["assignment"]
    body = {"submission_id": uuid.uuid4().hex, "ratings": [
        {"item_id": item["item_id"], "scores": {c["key"]: 4 for c in assignment["criteria"]}, "seconds": 3.0}
        for item in assignment["items"]]}
    assert done.post(f"/api/assignments/{assignment['assignment_id']}/submit", headers=CSRF, json=body) \
        .status_code == 200
    with chromium_page(viewport=viewport) as page:
        page.goto(link + visit(uuid.uuid4().hex[:24]))  # a newcomer: the task page, at its consent
        page.wait_for_selector("#consent")
        assert fits(page), "start"
        for what, address, selector in (("refusal", link + visit("not-an-id"), "#refusal"),
                                        ("completion", link + visit(pid), "#completion-code")):
            page.goto(address)
            page.wait_for_selector(selector)
            assert fits(page), what
            styled = page.evaluate("""() => ({
                sheets: [...document.styleSheets].map(s => new URL(s.href).pathname),
                font: getComputedStyle(document.body).fontFamily,
                width: document.querySelector('main').clientWidth })""")
            assert styled["sheets"] == ["/static/admin.css"], (what, styled)
            assert "system-ui" in styled["font"], (what, styled)
            assert styled["width"] <= 40 * 16, (what, styled)  # a column that reads well, not the whole laptop
        code = page.locator("#completion-code")
        assert code.evaluate("c => parseFloat(getComputedStyle(c).fontSize)") > 20
        link_box = page.locator("#completion-link").bounding_box()
        assert link_box["height"] >= 44 and link_box["x"] + link_box["width"] <= viewport["width"]
