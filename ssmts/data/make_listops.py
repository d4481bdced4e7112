"""Generate a ListOps data set in the LRA release format (basic_{train,val,test}.tsv).

Example (the LRA sizes; a few minutes):

    python -m ssmts.data.make_listops --out data/listops-1000 --n-train 96000 --n-val 2000 --n-test 2000

A small, shorter stand-in for quick experiments:

    python -m ssmts.data.make_listops --out data/listops-small --n-train 2000 --min-length 50 --max-length 500

Load the result with ssmts.data.lra.load_lra_listops(OUT, max_length=...).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from ssmts.data.listops_synth import generate_listops, write_listops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
    parser.add_argument("--n-train", type=int, default=96000, help="training examples (default: 96000)")
    parser.add_argument("--n-val", type=int, default=2000, help="validation examples (default: 2000)")
    parser.add_argument("--n-test", type=int, default=2000, help="test examples (default: 2000)")
    parser.add_argument(
        "--min-length",
        type=int,
        default=500,
        help="keep trees longer than this many tokens (default: 500)",
    )
    parser.add_argument(
        "--max-length",
        type=int,
        default=2000,
        help="keep trees shorter than this many tokens (default: 2000)",
    )
    parser.add_argument("--max-depth", type=int, default=10, help="maximum tree depth (default: 10)")
    parser.add_argument("--max-args", type=int, default=10, help="maximum arguments per operator (default: 10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args(argv)

    splits = generate_listops(
        args.n_train,
        args.n_val,
        args.n_test,
        min_length=args.min_length,
        max_length=args.max_length,
        max_depth=args.max_depth,
        max_args=args.max_args,
        random_state=args.seed,
    )
    for path in write_listops(splits, args.out):
        print(f"wrote {path}")
    for name, rows in splits.items():
        counts = Counter(value for _, value in rows)
        print(f"  {name}: {len(rows)} examples, labels {dict(sorted(counts.items()))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
