"""EmpatheticDialogues as the store knows it: its dataset name, source and licence, and the bundled sample."""
from __future__ import annotations

from pathlib import Path

from empeval.server.datasets.ed_csv import parse_ed_csv
from empeval.server.datasets.model import ParsedDialogue

ED_DATASET = "empatheticdialogues"
ED_SOURCE = "EmpatheticDialogues (Rashkin et al., ACL 2019)"
ED_LICENSE = "CC BY-NC 4.0"
BUNDLED_SAMPLE = Path(__file__).resolve().parent.parent / "data" / "ed_sample"
SAMPLE_SOURCE = ED_SOURCE + ", bundled sample"


def bundled_sample_dialogues() -> list[ParsedDialogue]:
    """The sample shipped in server/data/ed_sample, parsed: its train and test splits."""
    return [d for split in ("train", "test") for d in parse_ed_csv(BUNDLED_SAMPLE / f"{split}.csv", split)]
