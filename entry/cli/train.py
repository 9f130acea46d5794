"""`empeval train ...`: train the backend's own systems on a corpus in the store; the checkpoints go to the
cache directory (`<cache_dir>/trained/<kind>-<key>/`, see server/backend/training/checkpoints.py), never git."""
from __future__ import annotations

import click


@click.group()
def train() -> None:
    """Train a system on the store's corpus (checkpoints under the cache directory)."""
