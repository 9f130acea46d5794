"""`empeval crowd ...`: launch, follow, ingest and review crowd runs (being built)."""
import click


@click.group()
def crowd() -> None:
    """Run a study on a crowd platform through Mephisto (mock, mturk_sandbox, mturk)."""
