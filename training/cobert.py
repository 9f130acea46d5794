"""Training the CoBERT-style selector (server/backend/cobert.py): `empeval train cobert`.

- **Data.** ED from the store: each train context (its last `max_history` turns, as the bi-encoder reads it)
  paired with its listener reply; or a persona corpus in PEC's layout (`--persona-corpus FILE.jsonl`, read by
  server/datasets/persona_jsonl.py), whose examples also carry the responder's persona. Model selection uses
  the store's valid split when it has one; otherwise (the bundled sample, a persona corpus) a seeded held-out
  slice of the training data (`heldout_fraction` of the dialogues, 10% by default), never trained on.
- **Start.** The transformer of the fine-tuned bi-encoder (`empeval train retrieval`'s latest finished run, or
  the one pinned by `encoder_key`); `encoder="base"` starts from the packaged all-MiniLM-L6-v2 instead, only when
  asked for explicitly. The co-attention head starts with zero weight in the score (see cobert.py).
- **Objective.** In-batch negatives: cross-entropy of each context's scores over the batch's B responses (all
  B x B pairs through the co-attention), AdamW with linear warm-up and decay (transformers'
  get_linear_schedule_with_warmup), the transformer's top `train_layers` layers trained at `lr`, the head at
  `head_lr`, bf16 autocast where the CPU runs it natively.
- **Selection.** Every `eval_every` steps and at the end: P@1,100 on `eval_contexts` seeded valid contexts (the
  gold reply among itself and 99 other valid replies drawn with `seed`; fewer candidates when the valid set is
  smaller, recorded in the manifest); the best evaluation's model is the one kept.
- **Budget and resume.** `max_minutes` bounds the run (the final evaluation included): at the budget the run
  stops cleanly and keeps its best model. The full state (weights, optimiser, schedule, step, data order, losses,
  best figure) is saved every `eval_every` steps under the run folder, so a killed run started again with the same
  data and parameters resumes where it stopped; a finished run is a no-op that says so.
- **Cache key.** `cache_key(data hash, encoder id, parameters)` (checkpoints.py): the data hash covers the
  training and model-selection texts; the encoder id names the bi-encoder checkpoint's key (or the base weights'
  hash); the parameters are every field of `CoBERTTrainConfig` except the time budget and the thread count,
  which change how long it runs, not what it learns.
"""
from __future__ import annotations

import json
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from empeval.server.backend.checkpoints import (
    MODEL_DIR,
    cache_key,
    checkpoint_key,
    find_checkpoint,
    is_finished,
    read_manifest,
    run_dir,
    write_manifest,
)
from empeval.server.backend.cobert import CoBERT, CoBERTConfig, base_encoder_path, load_sentence_transformer
from empeval.server.backend.contexts import load_contexts
from empeval.server.backend.encoder import texts_hash
from empeval.server.backend.retrieval import history_text
from empeval.server.datasets.persona_jsonl import PersonaExample
from empeval.server.errors import BadInput
from empeval.server.progress import progress_bar
from empeval.server.store.engine import unit_of_work

KIND = "cobert"
RESUME_DIR = "resume"
BEST_DIR = "best"
STATE_FILE = "state.pt"


@dataclass(frozen=True)
class Example:
    """One training pair: the context as the selector reads it, the gold response, the responder's persona."""

    context: str
    response: str
    persona: str | None = None
    group: str = ""  # the dialogue it comes from (held-out slices are drawn by dialogue)


