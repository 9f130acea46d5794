"""`empeval train cobert`: train the CoBERT-style selector (server/backend/cobert.py) on ED from the store, or on
a persona corpus in PEC's layout, starting from the fine-tuned bi-encoder of `empeval train retrieval`."""
from __future__ import annotations

from pathlib import Path

import click

from empeval.cli.common import ED_DATASET, SEED, CliContext, WritablePath, count, pass_cli, positive
from empeval.cli.train import THREADS_HELP, training_threads


@click.command("cobert")
@click.option("--dataset", default=ED_DATASET, show_default=True,
              help="Store dataset to train on (its train split; its valid split, else a held-out slice, selects).")
@click.option("--persona-corpus", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Train on this PEC-layout JSONL (context, context_speakers, response, response_speaker, "
                   "personas per line) instead of the store; the persona becomes the selector's third input.")
@click.option("--encoder", default=None, metavar="KEY|base",
              help="Start from this `empeval train retrieval` run (12-hex key; default: the latest finished one), "
                   "or `base` for the packaged all-MiniLM-L6-v2 without fine-tuning.")
@click.option("--max-minutes", type=positive(1_000_000), default=None,
              help="Time budget: stop cleanly (keeping the best model) when it is spent.")
@click.option("--max-steps", type=count(), default=None, help="Stop after this many steps.")
@click.option("--epochs", type=count(), default=1, show_default=True)
@click.option("--batch-size", type=count(2), default=16, show_default=True,
              help="Pairs per step; every context is scored against the step's B responses (B x B co-attention).")
@click.option("--train-layers", type=click.IntRange(min=0, max=12), default=2, show_default=True,
              help="Top transformer layers trained (the others stay as the encoder had them).")
@click.option("--eval-every", type=count(), default=100, show_default=True,
              help="Steps between model-selection evaluations (and resume points).")
@click.option("--eval-contexts", type=count(2), default=500, show_default=True,
              help="Seeded valid contexts of the P@1,100 model selection.")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--threads", type=count(1, 1024), default=None, help=THREADS_HELP)
@click.option("--cache-dir", type=WritablePath(file_okay=False, writable=True, path_type=Path), default=None,
              help="Cache directory holding trained/ (env EMPEVAL_CACHE_DIR; default ~/.cache/empeval).")
@pass_cli
def cobert(obj: CliContext, dataset: str, persona_corpus: Path | None, encoder: str | None,
           max_minutes: float | None, max_steps: int | None, epochs: int, batch_size: int, train_layers: int,
           eval_every: int, eval_contexts: int, seed: int, threads: int | None, cache_dir: Path | None) -> None:
    """Train the CoBERT-style selector with in-batch negatives; resumable, a finished run is a no-op.

    The checkpoint goes to <cache>/trained/cobert-<key>/, the key a hash of the data, the starting encoder and
    the parameters; the `cobert` system then reranks the fine-tuned bi-encoder's top candidates with it."""
    from empeval.server.backend.resources import default_cache_dir
    from empeval.training.cobert import CoBERTTrainConfig, persona_data, store_data, train_cobert

    config = CoBERTTrainConfig(batch_size=batch_size, epochs=epochs, max_steps=max_steps, train_layers=train_layers,
                               eval_every=eval_every, eval_contexts=eval_contexts, seed=seed)
    cache = cache_dir or default_cache_dir()
    threads, why = training_threads(threads, cache)  # the same rule as `empeval train retrieval`
    click.echo(f"cobert: {threads} torch thread(s) ({why})", err=True)
    if persona_corpus is not None:
        from empeval.server.datasets.persona_jsonl import load_persona_jsonl

        data = persona_data(load_persona_jsonl(persona_corpus), source=f"persona:{persona_corpus}", config=config)
    else:
        data = store_data(obj.engine(), dataset=dataset, config=config)
    click.echo(f"cobert: {len(data.train):,} training pairs from {data.source}; model selection on "
               f"{min(eval_contexts, len(data.valid)):,} of {len(data.valid):,} from {data.valid_source}", err=True)
    result = train_cobert(data, cache_dir=cache, encoder=encoder, config=config,
                          max_minutes=max_minutes, threads=threads, log=lambda line: click.echo(line))
    manifest = result.manifest or {}  # None only for an interrupted run, which the command never asks for
    click.echo(f"checkpoint {result.key}: valid P@1,{manifest['eval_candidates']} "
               f"{manifest['valid_p_at_1_start'] * 100:.2f} -> {manifest['valid_p_at_1_best'] * 100:.2f} "
               f"({manifest['steps']} steps)")
