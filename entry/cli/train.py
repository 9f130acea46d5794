"""`empeval train ...`: train the backend's own systems on a corpus in the store; the checkpoints go to the
cache directory (`<cache_dir>/trained/<kind>-<key>/`, see server/backend/checkpoints.py), never git."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import ED_DATASET, SEED, CliContext, WritablePath, count, pass_cli, positive, share
from empeval.training.config import RetrievalTrainingConfig

DEFAULTS = RetrievalTrainingConfig()

# The --threads help of every `empeval train` command: one rule, said once.
THREADS_HELP = ("Torch threads while training. Default: as the sentence encoder runs on this machine: "
                "EMPEVAL_ENCODER_THREADS when set, else the thread count measured once for this machine (kept in "
                "the cache directory; `empeval generate` measures it), else 1.")


def training_threads(threads: int | None, cache_dir: Path, *, environ: dict[str, str] | None = None) -> tuple[int, str]:
    """The torch threads of a training command and why: `threads` as given (--threads); else the encoder's own rule
    (server/backend/encoder_threads.py): EMPEVAL_ENCODER_THREADS when set to a number, else this machine's measured
    choice kept under `cache_dir` (for the encoder's precision on this CPU), else 1. `empeval train retrieval` and
    `empeval train cobert` both use it, so they default to the same count.

    >>> training_threads(3, Path("/nonexistent"))
    (3, 'as given (--threads)')
    >>> training_threads(None, Path("/nonexistent"), environ={"EMPEVAL_ENCODER_THREADS": "2"})
    (2, 'EMPEVAL_ENCODER_THREADS')
    >>> training_threads(None, Path("/nonexistent"), environ={})
    (1, 'no thread count measured for this machine yet')
    """
    import os

    from empeval.server.backend.encoder import EncoderSettings, resolve_precision
    from empeval.server.backend.encoder_threads import read_choice

    if threads is not None:
        return threads, "as given (--threads)"
    settings = EncoderSettings.from_environment(os.environ if environ is None else environ)
    if settings.threads is not None:
        return settings.threads, "EMPEVAL_ENCODER_THREADS"
    choice = read_choice(cache_dir, resolve_precision(settings.precision))
    if choice is not None:
        return choice.threads, "measured for this machine"
    return 1, "no thread count measured for this machine yet"


@click.group()
def train() -> None:
    """Train a system on the store's corpus (checkpoints under the cache directory)."""


@train.command("retrieval")
@click.option("--dataset", default=ED_DATASET, show_default=True,
              help="Dataset in the store whose train split is trained on (valid split: model selection).")
@click.option("--cache-dir", type=WritablePath(file_okay=False, writable=True, path_type=Path), default=None,
              help="Cache directory the checkpoint goes to (env EMPEVAL_CACHE_DIR; default ~/.cache/empeval).")
@click.option("--max-minutes", type=positive(1_000_000), default=None,
              help="Time budget of this invocation: stop cleanly (evaluated, saved) at it; run again to resume.")
@click.option("--batch-size", type=count(2), default=DEFAULTS.batch_size, show_default=True,
              help="Pairs per step (in-batch negatives: batch size - 1 per pair).")
@click.option("--learning-rate", type=positive(1.0), default=DEFAULTS.learning_rate, show_default=True)
@click.option("--epochs", type=positive(10_000), default=DEFAULTS.epochs, show_default=True)
@click.option("--max-steps", type=count(), default=None, help="Steps to train (overrides --epochs).")
@click.option("--max-seq-length", type=count(8), default=DEFAULTS.max_seq_length, show_default=True,
              help="Word pieces kept of each text.")
@click.option("--warmup-ratio", type=share(below_one=True), default=DEFAULTS.warmup_ratio,
              show_default=True)
@click.option("--seed", type=SEED, default=DEFAULTS.seed, show_default=True)
@click.option("--eval-steps", type=count(), default=DEFAULTS.eval_steps, show_default=True,
              help="Evaluate valid P@1,100 (and save a checkpoint) every N steps.")
@click.option("--eval-contexts", type=count(100), default=DEFAULTS.eval_contexts, show_default=True,
              help="Seeded valid contexts in the model-selection P@1,100.")
@click.option("--bf16/--fp32", default=DEFAULTS.bf16, show_default=True, help="bf16 autocast while training.")
@click.option("--threads", type=count(1, 1024), default=None, help=THREADS_HELP)
@pass_cli
def retrieval(obj: CliContext, dataset: str, cache_dir: Path | None, max_minutes: float | None, batch_size: int,
              learning_rate: float, epochs: float, max_steps: int | None, max_seq_length: int, warmup_ratio: float,
              seed: int, eval_steps: int, eval_contexts: int, bf16: bool, threads: int | None) -> None:
    """Fine-tune the retrieval encoder (all-MiniLM-L6-v2) on the store's ED train pairs (system `retrieval-ft`).

    In-batch negatives (MultipleNegativesRankingLoss); the model with the best valid P@1,100 is kept in
    <cache-dir>/trained/retrieval-ft-<key>/ (key: data, base model, parameters). Resumable: run it again with
    the same parameters to continue; a finished run does nothing."""
    from empeval.server.backend.resources import default_cache_dir
    from empeval.training.retrieval import RetrievalTrainingConfig, train_retrieval

    config = RetrievalTrainingConfig(batch_size=batch_size, learning_rate=learning_rate, epochs=epochs,
                                     max_steps=max_steps, max_seq_length=max_seq_length, warmup_ratio=warmup_ratio,
                                     seed=seed, eval_steps=eval_steps, eval_contexts=eval_contexts, bf16=bf16)
    cache = cache_dir or default_cache_dir()
    threads, why = training_threads(threads, cache)
    click.echo(f"retrieval: {threads} torch thread(s) ({why})", err=True)
    result = train_retrieval(obj.engine(), dataset=dataset, cache_dir=cache, config=config, max_minutes=max_minutes,
                             threads=threads, echo=click.echo)
    click.echo(result.describe())