@dataclass(frozen=True)
class CoBERTTrainConfig:
    """What a CoBERT training run does. Defaults measured on the shared 2-core machine (see METRICS.md):
    B=16 pairs per step is ~3 s with the top 2 layers trained under bf16 autocast on one thread."""

    batch_size: int = 16
    lr: float = 3e-5
    head_lr: float = 1e-3
    epochs: int = 1
    max_steps: int | None = None
    warmup_steps: int = 20
    train_layers: int = 2
    eval_every: int = 100
    eval_contexts: int = 500
    eval_candidates: int = 100
    heldout_fraction: float = 0.1
    max_history: int = 4
    seed: int = 0
    bf16: bool = True
    max_context_tokens: int = 64
    max_response_tokens: int = 32
    max_persona_tokens: int = 64
    head_dim: int = 96

    def __post_init__(self):
        positive = ("batch_size", "epochs", "eval_every", "eval_contexts", "max_history", "head_dim",
                    "max_context_tokens", "max_response_tokens", "max_persona_tokens")
        for name in positive:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise BadInput(f"CoBERT training: {name} must be a positive integer, got {getattr(self, name)!r}")
        if self.batch_size < 2:
            raise BadInput("CoBERT training: batch_size must be at least 2 (in-batch negatives need a negative)")
        if self.eval_candidates < 2:
            raise BadInput("CoBERT training: eval_candidates must be at least 2")
        if self.max_steps is not None and self.max_steps < 1:
            raise BadInput(f"CoBERT training: max_steps must be positive, got {self.max_steps}")
        if not 0 < self.heldout_fraction < 1:
            raise BadInput(f"CoBERT training: heldout_fraction must be in (0, 1), got {self.heldout_fraction}")
        if not 0 <= self.train_layers <= 12:
            raise BadInput(f"CoBERT training: train_layers must be 0..12, got {self.train_layers}")

    def model_config(self) -> CoBERTConfig:
        return CoBERTConfig(max_context_tokens=self.max_context_tokens, max_response_tokens=self.max_response_tokens,
                            max_persona_tokens=self.max_persona_tokens, head_dim=self.head_dim)


@dataclass
class TrainingData:
    """Training and model-selection examples, where they came from, and their hash."""

    train: list[Example]
    valid: list[Example]
    source: str
    valid_source: str
    data_hash: str = field(init=False)

    def __post_init__(self):
        texts = [f"{e.context}\x01{e.response}\x01{e.persona or ''}" for e in self.train]
        texts += ["\x02"] + [f"{e.context}\x01{e.response}\x01{e.persona or ''}" for e in self.valid]
        self.data_hash = texts_hash(texts)

    @property
    def has_personas(self) -> bool:
        return any(e.persona for e in self.train)


