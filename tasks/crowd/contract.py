"""The crowd job files, defined once: what the app hands the crowd runner and what the runner hands back.

Standard library only and Python 3.10 compatible: the app (Python 3.11) imports it as
`empeval.tasks.crowd.contract`; the runner (tasks/crowd/runner.py, in .venv-crowd on Python 3.10) loads this file
by path. One job directory holds:

  in   job.json       a CrowdJob: what to run, with every default here (written once by the app)
       items.jsonl    one CrowdUnit a line: one planned assignment put on the crowd as one Mephisto unit
  out  results.jsonl  one CrowdResult a line per submitted unit: appended, flushed and fsynced by the runner
       status.json    a JobStatus: the run's state (one of STATES) and progress, replaced atomically
       review.jsonl   one line per review action carried out
  control  stop       a file of that name ends the run

The crash rule for results.jsonl, the same for every reader: a last line without a newline is a write
cut short by a crash and is ignored (the runner truncates it before appending again); any other line that
is not valid JSON or not a valid record is a problem reported as `file:line: reason`, never skipped in
silence.

Controls are scored by the rule each carries (Control), which the study's kind declares: a Likert control passes
when its score on the criterion it targets is below the worker's mean on that criterion over the real items of
the same assignment (analysis.kinds.likert.quality.control_results; tests/crowd/test_contract.py checks the two
agree); an A/B control pair when the worker chose the real response (analysis/kinds/pairwise/tables.py,
control_scores), whichever side it was shown on; and so on for every kind.

Self-checks (run `python tasks/crowd/contract.py` under either interpreter):

>>> job = CrowdJob(job_id="j1", study="pilot", provider="mock", reward=0.5)
>>> CrowdJob.from_json(job.to_json()) == job, job.port, job.min_control_pass_rate
(True, 3000, 0.5)
>>> def problem(data):
...     try:
...         CrowdJob.from_json(data)
...     except ContractError as error:
...         return str(error)
>>> problem({"job_id": "j1", "study": "pilot", "provider": "mock", "reward": 0.5, "port": "80"})
"job.json: port: expected an integer, got '80'"
>>> problem({"job_id": "j1", "study": "pilot", "provider": "carrier pigeon", "reward": 0.5})
"job.json: provider: 'carrier pigeon' is not one of mock, mturk_sandbox, mturk"
>>> problem({"job_id": "j1", "provider": "mock", "reward": 0.5})
'job.json: study: is required'
>>> outputs = {"ratings": [{"item_id": 1, "scores": {"empathy": 4}}, {"item_id": 2, "scores": {"empathy": 5}},
...                        {"item_id": 9, "scores": {"empathy": 2}}]}
>>> score = score_controls(outputs, [Control(item_id=9, target="empathy")])
>>> score, score.ok(min_pass_rate=0.5)
(ControlScore(n=1, passed=1), True)
>>> judged = {"judgments": [{"item_id": 5, "choices": {"empathy": "A"}}, {"item_id": 6, "choices": {"empathy": "T"}},
...                         {"item_id": 7, "choices": {"empathy": "A"}}]}
>>> pair = {"rule": "one-of", "entries": "judgments", "field": "choices", "target": "empathy"}
>>> score_controls(judged, [Control(item_id=5, passing=("A",), **pair), Control(item_id=6, passing=("A",), **pair),
...                         Control(item_id=7, passing=("B",), **pair)])
ControlScore(n=3, passed=1)
"""
import dataclasses
import json
import os
import threading
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOB_FILE = "job.json"
ITEMS_FILE = "items.jsonl"
RESULTS_FILE = "results.jsonl"
STATUS_FILE = "status.json"
REVIEW_FILE = "review.jsonl"
STOP_FILE = "stop"

