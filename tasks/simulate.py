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

The same raters can judge a pairwise (A/B) study: each response is perceived as its latent quality (the
system's quality plus the response's own deviation, the very numbers a Likert rater of that response is
drawn from), and the rater chooses the better one the Thurstone way (case V, as analysis.simulate_pairwise
does): each side perceived with the rater's noise, the difference stretched like their use of the scale
(severity shifts both sides and cancels), a tie when the two are within `tie_band`, the left side helped by
`position_bias`. Random clickers choose uniformly, straight-liners always pick the same screen side, and
context-ignorers judge every criterion by fluency.
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

from empeval.server.errors import EmpevalError

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

    def choices(self, left: str, right: str, criteria: tuple[str, ...], model: CrowdModel, rng: random.Random, *,
                ties: bool = True, left_deviation: Mapping[str, float] | None = None,
                right_deviation: Mapping[str, float] | None = None) -> dict[str, str]:
        """This rater's choice per criterion between a response of `left` (shown on the left, as A) and one of
        `right` (B), each with its own deviation from its system's quality: "A", "B" or "T" (a tie, only when
        `ties`), the task page's keys. See the module docstring for the model."""
        if self.kind == "random":
            options = ("A", "B", "T") if ties else ("A", "B")
            return {c: rng.choice(options) for c in criteria}
        if self.kind == "straight":  # one screen side for everything, which side fixed by the rater
            return {c: "A" if self.severity >= 0 else "B" for c in criteria}
        left_deviation, right_deviation = left_deviation or {}, right_deviation or {}
        chosen = {}
        for c in criteria:
            judged = "fluency" if self.kind == "ignores-context" else c
            difference = (self.stretch * (model.latent(left, judged) + left_deviation.get(judged, 0.0)
                                          - model.latent(right, judged) - right_deviation.get(judged, 0.0))
                          + model.position_bias + rng.gauss(0, model.noise_sd) - rng.gauss(0, model.noise_sd))
            chosen[c] = "T" if ties and abs(difference) < model.tie_band else ("A" if difference > 0 else "B")
        return chosen

    def seconds(self, model: CrowdModel, rng: random.Random) -> float:
        median = model.seconds_median / (5 if self.kind == "random" else 1)
        return round(math.exp(rng.gauss(math.log(median), 0.4)), 1)


def draw_crowd(n: int, model: CrowdModel, seed: int, *, bad: int | None = None, prefix: str = "sim") -> list[Rater]:
    """n raters named PREFIX-000, PREFIX-001, ...; with `bad` given, exactly that many bad ones (kinds rotated),
    else a random share."""
    rng = random.Random(seed)
    raters = []
    for i in range(n):
        kind = None if bad is None else (RATER_KINDS[1 + i % 3] if i < bad else "good")
        raters.append(Rater.draw(f"{prefix}-{i:03d}", model, rng, kind))
    return raters


@dataclass
class SimulationResult:
    submissions: int = 0
    ratings: int = 0
    errors: list[str] = field(default_factory=list)
    raters: list[Rater] = field(default_factory=list)
    choices: int = 0  # A/B choices stored (a pairwise study)


class UnknownItem(EmpevalError):
    """The app handed out an item the simulation has no truth for (recorded as the rater's error, never raised
    out of the crowd run)."""


# What a simulated rater sends for one assignment: (rater, their random stream, the assignment's payload) ->
# the submission body without its submission id.
Answer = Callable[[Rater, random.Random, dict], dict]


def run_crowd_over_http(base_url: str, invites: Mapping[str, str], raters: list[Rater], item_systems: Mapping[int, str],
                        *, model: CrowdModel = CrowdModel(), seed: int = 0, time_scale: float = 0.0,
                        max_workers: int = 8, on_submit: Callable[[int], None] | None = None) -> SimulationResult:
    """Let `raters` (their invite tokens in `invites`, by rater name) rate through the app's HTTP API until
    no work is left for them. `item_systems` maps item ids to system names: the hidden truth that only the
    simulation knows. Each rater sleeps `time_scale` x their simulated seconds per item (0: no waiting)."""

    def rate(rater: Rater, rng: random.Random, assignment: dict) -> dict:
        criteria = tuple(c["key"] for c in assignment["criteria"])
        ratings = []
        for item in assignment["items"]:
            seconds = rater.seconds(model, rng)
            if time_scale:
                time.sleep(seconds * time_scale)
            deviation = model.response_deviation(item["item_id"], seed, criteria)
            ratings.append({"item_id": item["item_id"], "seconds": seconds,
                            "scores": rater.scores(item_systems[item["item_id"]], criteria, model, rng, deviation)})
        return {"ratings": ratings}

    return _work_over_http(base_url, invites, raters, rate, seed=seed, max_workers=max_workers, on_submit=on_submit)


@dataclass(frozen=True)
class ShownPair:
    """What one placement of a pairwise assignment shows, as only the simulation may know it: the systems on
    the left (A) and on the right (B), and the keys of their responses' fixed deviations
    (CrowdModel.response_deviation)."""

    left: str
    right: str
    left_key: object
    right_key: object


