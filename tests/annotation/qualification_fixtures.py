"""Studies with a qualification, made the normal way (a study file through parse_study and create_study): a Likert and
an A/B study over stand-in systems with stored responses, each with three gold items whose right answers are known,
and helpers that answer them right or wrong through the app's routes."""
from __future__ import annotations

from typing import Any

from empeval.server.annotation.annotators import invite
from empeval.tasks.study_create import create_study
from empeval.tasks.study_file import parse_study
from tests.annotation.conftest import add_responses

SYSTEMS = ["sys-a", "sys-b"]
CSRF = {"X-Requested-With": "empeval"}

# Three Likert gold items: a reply that ignores the speaker, a caring one, a garbled one.
LIKERT_GOLD = [
    {"context": ["I finally passed my driving test after three tries!"],
     "response": "Driving tests are held on weekdays.",
     "answer": {"empathy": [1, 2], "relevance": [1, 3], "fluency": [4, 5]},
     "feedback": "The reply states a fact about tests and ignores her joy: low empathy, but fluent English."},
    {"context": ["My grandmother passed away last night.", "Oh no, I am so sorry.", "We were very close."],
     "response": "That must be so painful. Losing someone you were close to leaves a real gap.",
     "answer": {"empathy": [4, 5], "relevance": [4, 5], "fluency": [4, 5]},
     "feedback": "It names the loss and the closeness she spoke of: high on every question."},
    {"context": ["I got a puppy for my birthday!"],
     "response": "puppy the birthday got for I!!",
     "answer": {"empathy": [1, 3], "relevance": [1, 4], "fluency": 1},
     "feedback": "The words are scrambled: fluency 1, whatever else it touches on."},
]
# Scores a careful rater gives each Likert gold item (all right), and one that gets every item wrong.
LIKERT_RIGHT = [{"empathy": 1, "relevance": 2, "fluency": 5}, {"empathy": 5, "relevance": 5, "fluency": 4},
                {"empathy": 1, "relevance": 1, "fluency": 1}]
LIKERT_WRONG = [{"empathy": 5, "relevance": 5, "fluency": 5}, {"empathy": 1, "relevance": 1, "fluency": 1},
                {"empathy": 5, "relevance": 5, "fluency": 5}]

PAIRWISE_GOLD = [
    {"context": ["I passed my nursing exam!"], "response_a": "Exams are held several times a year.",
     "response_b": "Congratulations! All those late nights paid off.",
     "answer": {"empathy": "B", "relevance": "B", "fluency": ["A", "B", "T"]},
     "feedback": "B shares her joy and follows the conversation; both read well."},
    {"context": ["My car broke down on the way to my interview."],
     "response_a": "Oh no, that is awful timing. Did you manage to let them know?",
     "response_b": "interview car the down broke",
     "answer": {"empathy": "A", "relevance": "A", "fluency": "A"},
     "feedback": "B is scrambled words; A answers her worry."},
]
PAIRWISE_RIGHT = [{"empathy": "B", "relevance": "B", "fluency": "T"},
                  {"empathy": "A", "relevance": "A", "fluency": "A"}]


def likert_file(name: str = "qual", *, qualification: dict | None = None, **top: Any) -> dict:
    return {"name": name, "seed": 4, "contexts": {"split": "test", "count": 6}, "systems": {"names": SYSTEMS},
            "design": {"ratings_per_response": 2, "items_per_assignment": 3},
            "qualification": qualification if qualification is not None else {
                "min_correct": 2, "intro": "Three practice replies first.", "items": LIKERT_GOLD},
            **top}


def pairwise_file(name: str = "qual-ab", *, qualification: dict | None = None, **top: Any) -> dict:
    return {"name": name, "kind": "pairwise", "seed": 4, "contexts": {"split": "test", "count": 4},
            "systems": {"names": SYSTEMS}, "design": {"judgments_per_pair": 2, "items_per_assignment": 2},
            "qualification": qualification if qualification is not None else {"min_correct": 2,
                                                                               "items": PAIRWISE_GOLD},
            **top}


def make_likert(engine, **changes: Any):
    add_responses(engine, SYSTEMS, 12)
    return create_study(engine, parse_study(likert_file(**changes)))


def rater(app, engine, name: str, study: str = "qual"):
    """A test client holding `name`'s invite to `study` (as Bearer, as a script would send it), and her id."""
    annotator, token = invite(engine, name, study)
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return client, annotator.id


def answer(client, item: int, scores: dict, attempt: int = 1):
    return client.post("/api/annotate/qualification/answers", json={"item": item, "attempt": attempt,
                                                                    "answer": scores})


def go_through(client, answers: list[dict], attempt: int = 1) -> dict:
    """Answer every gold item in order (each reply checked to be 200); the last reply."""
    reply: dict = {}
    for item, scores in enumerate(answers):
        sent = answer(client, item, scores, attempt)
        assert sent.status_code == 200, sent.get_json()
        reply = sent.get_json()
    return reply
