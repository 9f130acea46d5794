"""Simulated annotators: a rater model with known truth, used by the demo, the tests and the planner.

The model: each (system, criterion) has a latent quality on the 1-5 scale (defaults loosely follow the
ED papers: gold best, published models in between, each control low on the criterion it targets), and
each response deviates from its system's quality by its own amount (response_sd: some replies of a
system are better than others, and every rater sees the same reply). A rater has a severity (shifts
everything), a stretch (how much of the scale she uses) and noise per answer; a share of raters behave badly:
random clickers (uniform answers, fast), straight-liners (one answer for everything they are shown) and
context-ignorers (judge only the language: every criterion gets their fluency impression). How a rater turns that
into an answer is the study kind's (its tasks part's `simulated_answers`: a Likert score, an A/B choice the
Thurstone way, ...); simulated raters work through the real HTTP API of a running app, concurrently, exactly as
people would: go through the study's qualification if it has one (a good rater answers its practice items right,
a careless one as her behaviour goes), ask for the next assignment, answer it, submit.
"""
from __future__ import annotations

import math
import random
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from empeval.server.errors import EmpevalError
from empeval.server.store.models import Study
from empeval.server.store.qualification_tables import QualificationItem
from empeval.server.store.statuses import QualificationStatus

CRITERIA = ("empathy", "relevance", "fluency")

# Latent means per system and criterion. Loosely in the range the ED papers report for human ratings
# (Rashkin et al. 2019; MoEL, MIME, KEMP papers): gold near 4, generative models mid-3s with fluency higher.
DEFAULT_QUALITY: dict[str, dict[str, float]] = {
    "gold": {"empathy": 4.1, "relevance": 4.3, "fluency": 4.5},
    "retrieval": {"empathy": 3.3, "relevance": 3.1, "fluency": 4.4},
    "retrieval-emoprepend": {"empathy": 3.4, "relevance": 3.1, "fluency": 4.4},
    "kemp": {"empathy": 3.5, "relevance": 3.4, "fluency": 3.9},
    "mime": {"empathy": 3.4, "relevance": 3.4, "fluency": 3.8},
    "moel": {"empathy": 3.3, "relevance": 3.3, "fluency": 3.9},
    "empdg": {"empathy": 3.4, "relevance": 3.3, "fluency": 3.9},
    "transformer": {"empathy": 3.0, "relevance": 3.1, "fluency": 3.9},
    "control-generic": {"empathy": 1.6, "relevance": 2.6, "fluency": 4.5},
    "control-mismatched": {"empathy": 2.4, "relevance": 1.5, "fluency": 4.3},
    "control-scrambled": {"empathy": 2.1, "relevance": 2.2, "fluency": 1.3},
}
UNKNOWN_SYSTEM = {"empathy": 3.0, "relevance": 3.0, "fluency": 3.5}
RATER_BEHAVIOURS = ("good", "random", "straight", "ignores-context")


@dataclass(frozen=True)
class CrowdModel:
    quality: Mapping[str, Mapping[str, float]] = field(default_factory=lambda: DEFAULT_QUALITY)
    severity_sd: float = 0.3
    stretch_range: tuple[float, float] = (0.8, 1.2)
    noise_sd: float = 0.6
    response_sd: float = 0.5  # how much one response differs from its system's mean quality
    bad_share: float = 0.15  # split equally between the three bad kinds
    seconds_median: float = 14.0  # time per item of a good rater (log-normal)
    scale: tuple[int, int] = (1, 5)
    tie_band: float = 0.3  # A/B: perceived qualities closer than this are a tie (when the study allows ties)
    position_bias: float = 0.0  # A/B: added to the left response's perceived quality (0: a fair rater)

    def latent(self, system: str, criterion: str) -> float:
        return self.quality.get(system, UNKNOWN_SYSTEM).get(criterion, 3.0)

    def response_deviation(self, item_key: object, seed: int, criteria: tuple[str, ...]) -> dict[str, float]:
        """The fixed quality deviation of one response, the same for every rater (seeded by the item)."""
        rng = random.Random(f"response-{seed}-{item_key}")
        return {c: rng.gauss(0.0, self.response_sd) for c in criteria}