def run_pairwise_crowd_over_http(base_url: str, invites: Mapping[str, str], raters: list[Rater],
                                 placements: Mapping[tuple[int, int], ShownPair], *,
                                 model: CrowdModel = CrowdModel(), seed: int = 0, time_scale: float = 0.0,
                                 max_workers: int = 8,
                                 on_submit: Callable[[int], None] | None = None) -> SimulationResult:
    """Let `raters` judge a pairwise (A/B) study through the app's HTTP API, as run_crowd_over_http rates a
    Likert one: next assignment, one choice per pair and criterion (Rater.choices), submit, until no work is
    left. `placements` ((assignment id, pair item id) -> ShownPair, from `pair_placements`) is the hidden truth;
    a response's deviation is drawn with `seed` from its key, so with the seed of a linked Likert study's run
    each response keeps the quality its Likert raters saw."""

    def judge(rater: Rater, rng: random.Random, assignment: dict) -> dict:
        criteria = tuple(c["key"] for c in assignment["criteria"])
        ties = bool(assignment.get("ties", True))
        judgments = []
        for item in assignment["items"]:
            shown = placements.get((assignment["assignment_id"], item["item_id"]))
            if shown is None:
                raise UnknownItem(f"pair item {item['item_id']} of assignment {assignment['assignment_id']} is not "
                                  "among the placements the simulation was given")
            seconds = rater.seconds(model, rng)
            if time_scale:
                time.sleep(seconds * time_scale)
            chosen = rater.choices(shown.left, shown.right, criteria, model, rng, ties=ties,
                                   left_deviation=model.response_deviation(shown.left_key, seed, criteria),
                                   right_deviation=model.response_deviation(shown.right_key, seed, criteria))
            judgments.append({"item_id": item["item_id"], "seconds": seconds, "choices": chosen})
        return {"judgments": judgments}

    return _work_over_http(base_url, invites, raters, judge, seed=seed, max_workers=max_workers, on_submit=on_submit)


def _work_over_http(base_url: str, invites: Mapping[str, str], raters: list[Rater], answer: Answer, *, seed: int,
                    max_workers: int, on_submit: Callable[[int], None] | None) -> SimulationResult:
    """Each rater, in a pool of `max_workers` threads, asks for the next assignment, answers it (`answer`) and
    submits it, until the app has nothing left for them; every refusal is recorded in `errors` and stops that
    rater."""
    result = SimulationResult(raters=list(raters))
    lock = threading.Lock()

    def work(rater: Rater) -> None:
        rng = random.Random(f"{seed}-{rater.name}")
        session = requests.Session()
        headers = {"Authorization": f"Bearer {invites[rater.name]}"}
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
                    result.ratings += receipt.get("ratings", 0)
                    result.choices += receipt.get("choices", 0)
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


def item_systems(engine, study: str) -> dict[int, str]:
    """item id -> system name for a study: the truth the simulated raters need (the API hides it)."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    from empeval.server.store.models import Response, Study, StudyItem, System

    with Session(engine) as session:
        return dict(session.execute(
            select(StudyItem.id, System.name).join(Response, Response.id == StudyItem.response_id)
            .join(System, System.id == Response.system_id).join(Study, Study.id == StudyItem.study_id)
            .where(Study.name == study)).all())


def pair_placements(engine, study: str) -> dict[tuple[int, int], ShownPair]:
    """(assignment id, pair item id) -> ShownPair for every placement of a pairwise study: the truth the A/B
    simulation needs (the API hides it). A response that the study's linked Likert study (`compare_with`) rates
    is keyed by that study item's id, the key its Likert raters' deviation was drawn from; any other response by
    "response-ID". Read once: an assignment copied on expiry later has placements this map does not hold."""
    from sqlalchemy import select
    from sqlalchemy.orm import Session, aliased

    from empeval.server.store.models import AssignmentPair, PairItem, Response, Study, StudyItem, System
    from empeval.server.store.queries import study_by_name

    response_a, response_b = aliased(Response), aliased(Response)
    system_a, system_b = aliased(System), aliased(System)
    with Session(engine) as session:
        found = study_by_name(session, study)
        linked = found.config.compare_with
        likert_item: dict[int, int] = {}
        if linked:
            items = session.execute(select(StudyItem.response_id, StudyItem.id)
                                    .join(Study, Study.id == StudyItem.study_id)
                                    .where(Study.name == linked).order_by(StudyItem.id.desc())).all()
            # ids descending: a response's lowest item id is the one kept
            likert_item = {response_id: item_id for response_id, item_id in items}
        rows = session.execute(
            select(AssignmentPair.assignment_id, AssignmentPair.pair_item_id, AssignmentPair.shown_left,
                   system_a.name, PairItem.response_a_id, system_b.name, PairItem.response_b_id)
            .join(PairItem, PairItem.id == AssignmentPair.pair_item_id)
            .join(response_a, response_a.id == PairItem.response_a_id)
            .join(system_a, system_a.id == response_a.system_id)
            .join(response_b, response_b.id == PairItem.response_b_id)
            .join(system_b, system_b.id == response_b.system_id)
            .where(PairItem.study_id == found.id)).all()

    def key(response_id: int) -> object:
        return likert_item.get(response_id, f"response-{response_id}")

    placements = {}
    for assignment_id, pair_item_id, shown_left, name_a, id_a, name_b, id_b in rows:
        a, b = (name_a, key(id_a)), (name_b, key(id_b))
        (left, left_key), (right, right_key) = (a, b) if shown_left == "a" else (b, a)
        placements[assignment_id, pair_item_id] = ShownPair(left, right, left_key, right_key)
    return placements
