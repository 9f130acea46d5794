"""A study's pre-registered decisions looked at after submissions, off the request path, at a bounded cost.

`look` is one look at a study's [decisions] (server/annotation/decisions.py), model-assisted with the judge that
judged the study most recently when one has (a Likert study's item judges, an A/B study's judge of differences):
what `empeval study status` prints and the study page shows.

`DecisionWatch.after_submission` is what the submit route calls once a submission is stored: when the study's
[decisions] say stop_when_decided, a look is taken in a background thread and closes the study's claims if everything
is decided or the budget is spent. The submission's answer never waits for it. The cost is bounded per process and
study: one look at a time, and the next no sooner than ``MIN_INTERVAL_S`` after the last one began nor sooner than
``COST_FACTOR`` times the last look's duration after it ended (a look reads every rating of the study, 0.1-1 s for
a large one: at most about 1/COST_FACTOR of a core spent on looks, however fast submissions come). So claims close
within about MIN_INTERVAL_S of the decisive rating, or of the next submission after it; what is claimed meanwhile is
finished and stored as ever (started work is never cut off). The study page only shows the decisions: a GET
changes nothing.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from empeval.server.annotation.decisions import (
    DecisionStatus,
    JudgeInput,
    close_claims_if_decided,
    decision_status,
    judge_input,
    monitored,
)
from empeval.server.store import unit_of_work
from empeval.server.store.queries import study_by_name

if TYPE_CHECKING:
    import pandas as pd

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 5.0
COST_FACTOR = 20.0


def look(engine: Engine, name: str, *, close: bool, judge: str | None = None) -> DecisionStatus | None:
    """Study `name`'s decisions now, model-assisted with `judge`'s output (default: the judge that judged the study
    most recently, if any; a Likert study's judges score items, an A/B study's judge of differences compares pairs:
    ``judge_input``), None without [decisions]; with `close`, a look that finds everything decided (or the budget
    spent) closes the study's claims when its [decisions] say stop_when_decided, and the status returned says so.
    BadInput for a study of a kind whose decisions are not computed (server/annotation/decisions.py), or for a
    `judge` that has not judged the study."""
    with unit_of_work(engine) as session:
        judged_by = judge_input(study_by_name(session, name).config)
    latest, read = _judge_output().get(judged_by, (None, None)) if judged_by is not None else (None, None)
    judge = judge or (latest(engine, name) if latest is not None else None)
    scores = read(engine, name, judge) if judge is not None and read is not None else None
    status = decision_status(engine, name, judge_scores=scores, judge=judge)
    if close and status is not None and close_claims_if_decided(engine, status):
        status = decision_status(engine, name, judge_scores=scores, judge=judge)
    return status


def _latest_pair_judge(engine: Engine, name: str) -> str | None:
    from empeval.server.backend.judges.pair_scores import pair_judges

    judges = pair_judges(engine, name)
    return judges[0] if judges else None


def _judge_output() -> dict[JudgeInput, tuple[Callable[[Engine, str], str | None], Callable[..., pd.DataFrame]]]:
    """Per kind of judges' output (JudgeInput): the judge that gave a study's most recently, and the reader of its
    table. Imported at the first look: the readers need pandas, which a server answering raters never loads."""
    from empeval.server.backend.judges.pair_scores import judge_pair_scores
    from empeval.server.backend.judges.scores import judge_scores, latest_judge

    return {JudgeInput.ITEM_SCORES: (latest_judge, judge_scores),
            JudgeInput.PAIR_DIFFERENCES: (_latest_pair_judge, judge_pair_scores)}


def _may_close(engine: Engine, name: str) -> bool:
    """Whether a look could close the study's claims: a study of a kind whose decisions are computed (Likert,
    pairwise), whose [decisions] say stop_when_decided and whose claims are still open (one query; the look itself
    reads every rating)."""
    with unit_of_work(engine) as session:
        study = study_by_name(session, name)
        decisions = study.config.decisions
        return (decisions is not None and decisions.stop_when_decided and study.claims_closed_at is None
                and monitored(study.config))


@dataclass
class _Watched:
    next_at: float = 0.0
    running: threading.Thread | None = None


class DecisionWatch:
    """Per process: the looks taken after submissions, one study at a time each (module docstring)."""

    def __init__(self, *, min_interval_s: float = MIN_INTERVAL_S, cost_factor: float = COST_FACTOR) -> None:
        self.min_interval_s = min_interval_s
        self.cost_factor = cost_factor
        self._lock = threading.Lock()
        self._studies: dict[tuple[str, str], _Watched] = {}
        self.looks = 0  # looks taken by this watch (for tests and the curious)

    def after_submission(self, engine: Engine, name: str) -> threading.Thread | None:
        """Start a look at study `name` in the background unless one is running or the last was too recent; the
        thread started, or None."""
        key = (engine.url.render_as_string(hide_password=False), name)
        now = time.monotonic()
        with self._lock:
            watched = self._studies.setdefault(key, _Watched())
            if (watched.running is not None and watched.running.is_alive()) or now < watched.next_at:
                return None
            watched.next_at = now + self.min_interval_s
            thread = threading.Thread(target=self._look, args=(engine, name, watched), daemon=True,
                                      name=f"decisions-{name}")
            watched.running = thread
            self.looks += 1
        thread.start()
        return thread

    def _look(self, engine: Engine, name: str, watched: _Watched) -> None:
        began = time.monotonic()
        try:
            if _may_close(engine, name):
                status = look(engine, name, close=True)
                if status is not None and status.claims_closed_at is not None:
                    log.info("study %s: claims closed (%s)", name, status.claims_closed_reason)
        except Exception:  # a look must never take the server down; the next submission tries again
            log.exception("study %s: the look at its decisions failed", name)
        finally:
            ended = time.monotonic()
            with self._lock:
                watched.next_at = max(watched.next_at, ended + self.cost_factor * (ended - began))
                watched.running = None
