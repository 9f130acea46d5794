"""Rebuild the bundled EmpatheticDialogues sample from the full data.

Takes, in file order, the first N conversations of each of the 32 emotions from test (default 10: 320
conversations) and from train (default 50: 1,600 conversations, the candidate pool of the retrieval
systems and the training set of the emotion classifier in the demo). Lines are copied byte for byte, so
the sample keeps the original layout (csv.QUOTE_NONE, `_comma_`).

    python scripts/make_ed_sample.py ../shared/data/empatheticdialogues server/data/ed_sample
"""
import argparse
import collections
from pathlib import Path


def sample_split(src: Path, dst: Path, per_emotion: int) -> tuple[int, int]:
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    header, rows = lines[0], lines[1:]
    taken: dict[str, int] = collections.Counter()
    chosen: set[str] = set()
    out = [header]
    for line in rows:
        conv_id, _, emotion = line.split(",", 3)[:3]
        if conv_id not in chosen:
            if taken[emotion] >= per_emotion:
                continue
            taken[emotion] += 1
            chosen.add(conv_id)
        out.append(line)
    dst.write_text("".join(out), encoding="utf-8")
    return len(chosen), len(out) - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("full_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--test-per-emotion", type=int, default=10)
    parser.add_argument("--train-per-emotion", type=int, default=50)
    args = parser.parse_args()
    for split, n in (("test", args.test_per_emotion), ("train", args.train_per_emotion)):
        convs, utts = sample_split(args.full_dir / f"{split}.csv", args.out_dir / f"{split}.csv", n)
        print(f"{split}: {convs} conversations, {utts} utterances")


if __name__ == "__main__":
    main()