def _split_heldout(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """A seeded `fraction` of the dialogues (by `group`) held out for model selection, never trained on."""
    groups = sorted({e.group for e in examples})
    rng = random.Random(seed)
    held = set(rng.sample(groups, max(2, round(fraction * len(groups))))) if len(groups) >= 4 else set()
    if not held:
        raise BadInput(f"CoBERT training needs at least 4 dialogues to hold some out for model selection, got "
                       f"{len(groups)}")
    return [e for e in examples if e.group not in held], [e for e in examples if e.group in held]


def store_data(engine, *, dataset: str, config: CoBERTTrainConfig) -> TrainingData:
    """Training pairs from the store's `dataset`: train contexts, and valid ones (a held-out slice of train when
    the dataset has no valid split). Raises BadInput naming the import command when there is no train split."""
    def examples(split: str) -> list[Example]:
        with unit_of_work(engine) as session:
            contexts = load_contexts(session, dataset=dataset, split=split)
        return [Example(history_text(c, config.max_history), c.reference, None, str(c.dialogue_id))
                for c in contexts if c.reference]

    train = examples("train")
    if not train:
        raise BadInput(f"no train contexts of dataset {dataset!r} in the store: import ED first "
                       "(`empeval data import-ed /path/to/empatheticdialogues`, or `empeval data import-sample` "
                       "for the bundled sample), or give --persona-corpus FILE.jsonl")
    valid = examples("valid")
    if valid:
        return TrainingData(train, valid, f"store:{dataset}:train", f"store:{dataset}:valid")
    train, valid = _split_heldout(train, config.heldout_fraction, config.seed)
    return TrainingData(train, valid, f"store:{dataset}:train",
                        f"held-out {config.heldout_fraction:.0%} of {dataset} train dialogues (seed {config.seed})")


def persona_data(examples: Sequence[PersonaExample], *, source: str, config: CoBERTTrainConfig) -> TrainingData:
    """Training pairs from a persona corpus (each line its own dialogue), a seeded slice held out."""
    pairs = [Example(" ".join(turn.strip() for turn in e.context[-config.max_history:]), e.response,
                     e.persona_text, e.source) for e in examples]
    train, valid = _split_heldout(pairs, config.heldout_fraction, config.seed)
    return TrainingData(train, valid, source, f"held-out {config.heldout_fraction:.0%} of its lines "
                                              f"(seed {config.seed})")


def resolve_encoder(cache_dir: Path, encoder: str | None) -> tuple[Path, str]:
    """(folder, id) of the encoder to start from: "base" the packaged all-MiniLM-L6-v2; a 12-hex key that
    finished `retrieval-ft` run; None the latest finished one (MissingCheckpoint naming `empeval train retrieval`
    when there is none)."""
    if encoder == "base":
        from empeval.server.backend.encoder import SentenceEncoder

        return base_encoder_path(), SentenceEncoder(cache_dir=cache_dir, show_progress=False).model_id.split("+")[0]
    path = find_checkpoint(cache_dir, "retrieval-ft", encoder)
    return path, f"retrieval-ft@{checkpoint_key(path)}"


def candidate_sets(n: int, n_candidates: int, seed: int) -> list[list[int]]:
    """For each of n items, itself first then n_candidates - 1 others drawn with `seed` (as metrics.p_at_1_of_100)."""
    rng = random.Random(seed)
    sets = []
    for i in range(n):
        others = rng.sample(range(n - 1), n_candidates - 1)
        sets.append([i] + [j if j < i else j + 1 for j in others])
    return sets


def evaluation_set(valid: list[Example], config: CoBERTTrainConfig) -> tuple[list[Example], int]:
    """The seeded subset of valid examples evaluated, and the number of candidates per context."""
    chosen = random.Random(config.seed).sample(valid, min(config.eval_contexts, len(valid)))
    if len(chosen) < 2:
        raise BadInput(f"CoBERT training: model selection needs at least 2 valid examples, got {len(chosen)}")
    return chosen, min(config.eval_candidates, len(chosen))


def p_at_1(model: CoBERT, examples: list[Example], n_candidates: int, seed: int, *,
           show_progress: bool = False) -> float:
    """P@1,n_candidates of the selector: the share of examples whose gold reply scores strictly highest among
    itself and n_candidates - 1 other examples' replies (Rashkin et al.'s P@1,100 when n_candidates is 100)."""
    sets = candidate_sets(len(examples), n_candidates, seed)
    scores = model.score_candidates([e.context for e in examples],
                                    [[examples[j].response for j in row] for row in sets],
                                    persona_texts=[e.persona for e in examples], show_progress=show_progress,
                                    description="CoBERT valid P@1")
    return float((scores[:, 0] > scores[:, 1:].max(dim=1).values).float().mean())


@dataclass
class TrainResult:
    run: Path
    key: str
    manifest: dict[str, Any] | None
    already_finished: bool = False


def run_key(data: TrainingData, encoder_id: str, config: CoBERTTrainConfig) -> str:
    """The run's cache key: checkpoints.cache_key over the data hash, the starting encoder's id and every training
    parameter (not the time budget or threads, which are arguments of `train_cobert`, not of the config)."""
    return cache_key(data.data_hash, encoder_id, asdict(config))


def _set_trainable(model: CoBERT, train_layers: int) -> None:
    """Only the top `train_layers` transformer layers (and the head) are trained; the rest stay as loaded."""
    layers = model.transformer.encoder.layer
    for parameter in model.transformer.parameters():
        parameter.requires_grad = False
    for layer in list(layers)[len(layers) - train_layers:] if train_layers else []:
        for parameter in layer.parameters():
            parameter.requires_grad = True


def _atomic_save(state: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_suffix(".tmp")
    torch.save(state, scratch)
    scratch.replace(path)


def train_cobert(data: TrainingData, *, cache_dir: Path, encoder: str | None = None,
                 config: CoBERTTrainConfig | None = None, max_minutes: float | None = None, threads: int = 1,
                 show_progress: bool = True, log: Callable[[str], None] = print,
                 interrupt_after: int | None = None) -> TrainResult:
    """Train (or resume, or find finished) the CoBERT run for `data`, `encoder` and `config` under
    `<cache_dir>/trained/cobert-<key>/`; returns the run, its key and its manifest (see the module docstring).

    `interrupt_after` N saves the resume state after N steps of this session and returns unfinished (manifest
    None), as a killed run would leave it; the next call resumes there."""
    from transformers import get_linear_schedule_with_warmup

    config = config or CoBERTTrainConfig()
    encoder_path, encoder_id = resolve_encoder(cache_dir, encoder)
    parameters = asdict(config)
    key = run_key(data, encoder_id, config)
    run = run_dir(cache_dir, KIND, key)
    if is_finished(run):
        log(f"cobert run {key} is already finished ({run}); nothing to do")
        return TrainResult(run, key, read_manifest(run), already_finished=True)
    if len(data.train) < config.batch_size:
        raise BadInput(f"CoBERT training: {len(data.train)} training examples, fewer than one batch of "
                       f"{config.batch_size}; lower --batch-size")
    started = time.monotonic()
    deadline = started + max_minutes * 60 if max_minutes else None
    torch.set_num_threads(threads)
    torch.manual_seed(config.seed)
    model = CoBERT(load_sentence_transformer(encoder_path), config.model_config())
    _set_trainable(model, config.train_layers)
    trainable = [p for p in model.transformer.parameters() if p.requires_grad]
    mixes = [model.context_mix, model.persona_mix]
    head = [p for name, p in model.named_parameters()
            if not name.startswith(("transformer.", "sentence_model.")) and name not in ("context_mix", "persona_mix")]
    # The two mixing scalars start at 0 and get 10x the head's rate, so co-attention enters the score within the
    # first few dozen steps instead of hundreds.
    optimizer = torch.optim.AdamW([{"params": trainable, "lr": config.lr}, {"params": head, "lr": config.head_lr},
                                   {"params": mixes, "lr": 10 * config.head_lr, "weight_decay": 0.0}])
    steps_per_epoch = len(data.train) // config.batch_size
    total_steps = steps_per_epoch * config.epochs
    if config.max_steps is not None:
        total_steps = min(total_steps, config.max_steps)
    schedule = get_linear_schedule_with_warmup(optimizer, min(config.warmup_steps, total_steps), total_steps)
    evaluated, n_candidates = evaluation_set(data.valid, config)

    state_path = run / RESUME_DIR / STATE_FILE
    step, best, losses, history = 0, float("-inf"), [], []
    if state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, best, losses, history = state["step"], state["best"], state["losses"], state["history"]
        torch.set_rng_state(state["torch_rng"])
        log(f"resuming cobert run {key} at step {step} of {total_steps} (best valid P@1,{n_candidates} so far "
            f"{best:.4f})")
    else:
        run.mkdir(parents=True, exist_ok=True)
        (run / "run.json").write_text(json.dumps({"kind": KIND, "key": key, "encoder": encoder_id,
                                                  "data_hash": data.data_hash, "source": data.source,
                                                  "parameters": parameters}, indent=2), encoding="utf-8")

    def evaluate(label: str) -> float:
        model.eval()
        figure = p_at_1(model, evaluated, n_candidates, config.seed, show_progress=show_progress)
        model.train()
        history.append({"step": step, "valid_p_at_1": round(figure, 4), "at": label})
        return figure

    def save_state() -> None:
        _atomic_save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                      "schedule": schedule.state_dict(), "step": step, "best": best, "losses": losses,
                      "history": history, "torch_rng": torch.get_rng_state()}, state_path)

    def keep_if_best(figure: float) -> None:
        nonlocal best
        if figure > best:
            best = figure
            scratch = run / f"{BEST_DIR}.tmp"
            shutil.rmtree(scratch, ignore_errors=True)
            model.save(scratch)
            shutil.rmtree(run / BEST_DIR, ignore_errors=True)
            scratch.replace(run / BEST_DIR)

    eval_seconds = 0.0
    if step == 0:
        t = time.monotonic()
        start_figure = evaluate("start")
        eval_seconds = time.monotonic() - t
        keep_if_best(start_figure)
        log(f"valid P@1,{n_candidates} of the untrained selector (= its encoder's cosine): {start_figure:.4f} "
            f"over {len(evaluated)} contexts")
        save_state()
    stopped_by = "steps"
    first_step = step
    model.train()
    order_rng = random.Random(config.seed)
    orders = [order_rng.sample(range(len(data.train)), len(data.train)) for _ in range(config.epochs)]
    with progress_bar() as progress:
        task = progress.add_task("training cobert", total=total_steps, completed=step, visible=show_progress)
        while step < total_steps:
            if deadline is not None and time.monotonic() + max(eval_seconds, 1.0) * 1.2 > deadline:
                stopped_by = "budget"
                break
            epoch, offset = divmod(step, steps_per_epoch)
            batch = [data.train[i] for i in
                     orders[epoch][offset * config.batch_size:(offset + 1) * config.batch_size]]
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
                scores = model.in_batch_scores([e.context for e in batch], [e.response for e in batch],
                                               [e.persona for e in batch] if data.has_personas else None)
            loss = torch.nn.functional.cross_entropy(scores.float(), torch.arange(len(batch)))
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            losses.append(round(float(loss.detach()), 5))
            recent = losses[-20:]
            progress.update(task, advance=1,
                            description=f"training cobert (loss {sum(recent) / len(recent):.3f})")
            if interrupt_after is not None and step - first_step >= interrupt_after:
                save_state()
                log(f"cobert run {key} interrupted at step {step} (resumable)")
                return TrainResult(run, key, None)
            if step % config.eval_every == 0 and step < total_steps:
                t = time.monotonic()
                keep_if_best(evaluate("periodic"))
                eval_seconds = time.monotonic() - t
                save_state()
    final = evaluate("end")
    keep_if_best(final)
    save_state()
    seconds = time.monotonic() - started
    # The selected model becomes `model/`, then the manifest marks the run finished (written last).
    shutil.rmtree(run / MODEL_DIR, ignore_errors=True)
    (run / BEST_DIR).replace(run / MODEL_DIR)
    manifest = {"kind": KIND, "key": key, "base_model": encoder_id, "data_hash": data.data_hash,
                "source": data.source, "valid_source": data.valid_source, "has_personas": data.has_personas,
                "train_examples": len(data.train), "valid_examples": len(data.valid),
                "eval_contexts": len(evaluated), "eval_candidates": n_candidates, "parameters": parameters,
                "steps": step, "total_steps": total_steps, "stopped_by": stopped_by,
                "valid_p_at_1_start": history[0]["valid_p_at_1"], "valid_p_at_1_best": round(best, 4),
                "valid_history": history, "loss_first": losses[:20], "loss_last": losses[-20:],
                "seconds_this_session": round(seconds, 1), "threads": threads}
    write_manifest(run, manifest)
    log(f"cobert run {key}: {step} steps ({stopped_by}), valid P@1,{n_candidates} {history[0]['valid_p_at_1']:.4f} "
        f"at the start -> best {best:.4f}; model in {run / MODEL_DIR}")
    return TrainResult(run, key, manifest)