@dataclass(frozen=True)
class Rater:
    """One simulated rater: how she behaves (RATER_BEHAVIOURS: "good", or one of the careless ways), how severe she
    is and how much of the scale she uses."""

    name: str
    behaviour: str
    severity: float
    stretch: float

    @staticmethod
    def draw(name: str, model: CrowdModel, rng: random.Random, behaviour: str | None = None) -> Rater:
        if behaviour is None:
            behaviour = "good" if rng.random() >= model.bad_share else rng.choice(RATER_BEHAVIOURS[1:])
        return Rater(name=name, behaviour=behaviour, severity=rng.gauss(0.0, model.severity_sd),
                     stretch=rng.uniform(*model.stretch_range))

    @property
    def careless(self) -> bool:
        return self.behaviour != "good"

    def judged(self, criterion: str) -> str:
        """The criterion whose impression she actually reports for `criterion`: a context-ignorer judges every
        criterion by the language alone (fluency)."""
        return "fluency" if self.behaviour == "ignores-context" else criterion

    def perceived(self, system: str, criterion: str, model: CrowdModel, deviation: Mapping[str, float] | None,
                  rng: random.Random) -> float:
        """What she perceives of one response of `system` on `criterion` (her judged criterion), on the scale's
        terms: the latent quality plus the response's deviation, stretched about the scale's middle, shifted by her
        severity, plus her noise."""
        judged = self.judged(criterion)
        low, high = model.scale
        middle = (low + high) / 2
        quality = model.latent(system, judged) + (deviation or {}).get(judged, 0.0)
        return middle + self.stretch * (quality - middle) + self.severity + rng.gauss(0, model.noise_sd)

    def seconds(self, model: CrowdModel, rng: random.Random) -> float:
        median = model.seconds_median / (5 if self.behaviour == "random" else 1)
        return round(math.exp(rng.gauss(math.log(median), 0.4)), 1)


def draw_crowd(n: int, model: CrowdModel, seed: int, *, bad: int | None = None, prefix: str = "sim") -> list[Rater]:
    """n raters named PREFIX-000, PREFIX-001, ...; with `bad` given, exactly that many bad ones (kinds rotated),
    else a random share."""
    rng = random.Random(seed)
    raters = []
    for i in range(n):
        behaviour = None if bad is None else (RATER_BEHAVIOURS[1 + i % 3] if i < bad else "good")
        raters.append(Rater.draw(f"{prefix}-{i:03d}", model, rng, behaviour))
    return raters


@dataclass
class SimulationResult:
    submissions: int = 0
    answers: int = 0  # what the receipts counted as stored (ratings, choices, ...)
    errors: list[str] = field(default_factory=list)
    raters: list[Rater] = field(default_factory=list)
    # Raters who failed the study's qualification (and so did no real work), by name.
    not_qualified: list[str] = field(default_factory=list)


# What a simulated rater sends for one assignment: (rater, her random stream, the assignment's payload) ->
# the submission body without its submission id.
Answer = Callable[[Rater, random.Random, dict], dict]


# What a simulated rater answers to one practice item of a study's qualification: (rater, her random stream, the
# item's position, the choices offered, the criteria) -> the answer per criterion.
Qualify = Callable[[Rater, random.Random, int, list, list], dict]


def qualification_truth(engine: Engine, study: str) -> dict[int, dict[str, list]]:
    """The answers counted right per criterion of each gold item of `study`'s qualification, by position: the truth
    a simulated rater needs (the API hides it); {} for a study without one."""
    with Session(engine) as session:
        return {position: dict(accepted) for position, accepted in session.execute(
            select(QualificationItem.position, QualificationItem.accepted)
            .join(Study, Study.id == QualificationItem.study_id).where(Study.name == study))}


def simulated_qualification(engine: Engine, study: str) -> Qualify:
    """How simulated raters answer `study`'s practice items: a good rater gives an answer counted right (one of them
    at random), a straight-liner the first choice to every question, any other careless rater a choice at random."""
    truth = qualification_truth(engine, study)

    def qualify(rater: Rater, rng: random.Random, position: int, choices: list, criteria: list) -> dict:
        values = [choice["value"] for choice in choices]
        if rater.behaviour == "good" and position in truth:
            return {c["key"]: rng.choice(truth[position][c["key"]]) for c in criteria}
        if rater.behaviour == "straight":
            return {c["key"]: values[0] for c in criteria}
        return {c["key"]: rng.choice(values) for c in criteria}

    return qualify