PROVIDERS = ("mock", "mturk_sandbox", "mturk")
# What Mephisto 1.1.1 appends to the worker id the task page knows (its getWorkerName(): the URL's worker_id or
# workerId) in the worker name it records, per provider (MockWorker.new and SandboxMTurkWorker.new add "_sandbox").
# A chat unit's live calls name the worker as the page knows her; ingest names her as Mephisto recorded her; both
# must come to the same annotator (tests/crowd/test_chat_mock_run.py checks it on a real run).
RECORDED_NAME_SUFFIX = {"mock": "_sandbox", "mturk_sandbox": "_sandbox", "mturk": ""}

# status.json states. STARTING and RUNNING are live; the others are final. DEAD is written by `collect` (and
# shown by the app) for a runner that was killed without a chance to say so; NOT_STARTED is what the app
# shows when there is no status.json yet.
STARTING = "starting"
RUNNING = "running"
COMPLETED = "completed"
STOPPED = "stopped"
TIMEOUT = "timeout"
FAILED = "failed"
DEAD = "dead"
NOT_STARTED = "not started"
LIVE_STATES = (STARTING, RUNNING)
FINAL_STATES = (COMPLETED, STOPPED, TIMEOUT, FAILED, DEAD)
STATES = LIVE_STATES + FINAL_STATES

DEFAULT_TAGS = ("empathy", "dialogue", "rating", "conversation", "research")
DEFAULT_DESCRIPTION = ("Read short conversations in which someone shares an experience, and rate one reply in "
                       "each for empathy, relevance and fluency (1-5).")


class ContractError(ValueError):
    """A job file does not follow the contract; the message names the file, the line or key, and why."""


# ---------------------------------------------------------------- the records

CONTROL_RULES = ("below-mean", "one-of")


@dataclass
class Control:
    """A control unit of a crowd unit, the criterion it is built to fail, and how a careful worker's answer to it
    reads, declared by the study's kind (its tasks part) so that the runner scores every kind alike. The answer is
    `outputs[entries][i][field][target]` of the entry whose item_id is `item_id`; `rule` is
    - "below-mean": a number below the worker's mean on `target` over the unit's other units (a Likert control);
    - "one-of": an answer among `passing` (an A/B control pair passes when the real response is chosen, a
      best-worst control tuple when the control response is marked worst)."""

    item_id: int
    target: str
    rule: str = "below-mean"
    entries: str = "ratings"
    field: str = "scores"
    passing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.rule not in CONTROL_RULES:
            raise ContractError(f"rule: {self.rule!r} is not one of {', '.join(CONTROL_RULES)}")
        if (self.rule == "one-of") != bool(self.passing):
            raise ContractError("passing: a one-of control names the answers that pass, a below-mean one none")


@dataclass
class ControlScore:
    """How many of a unit's controls could be scored (`n`) and how many the worker scored as a careful rater
    would (`passed`)."""

    n: int = 0
    passed: int = 0

    def ok(self, *, min_pass_rate: float) -> bool:
        """Work passes when at least `min_pass_rate` of its scored controls passed (no controls: it passes)."""
        return self.n == 0 or self.passed / self.n >= min_pass_rate


@dataclass
class CrowdJob:
    """job.json: one crowd run of a study. Every default lives here."""

    job_id: str
    study: str
    provider: str  # one of PROVIDERS
    reward: float  # per unit, in `currency`
    task_name: str = "empeval-likert"
    title: str = "Rate replies in conversations about feelings"
    description: str = DEFAULT_DESCRIPTION
    tags: list[str] = field(default_factory=lambda: list(DEFAULT_TAGS))
    currency: str = "USD"
    fee_rate: float = 0.0
    estimated_cost: float = 0.0
    created_at: float = 0.0
    assignment_duration_seconds: int = 1800
    lifetime_seconds: int = 86400
    units_per_assignment: int = 1
    port: int = 3000
    hostname: str = "http://127.0.0.1"
    router_host: str = "127.0.0.1"  # the interface Mephisto's router listens on
    public_url: str | None = None  # MTurk: the HTTPS URL forwarded to 127.0.0.1:port
    timeout_seconds: int = 3600
    bundle: str = ""  # the Mephisto task bundle (task.js)
    aws_profile: str | None = None
    onboarding: dict[str, Any] | None = None  # tasks/crowd/onboarding.json, or None for no test
    onboarding_qualification: str = "empeval-likert-onboarding"
    min_control_pass_rate: float = 0.5
    seen_contexts: dict[str, list[int]] = field(default_factory=dict)  # by Mephisto worker name
    overrides: list[str] = field(default_factory=list)  # extra Hydra overrides

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ContractError(f"provider: {self.provider!r} is not one of {', '.join(PROVIDERS)}")
        if not 0.0 <= self.min_control_pass_rate <= 1.0:
            raise ContractError(f"min_control_pass_rate: {self.min_control_pass_rate!r} is not within 0 and 1")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, *, where: str = JOB_FILE) -> "CrowdJob":
        return _from_json(cls, data, where)


