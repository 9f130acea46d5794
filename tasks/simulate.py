"""Simulated annotators: a rater model with known truth, used by the demo, the tests and the planner.

The model: each (system, criterion) has a latent quality on the 1-5 scale (defaults loosely follow the
ED papers: gold best, published models in between, each control low on the criterion it targets), and
each response deviates from its system's quality by its own amount (response_sd: some replies of a
system are better than others, and every rater sees the same reply). A good rater reports
round(3 + stretch * (quality + deviation - 3) + severity + noise), clipped to the scale: severity
(per rater) shifts everything, stretch (per rater) is how much of the scale they use, noise is per
rating. A share of raters are bad: random clickers (uniform scores, fast), straight-liners (one value
for all three criteria of an item) and context-ignorers (judge only the language: every criterion gets
their fluency impression). Simulated raters work through the real HTTP API of a running app,
concurrently, exactly as people would: ask for the next assignment, rate, submit.
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
RATER_KINDS = ("good", "random", "straight", "ignores-context")


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

    def latent(self, system: str, criterion: str) -> float:
        return self.quality.get(system, UNKNOWN_SYSTEM).get(criterion, 3.0)

    def response_deviation(self, item_key: object, seed: int, criteria: tuple[str, ...]) -> dict[str, float]:
        """The fixed quality deviation of one response, the same for every rater (seeded by the item)."""
        rng = random.Random(f"response-{seed}-{item_key}")
        return {c: rng.gauss(0.0, self.response_sd) for c in criteria}


@dataclass(frozen=True)
class Rater:
    name: str
    kind: str
    severity: float
    stretch: float

    @staticmethod
    def draw(name: str, model: CrowdModel, rng: random.Random, kind: str | None = None) -> Rater:
        if kind is None:
            kind = "good" if rng.random() >= model.bad_share else rng.choice(RATER_KINDS[1:])
        return Rater(name=name, kind=kind, severity=rng.gauss(0.0, model.severity_sd),
                     stretch=rng.uniform(*model.stretch_range))

    def scores(self, system: str, criteria: tuple[str, ...], model: CrowdModel, rng: random.Random,
               deviation: Mapping[str, float] | None = None) -> dict[str, int]:
        """This rater's scores for one response of `system` (whose own deviation from the system's quality
        is `deviation`, per criterion)."""
        deviation = deviation or {}
        low, high = model.scale
        clip = lambda x: int(min(high, max(low, round(x))))  # noqa: E731
        middle = (low + high) / 2
        if self.kind == "random":
            return {c: rng.randint(low, high) for c in criteria}
        if self.kind == "straight":
            fluency = model.latent(system, "fluency") + deviation.get("fluency", 0.0)
            value = clip(middle + self.stretch * (fluency - middle)
                         + self.severity + rng.gauss(0, model.noise_sd))
            return {c: value for c in criteria}
        judged = {c: "fluency" if self.kind == "ignores-context" else c for c in criteria}
        base = {c: model.latent(system, judged[c]) + deviation.get(judged[c], 0.0) for c in criteria}
        return {c: clip(middle + self.stretch * (base[c] - middle) + self.severity + rng.gauss(0, model.noise_sd))
                for c in criteria}

    def seconds(self, model: CrowdModel, rng: random.Random) -> float:
        median = model.seconds_median / (5 if self.kind == "random" else 1)
        return round(math.exp(rng.gauss(math.log(median), 0.4)), 1)


def draw_crowd(n: int, model: CrowdModel, seed: int, *, bad: int | None = None) -> list[Rater]:
    """n raters; with `bad` given, exactly that many bad ones (kinds rotated), else a random share."""
    rng = random.Random(seed)
    raters = []
    for i in range(n):
        kind = None if bad is None else (RATER_KINDS[1 + i % 3] if i < bad else "good")
        raters.append(Rater.draw(f"sim-{i:03d}", model, rng, kind))
    return raters


@dataclass
class SimulationResult:
    submissions: int = 0
    ratings: int = 0
    errors: list[str] = field(default_factory=list)
    raters: list[Rater] = field(default_factory=list)


def run_crowd_over_http(base_url: str, invites: Mapping[str, str], raters: list[Rater], item_systems: Mapping[int, str],
                        *, model: CrowdModel = CrowdModel(), seed: int = 0, time_scale: float = 0.0,
                        max_workers: int = 8, on_submit: Callable[[int], None] | None = None) -> SimulationResult:
    """Let `raters` (their invite tokens in `invites`, by rater name) rate through the app's HTTP API until
    no work is left for them. `item_systems` maps item ids to system names: the hidden truth that only the
    simulation knows. Each rater sleeps `time_scale` x their simulated seconds per item (0: no waiting)."""
    result = SimulationResult(raters=list(raters))
    lock = threading.Lock()

    def work(rater: Rater, index: int) -> None:
        rng = random.Random(f"{seed}-{rater.name}")
        session = requests.Session()
        headers = {"Authorization": f"Bearer {invites[rater.name]}"}
        while True:
            answer = session.get(f"{base_url}/api/annotate/next", headers=headers, timeout=60)
            if answer.status_code != 200:
                with lock:
                    result.errors.append(f"{rater.name}: next -> {answer.status_code} {answer.text[:200]}")
                return
            assignment = answer.json().get("assignment")
            if assignment is None:
                return
            criteria = tuple(c["key"] for c in assignment["criteria"])
            ratings = []
            for item in assignment["items"]:
                seconds = rater.seconds(model, rng)
                if time_scale:
                    time.sleep(seconds * time_scale)
                deviation = model.response_deviation(item["item_id"], seed, criteria)
                ratings.append({"item_id": item["item_id"], "seconds": seconds,
                                "scores": rater.scores(item_systems[item["item_id"]], criteria, model, rng, deviation)})
            payload = {"submission_id": uuid.uuid4().hex, "ratings": ratings}
            sent = session.post(f"{base_url}/api/assignments/{assignment['assignment_id']}/submit", json=payload,
                                headers=headers, timeout=60)
            with lock:
                if sent.status_code == 200:
                    result.submissions += 1
                    result.ratings += sent.json()["ratings"]
                else:
                    result.errors.append(f"{rater.name}: submit -> {sent.status_code} {sent.text[:200]}")
                    return
            if on_submit:
                on_submit(1)

    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = [pool.submit(work, rater, i) for i, rater in enumerate(raters)]
        for future in futures:
            future.result()
    return result


def item_systems(engine, study: str) -> dict[int, str]:
    """item id -> system name for a study: the truth the simulated raters need (the API hides it)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from server.store.models import Response, Study, StudyItem, System

    with Session(engine) as session:
        return dict(session.execute(
            select(StudyItem.id, System.name).join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id).join(Study, Study.id == StudyItem.study_id)
            .where(Study.name == study)).all())