def _take_qualification(session: requests.Session, base_url: str, headers: dict[str, str], rater: Rater,
                        rng: random.Random, qualify: Qualify) -> str | None:
    """Answer the study's qualification through the app, item after item and attempt after attempt, until it is
    decided: the outcome (QualificationStatus.PASSED or FAILED), None when the study has none, or an "error: ..."
    line."""
    state = session.get(f"{base_url}/api/annotate/qualification", headers=headers, timeout=60)
    if state.status_code != 200:
        return f"error: qualification -> {state.status_code} {state.text[:200]}"
    current = state.json()
    if not current.get("required"):
        return None
    while current["status"] == QualificationStatus.PENDING:
        answered = {reply["item"] for reply in current["answered"]}
        position = next(item["position"] for item in current["items"] if item["position"] not in answered)
        body = {"item": position, "attempt": current["attempt"],
                "answer": qualify(rater, rng, position, current["choices"], current["criteria"])}
        sent = session.post(f"{base_url}/api/annotate/qualification/answers", json=body, headers=headers, timeout=60)
        if sent.status_code != 200:
            return f"error: qualification answer -> {sent.status_code} {sent.text[:200]}"
        current = sent.json()["state"]
    return current["status"]


class UnknownItem(EmpevalError):
    """The app handed out an item the simulation has no truth for (recorded as the rater's error, never raised
    out of the crowd run)."""


def run_crowd_over_http(base_url: str, invites: Mapping[str, str], raters: list[Rater], answer: Answer, *,
                        counted: str, seed: int = 0, time_scale: float = 0.0, max_workers: int = 8,
                        on_submit: Callable[[int], None] | None = None,
                        qualify: Qualify | None = None) -> SimulationResult:
    """Let `raters` (their invite tokens in `invites`, by rater name) work through the app's HTTP API until no work
    is left for them: each, in a pool of `max_workers` threads, asks for the next assignment, answers it (`answer`,
    the study kind's `simulated_answers`: the hidden truth only the simulation knows) and submits it; `counted` is
    the receipt's count of what was stored (the kind's word: "ratings", "choices"). Each rater sleeps `time_scale` x
    her simulated seconds per unit (0: no waiting). Every refusal is recorded in `errors` and stops that rater.
    With `qualify` (simulated_qualification), each rater first goes through the study's qualification, if it has one;
    one who fails it is listed in `not_qualified` and does no real work."""
    result = SimulationResult(raters=list(raters))
    lock = threading.Lock()

    def work(rater: Rater) -> None:
        rng = random.Random(f"{seed}-{rater.name}")
        session = requests.Session()
        headers = {"Authorization": f"Bearer {invites[rater.name]}"}
        if qualify is not None:
            outcome = _take_qualification(session, base_url, headers, rater, rng, qualify)
            if outcome is not None and outcome != QualificationStatus.PASSED:
                with lock:
                    if outcome.startswith("error: "):
                        result.errors.append(f"{rater.name}: {outcome.removeprefix('error: ')}")
                    else:
                        result.not_qualified.append(rater.name)
                return
        while True:
            reply = session.get(f"{base_url}/api/annotate/next", headers=headers, timeout=60)
            if reply.status_code != 200:
                with lock:
                    result.errors.append(f"{rater.name}: next -> {reply.status_code} {reply.text[:200]}")
                return
            assignment = reply.json().get("assignment")
            if assignment is None:
                return
            try:
                body = answer(rater, rng, assignment)
                if time_scale:
                    time.sleep(sum(entry.get("seconds") or 0 for entries in body.values()
                                   if isinstance(entries, list) for entry in entries) * time_scale)
            except UnknownItem as err:
                with lock:
                    result.errors.append(f"{rater.name}: {err.args[0]}")
                return
            payload = {"submission_id": uuid.uuid4().hex, **body}
            sent = session.post(f"{base_url}/api/assignments/{assignment['assignment_id']}/submit", json=payload,
                                headers=headers, timeout=60)
            with lock:
                if sent.status_code == 200:
                    receipt = sent.json()
                    result.submissions += 1
                    result.answers += receipt.get(counted, 0)
                else:
                    result.errors.append(f"{rater.name}: submit -> {sent.status_code} {sent.text[:200]}")
                    return
            if on_submit:
                on_submit(1)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = [pool.submit(work, rater) for rater in raters]
        for future in futures:
            future.result()
    return result
