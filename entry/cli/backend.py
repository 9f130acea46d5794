"""`empeval generate`, `empeval metrics`, `empeval systems`: the model backend from the command line."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from empeval.cli.common import (
    ED_DATASET,
    EXIT_BAD_INPUT,
    EXIT_NETWORK,
    SEED,
    CliContext,
    WritablePath,
    count,
    fail,
    pass_cli,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from empeval.server.backend.registry import Registry

# The backend, its models and the store are imported when a command runs, not to read its command line
# (tests/test_cli_startup.py).

config_option = click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                             default=None, help="Systems config (TOML or YAML); default: the built-in systems.toml.")
dataset_option = click.option("--dataset", default=ED_DATASET, show_default=True,
                              help="Dataset whose contexts to use (retrieval candidates come from its train split).")
cache_option = click.option("--cache-dir", type=WritablePath(file_okay=False, writable=True, path_type=Path),
                            default=None,
                            help="Where embeddings are cached (env EMPEVAL_CACHE_DIR; default ~/.cache/empeval).")


def make_registry(obj: CliContext, config_path: Path | None, dataset: str, cache_dir: Path | None) -> Registry:
    from empeval.server.backend.registry import Registry
    from empeval.server.backend.resources import BackendResources, default_cache_dir

    resources = BackendResources(engine=obj.engine(), dataset=dataset, cache_dir=cache_dir or default_cache_dir())
    return Registry.from_config(config_path, resources)


def chosen_systems(registry: Registry, systems: str) -> list[str]:
    names = registry.names if systems == "all" else [s.strip() for s in systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in registry.names]
    if unknown:
        fail(f"unknown system(s) {', '.join(unknown)}; configured: {', '.join(registry.names)}", EXIT_BAD_INPUT)
    return names


def require_contexts(engine: Engine, dataset: str, split: str) -> None:
    """Exit 2 with the `empeval data ...` command to run when the store holds no `split` context of `dataset`
    (there is nothing to answer: without this, generate would report "0 of 0 contexts" and succeed)."""
    from sqlalchemy import func, select

    from empeval.server.store.engine import unit_of_work
    from empeval.server.store.models import Context, Dataset, Dialogue
    from empeval.tasks.study_create import import_command

    with unit_of_work(engine) as session:
        by_split = dict(session.execute(
            select(Dialogue.split, func.count(Context.id)).join(Context, Context.dialogue_id == Dialogue.id)
            .join(Dataset, Dataset.id == Dialogue.dataset_id).where(Dataset.name == dataset)
            .group_by(Dialogue.split)).all())
        datasets = list(session.scalars(select(Dataset.name).order_by(Dataset.name)))
    if by_split.get(split):
        return
    if dataset not in datasets:
        held = f"it holds {', '.join(datasets)}" if datasets else "it holds no dialogues at all"
        where = f"the store has no dataset {dataset!r} ({held})"
    else:
        held = ", ".join(f"{name}: {n:,}" for name, n in sorted(by_split.items()))
        where = f"dataset {dataset!r} has no {split} contexts (contexts per split: {held or 'none'})"
    fail(f"nothing to answer: {where}. Import them first with {import_command(dataset, split)}, then run "
         "`empeval generate` again" + (", or choose another --split" if by_split else ""), EXIT_BAD_INPUT)


def untrained(error: BaseException) -> BaseException | None:
    """The MissingCheckpoint behind `error` (a trained system whose checkpoint is not in the cache), if any."""
    from empeval.server.backend.checkpoints import MissingCheckpoint

    for cause in (error, error.__cause__, error.__context__):
        if isinstance(cause, MissingCheckpoint):
            return cause
    return None


@click.command()
@click.option("--systems", required=True, help='Comma-separated system names, or "all" (every system that '
              'can answer: a trained system without a checkpoint is skipped with a message).')
@click.option("--split", default="test", show_default=True, help="Which split's contexts get responses.")
@click.option("--limit", type=count(), default=None, help="Only the first N contexts of the split.")
@click.option("--batch-size", type=count(), default=64, show_default=True,
              help="Contexts per batch (one transaction each).")
@config_option
@dataset_option
@cache_option
@pass_cli
def generate(obj: CliContext, systems: str, split: str, limit: int | None, batch_size: int,
             config_path: Path | None, dataset: str, cache_dir: Path | None) -> None:
    """Fill the response table for the chosen systems and contexts.

    Resumable: contexts that already have a response from the same system version are skipped, and each
    batch is committed on its own. Contexts a system cannot answer (e.g. a remote model that keeps
    failing) are listed as errors and stored as nothing; the exit code is 4 when a remote model failed.
    """
    from empeval.server.backend.generate import generate_responses
    from empeval.server.backend.registry import ConfigError
    from empeval.server.progress import progress_bar

    registry = make_registry(obj, config_path, dataset, cache_dir)
    names = chosen_systems(registry, systems)
    require_contexts(obj.engine(), dataset, split)
    upstream_failed = False
    # Every system is built before any generates (building is cheap and is where a missing checkpoint is found), so
    # a refusal comes before minutes of work on the systems named before it.
    models = {}
    for name in names:
        try:
            models[name] = registry.get(name)
        except (ConfigError, RuntimeError, ValueError) as error:
            if systems == "all" and untrained(error):
                # "all" means every system that can answer; a trained system is named when asked for by name.
                click.echo(f"system {name!r} is not trained, skipped: {untrained(error)}")
                continue
            fail(f"system {name!r}: {error}", EXIT_BAD_INPUT)
    for name, model in models.items():
        try:
            if hasattr(model, "prepare"):
                model.prepare()
        except (ConfigError, RuntimeError, ValueError) as error:
            fail(f"system {name!r}: {error}", EXIT_BAD_INPUT)
        with progress_bar() as progress:
            task = progress.add_task(f"{name}", total=None)
            report = generate_responses(obj.engine(), model, dataset=dataset, split=split, limit=limit,
                                        batch_size=batch_size,
                                        on_total=lambda n, task=task: progress.update(task, total=n),
                                        on_batch=lambda n, task=task: progress.advance(task, n))
        click.echo(report.describe())
        upstream_failed |= report.upstream_errors > 0
    if upstream_failed:
        raise SystemExit(EXIT_NETWORK)


@click.command()
@click.option("--split", default="test", show_default=True, help="Split whose contexts are scored.")
@click.option("--systems", default="all", show_default=True,
              help='Comma-separated system names for BLEU (from stored responses), or "all".')
@click.option("--p-at-100/--no-p-at-100", default=True, show_default=True,
              help="Rank metrics (P@1,100 = R@1, R@10, R@50, MRR) of the retrieval systems over the shared "
                   "candidate sets (encodes every context of the split).")
@click.option("--limit", type=count(100), default=None,
              help="Rank metrics over the first N contexts only.")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the 99 distractors drawn for each context.")
@click.option("--candidates", "candidates_file", type=WritablePath(dir_okay=False, writable=True, path_type=Path),
              default=None,
              help="Candidate-set file to reuse when it exists, else to write the drawn sets to (default: "
                   "<cache-dir>/candidates/<dataset>-<split>-n100-seed<seed>-<n>ctx-<hash>.json).")
@config_option
@dataset_option
@cache_option
@pass_cli
def metrics(obj: CliContext, split: str, systems: str, p_at_100: bool, limit: int | None, seed: int,
            candidates_file: Path | None, config_path: Path | None, dataset: str, cache_dir: Path | None) -> None:
    """Print automatic metrics: corpus BLEU against gold for every system with stored responses (run
    `empeval generate` first); for every retrieval system P@1,100, R@10, R@50 and MRR over one shared candidate set
    per context (the gold reply and 99 seeded references of the split, stored so the figures are reproducible;
    R@1 over it is P@1,100); and the emotion classifier's accuracy. A trained system without a checkpoint is
    listed as not trained (an error when named in --systems)."""
    from empeval.server.backend.contexts import load_contexts
    from empeval.server.backend.emotion import accuracy_on_split, emotion_classifier
    from empeval.server.backend.metrics import (
        bleu_by_system,
        draw_candidates,
        load_candidates,
        match_contexts,
        rank_metrics,
        save_candidates,
        score_shared,
    )
    from empeval.server.backend.registry import EMOTION_CONDITIONED, ConfigError
    from empeval.server.store.engine import unit_of_work

    registry = make_registry(obj, config_path, dataset, cache_dir)
    names = None if systems == "all" else chosen_systems(registry, systems)
    bleu_rows = bleu_by_system(obj.engine(), dataset=dataset, split=split, systems=names)
    ranked: dict[str, dict[str, float]] = {}
    n_ranked = 0
    if p_at_100:
        with unit_of_work(obj.engine()) as session:
            contexts = [c for c in load_contexts(session, dataset=dataset, split=split, limit=limit) if c.reference]
        if candidates_file is not None and candidates_file.exists():
            candidates = load_candidates(candidates_file)
            contexts = match_contexts(candidates, contexts, source=str(candidates_file))
            click.echo(f"candidate sets reused from {candidates_file}", err=True)
        else:
            try:
                candidates = draw_candidates(contexts, dataset=dataset, split=split, seed=seed)
            except ValueError as error:
                fail(f"rank metrics of {dataset!r} {split}: {error}", EXIT_BAD_INPUT)
            path = candidates_file or registry.resources.cache_dir / "candidates" / candidates.file_name()
            save_candidates(candidates, path)
            click.echo(f"candidate sets ({len(contexts):,} contexts x {candidates.n_candidates}) stored in {path}",
                       err=True)
        n_ranked = len(contexts)
        # Built first, every one (cheap; a missing checkpoint is found here), so that a refusal comes before the
        # minutes of ranking the systems named before it.
        rankable = {}
        for name in registry.names if names is None else names:
            if not registry.specs[name].kind.startswith("retrieval") and registry.specs[name].kind != "cobert":
                continue
            try:
                rankable[name] = registry.get(name)
            except ConfigError as error:
                if names is None and untrained(error):
                    click.echo(f"{name}: not trained, skipped ({untrained(error)})", err=True)
                    continue
                fail(f"system {name!r}: {error}", EXIT_BAD_INPUT)
        for name, model in rankable.items():
            if not hasattr(model, "score_candidate_sets"):
                click.echo(f"{name}: cannot score candidate sets (no score_candidate_sets), skipped", err=True)
                continue
            click.echo(f"rank metrics of {name} over {len(contexts):,} {split} contexts ...", err=True)
            ranked[name] = rank_metrics(score_shared(model, contexts, candidates))
    click.echo(f"{'system':<22}{'kind':<22}{'n':>7}{'BLEU':>8}{'BLEU-norm':>11}{'P@1,100':>10}")
    listed = set()
    for row in bleu_rows:
        p = f"{ranked[row.system]['r@1'] * 100:.2f}" if row.system in ranked else "-"
        click.echo(f"{row.system:<22}{row.kind:<22}{row.n:>7,}{row.bleu:>8.2f}{row.bleu_norm:>11.2f}{p:>10}")
        listed.add(row.system)
    for name, figures in ranked.items():
        if name not in listed:
            click.echo(f"{name:<22}{registry.specs[name].kind:<22}{n_ranked:>7,}{'-':>8}{'-':>11}"
                       f"{figures['r@1'] * 100:>10.2f}")
    if ranked:
        click.echo(f"\nrank metrics over the shared candidate sets (gold + 99, seed {candidates.seed}), %:")
        click.echo(f"{'system':<22}{'n':>7}{'R@1':>8}{'R@10':>8}{'R@50':>8}{'MRR':>8}")
        for name, figures in ranked.items():
            click.echo(f"{name:<22}{n_ranked:>7,}" + "".join(f"{figures[k] * 100:>8.2f}"
                                                             for k in ("r@1", "r@10", "r@50", "mrr")))
    classified = {name for name, spec in registry.specs.items() if spec.kind in EMOTION_CONDITIONED}
    if classified and (names is None or classified & set(names)):
        resources = registry.resources
        classifier = emotion_classifier(resources)
        accuracy, n = accuracy_on_split(resources, classifier, split)
        click.echo(f"emotion classifier (logistic regression on MiniLM, {classifier.n_train:,} train dialogues): "
                   f"{split} accuracy {accuracy * 100:.2f}% on {n:,} dialogues (situation + first turn)")


@click.group(invoke_without_command=True)
@config_option
@click.pass_context
def systems(ctx: click.Context, config_path: Path | None) -> None:
    """List the configured systems and judges (name, kind, parameters); `systems replay-align` rebuilds the
    replay file."""
    if ctx.invoked_subcommand is not None:
        return
    from empeval.server.backend.registry import load_config, load_judges

    specs = load_config(config_path)
    judges = load_judges(config_path)
    click.echo(f"{'name':<22}{'kind':<22}parameters")
    for spec in specs:
        parameters = {k: v for k, v in spec.parameters.items() if k != "headers"}
        click.echo(f"{spec.name:<22}{spec.kind:<22}{parameters}")
    click.echo("")
    if not judges:
        click.echo("judges: none configured (add one under [judges.NAME] to score items with `empeval judge`)")
        return
    click.echo(f"{'judge':<22}{'kind':<22}parameters")
    for spec in judges:
        # Headers may carry credentials; the judge names the variable holding its key, never the key itself.
        parameters = {k: v for k, v in spec.parameters.items() if k != "headers"}
        click.echo(f"{spec.name:<22}{spec.kind:<22}{parameters}")


@systems.command("replay-align")
@click.argument("model_outputs", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--ed-test", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="ED's test.csv (default: MODEL_OUTPUTS/../test.csv).")
@click.option("--write/--no-write", default=True, show_default=True,
              help="Write server/data/replay/ed_sample_test_outputs.json (the bundled sample's contexts).")
def replay_align(model_outputs: Path, ed_test: Path | None, write: bool) -> None:
    """Align published model outputs to ED test contexts and print coverage per file."""
    from empeval.server.backend.replay_align import (
        DERIVED_FILE,
        align_all,
        coverage_table,
        write_derived_file,
    )

    aligned, coverages = align_all(model_outputs, ed_test or model_outputs.parent / "test.csv")
    for line in coverage_table(coverages):
        click.echo(line)
    if write:
        n = write_derived_file(aligned)
        click.echo(f"wrote {n} aligned sample contexts to {DERIVED_FILE}")
