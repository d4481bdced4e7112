"""Generate a Pathfinder-style data set in the LRA release layout.

Writes OUT/pathfinder<res>/curv_contour_length_14/{imgs/<k>/sample_<n>.png, metadata/<k>.npy}.
Example (a 32x32 set of 20000 images; about 20 minutes on one core):

    python -m ssmts.data.make_pathfinder --out data/lra_synth --n-samples 20000 --resolution 32

Path-X-like 128x128 images: --resolution 128. Load the result with
ssmts.data.lra.load_lra_pathfinder(OUT, resolution=RES).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ssmts.data.pathfinder_synth import PathfinderStyle, write_pathfinder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output root (the lra_release/ equivalent)")
    parser.add_argument("--n-samples", type=int, default=20000, help="images, half of each label (default: 20000)")
    parser.add_argument("--resolution", type=int, default=32, help="image side in pixels (default: 32; 128 is Path-X)")
    parser.add_argument(
        "--n-distractors",
        type=int,
        default=None,
        help="short distractor paths (default: by resolution)",
    )
    parser.add_argument(
        "--max-turn",
        type=float,
        default=None,
        help="largest turn between dashes, degrees (default: 45)",
    )
    parser.add_argument(
        "--images-per-folder",
        type=int,
        default=1000,
        help="images per imgs/<k> folder (default: 1000)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args(argv)

    overrides = {}
    if args.n_distractors is not None:
        overrides["n_distractors"] = args.n_distractors
    if args.max_turn is not None:
        overrides["max_turn_degrees"] = args.max_turn
    style = PathfinderStyle.for_resolution(args.resolution, **overrides)
    directory = write_pathfinder(args.out, args.n_samples, style, args.images_per_folder, args.seed)
    print(f"wrote {args.n_samples} images ({style.resolution}x{style.resolution}) to {directory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