@dataclass
class CrowdUnit:
    """items.jsonl: one planned assignment as one Mephisto unit. `payload` is what the task UI shows
    (server.annotation's assignment_payload); `context_ids` keep a worker from seeing a context twice."""

    assignment_id: int
    context_ids: list[int]
    controls: list[Control]
    payload: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, *, where: str = ITEMS_FILE) -> "CrowdUnit":
        return _from_json(cls, data, where)


@dataclass
class CrowdResult:
    """results.jsonl: one submitted unit. `submission_id` is stable (job id + Mephisto unit id), so
    ingesting a line twice stores it once; `outputs` is what the task UI sent ({"ratings", "comment"})."""

    submission_id: str
    job_id: str
    study: str
    provider: str
    unit_id: str  # Mephisto's unit id: what review actions name
    worker_name: str  # Mephisto's worker name (pseudonymised before it reaches SQL)
    assignment_id: int  # the store's assignment
    outputs: dict[str, Any]
    controls: ControlScore
    passed_controls: bool
    run_id: str | None = None
    mephisto_assignment_id: str | None = None
    agent_id: str | None = None
    recorded_at: float | None = None

    def __post_init__(self) -> None:
        if not self.worker_name:
            raise ContractError("worker_name: is empty")
        if not self.submission_id:
            raise ContractError("submission_id: is empty")

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, *, where: str = RESULTS_FILE) -> "CrowdResult":
        return _from_json(cls, data, where)


@dataclass
class JobStatus:
    """status.json: where the run is. Written only by the runner, atomically."""

    job_id: str
    state: str  # one of STATES
    run_id: str | None = None
    url: str | None = None
    units_total: int = 0
    units_done: int = 0
    pid: int | None = None
    error: str | None = None
    started_at: float | None = None
    updated_at: float | None = None
    finished_at: float | None = None
    launch_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES + (NOT_STARTED,):
            raise ContractError(f"state: {self.state!r} is not one of {', '.join(STATES)}")

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Any, *, where: str = STATUS_FILE) -> "JobStatus":
        return _from_json(cls, data, where)


# ---------------------------------------------------------------- reading and writing the files

def read_job(job_dir: Path) -> CrowdJob:
    path = Path(job_dir) / JOB_FILE
    return CrowdJob.from_json(_read_json(path), where=str(path))


def write_job(job_dir: Path, job: CrowdJob) -> None:
    write_json_atomic(Path(job_dir) / JOB_FILE, job.to_json())


def read_items(job_dir: Path) -> dict[int, CrowdUnit]:
    """The units by store assignment id. The app writes items.jsonl whole before the runner starts, so any
    bad line (a torn last one included) is an error naming every bad line."""
    path = Path(job_dir) / ITEMS_FILE
    units, problems, torn = _read_jsonl(path, CrowdUnit)
    if torn:
        problems.append(f"{path}:{len(units) + len(problems) + 1}: the last line has no newline (cut short)")
    by_assignment: dict[int, CrowdUnit] = {}
    for number, unit in units:
        if unit.assignment_id in by_assignment:
            problems.append(f"{path}:{number}: assignment {unit.assignment_id} appears twice")
        by_assignment[unit.assignment_id] = unit
    if problems:
        raise ContractError("; ".join(problems))
    return by_assignment


def write_items(job_dir: Path, units: list[CrowdUnit]) -> None:
    path = Path(job_dir) / ITEMS_FILE
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        for unit in units:
            handle.write(json.dumps(unit.to_json(), sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


@dataclass
class ResultsRead:
    """What read_results found: the valid records (with their line numbers), one `file:line: reason` per
    line that is not a valid record, and whether a torn last line was ignored."""

    records: list[CrowdResult]
    line_numbers: list[int]
    problems: list[str]
    torn_last_line: bool = False

    def __len__(self) -> int:
        return len(self.records)


def read_results(path: Path) -> ResultsRead:
    """The one results.jsonl reader (the runner's and the app's); see the crash rule in the module docstring.
    A missing file reads as empty."""
    records, problems, torn = _read_jsonl(Path(path), CrowdResult)
    return ResultsRead(records=[r for _, r in records], line_numbers=[n for n, _ in records], problems=problems,
                       torn_last_line=torn)


class ResultsFile:
    """results.jsonl for the runner: append-only, one line per submission id, each line flushed and fsynced
    (the runner's hooks run on several threads, hence the lock). A torn last line is cut off on open so the
    next line starts clean; bad lines in the middle stay (the app reports them) and are in `problems`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lock = threading.Lock()
        found = read_results(self.path)
        if found.torn_last_line:
            data = self.path.read_bytes()
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
        self.problems = found.problems
        self.ids = {record.submission_id for record in found.records}

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, result: CrowdResult) -> bool:
        """Write the result unless its submission id is there already; True when written."""
        line = json.dumps(result.to_json(), sort_keys=True) + "\n"
        with self.lock:
            if result.submission_id in self.ids:
                return False
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())
            self.ids.add(result.submission_id)
            return True


def read_status(job_dir: Path) -> JobStatus | None:
    """The run's status, or None when the runner has not written one yet."""
    path = Path(job_dir) / STATUS_FILE
    if not path.exists():
        return None
    return JobStatus.from_json(_read_json(path), where=str(path))


def write_status(job_dir: Path, status: JobStatus) -> None:
    write_json_atomic(Path(job_dir) / STATUS_FILE, status.to_json())


def write_json_atomic(path: Path, value: Any) -> None:
    """Write JSON so that a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1, sort_keys=True)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


# ---------------------------------------------------------------- control scoring

def control_outcomes(outputs: dict[str, Any], controls: list[Control]) -> dict[int, bool]:
    """For each control that can be scored, did the worker answer it as a careful rater would (see Control)?

    - "below-mean": did she score it below her own mean, on the criterion the control targets, over the other
      (non-control) units of this unit that she scored there? The rule of analysis.kinds.likert.quality.
      control_results; a control with no other unit scored on its criterion is left out (the analysis would fall
      back to the worker's other assignments, which a unit does not know).
    - "one-of": is her answer on the target among those that pass? A tie or the control fails an A/B control pair
      (the rule of control_scores in analysis/kinds/pairwise/tables.py). A control without an answer on its target is
      left out."""
    answers: dict[tuple[str, str], dict[Any, dict[str, Any]]] = {}
    for control in controls:
        where = (control.entries, control.field)
        if where in answers:
            continue
        entries = outputs.get(control.entries) if isinstance(outputs, dict) else None
        answers[where] = {entry.get("item_id"): entry[control.field]
                          for entry in (entries if isinstance(entries, list) else [])
                          if isinstance(entry, dict) and isinstance(entry.get(control.field), dict)}
    control_ids = {c.item_id for c in controls}
    outcomes: dict[int, bool] = {}
    for control in controls:
        by_item = answers[(control.entries, control.field)]
        answer = by_item.get(control.item_id, {}).get(control.target)
        if control.rule == "one-of":
            if isinstance(answer, (str, int)) and not isinstance(answer, bool):
                outcomes[control.item_id] = str(answer) in control.passing
            continue
        real = [scores[control.target] for item, scores in by_item.items()
                if item not in control_ids and _is_score(scores.get(control.target))]
        if real and _is_score(answer):
            outcomes[control.item_id] = answer < sum(real) / len(real)
    return outcomes


def score_controls(outputs: dict[str, Any], controls: list[Control]) -> ControlScore:
    """The unit's controls scored (control_outcomes): how many could be scored and how many passed."""
    outcomes = control_outcomes(outputs, controls)
    return ControlScore(n=len(outcomes), passed=sum(outcomes.values()))


def _is_score(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------- typed JSON, checked once

def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractError(f"{path}: missing") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractError(f"{path}: not valid JSON ({error})") from None


def _read_jsonl(path: Path, record_type: Any) -> tuple[list[tuple[int, Any]], list[str], bool]:
    """(line number, record) pairs, `file:line: reason` problems, and whether a torn last line was ignored."""
    if not path.exists():
        return [], [], False
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = lines[-1] != b""  # the bytes after the last newline: a write cut short
    records: list[tuple[int, Any]] = []
    problems: list[str] = []
    for number, raw in enumerate(lines[:-1], start=1):
        where = f"{path}:{number}"
        try:
            value = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append(f"{where}: not UTF-8 text")
            continue
        except json.JSONDecodeError as error:
            problems.append(f"{where}: not valid JSON ({error.msg}, column {error.colno})"
                            if raw.strip() else f"{where}: empty line")
            continue
        try:
            records.append((number, record_type.from_json(value, where=where)))
        except ContractError as error:
            problems.append(str(error))
    return records, problems, torn


def _from_json(cls: Any, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ContractError(f"{where}: expected a JSON object, got {_describe(data)}")
    known = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ContractError(f"{where}: unknown key {unknown[0]!r} (expected {', '.join(known)})")
    values = {}
    for name, spec in known.items():
        if name not in data:
            if spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING:
                raise ContractError(f"{where}: {name}: is required")
            continue
        values[name] = _typed(data[name], spec.type, f"{where}: {name}")
    try:
        return cls(**values)
    except ContractError as error:  # a rule of the record itself (__post_init__): say where
        raise ContractError(f"{where}: {error}") from None


def _typed(value: Any, hint: Any, where: str) -> Any:
    """`value` checked against the annotation `hint` (and converted: int to float, objects to dataclasses)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        (inner,) = [o for o in options if o is not type(None)]
        return _typed(value, inner, where)
    if hint is Any:
        return value
    if dataclasses.is_dataclass(hint):
        return _from_json(hint, value, where)
    if origin is tuple:  # tuple[X, ...]: a JSON list read as a tuple
        inner = (typing.get_args(hint) or (Any,))[0]
        if not isinstance(value, list):
            raise ContractError(f"{where}: expected a list, got {_describe(value)}")
        return tuple(_typed(v, inner, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is list:
        (inner,) = typing.get_args(hint) or (Any,)
        if not isinstance(value, list):
            raise ContractError(f"{where}: expected a list, got {_describe(value)}")
        return [_typed(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        key_type, value_type = typing.get_args(hint) or (str, Any)
        if not isinstance(value, dict):
            raise ContractError(f"{where}: expected an object, got {_describe(value)}")
        return {_typed(k, key_type, f"{where} key"): _typed(v, value_type, f"{where}.{k}") for k, v in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise ContractError(f"{where}: expected true or false, got {_describe(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ContractError(f"{where}: expected an integer, got {_describe(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ContractError(f"{where}: expected a number, got {_describe(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ContractError(f"{where}: expected a string, got {_describe(value)}")
        return value
    raise TypeError(f"{where}: the contract has no reader for {hint!r}")  # a bug here, not in the file


def _describe(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


if __name__ == "__main__":
    import doctest
    import sys

    failed, tried = doctest.testmod()
    print(f"contract self-checks: {tried - failed} of {tried} passed")
    sys.exit(1 if failed or not tried else 0)
