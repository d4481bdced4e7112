"""Synthesize a Speech Commands-format data set of spoken commands with espeak-ng.

Example (the compact copy installed with the package, ssmts/data/spoken_commands_mini):

    python -m ssmts.data.make_spoken_commands --out ssmts/data/spoken_commands_mini --seed 0

Load the result with ssmts.data.speech.load_speech_commands(OUT).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ssmts.data.speech import SC10_WORDS, SC35_WORDS
from ssmts.data.speech_synth import DEFAULT_VOICES, espeak_version, synthesize_spoken_commands

WORD_SETS = {"sc10": SC10_WORDS, "sc35": SC35_WORDS}


def _comma_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="new (or empty) output directory")
    parser.add_argument(
        "--words",
        default="sc10",
        help="'sc10', 'sc35', or comma-separated words (default: sc10)",
    )
    parser.add_argument(
        "--voices",
        type=_comma_list,
        default=list(DEFAULT_VOICES),
        help="comma-separated espeak-ng voices such as en-us,en-gb+f3 (default: the 24 DEFAULT_VOICES)",
    )
    parser.add_argument("--clips-per-voice", type=int, default=1, help="clips of each word per voice (default: 1)")
    parser.add_argument(
        "--val-fraction", type=float, default=0.15, help="fraction of voices for validation (default: 0.15)"
    )
    parser.add_argument("--test-fraction", type=float, default=0.15, help="fraction of voices for test (default: 0.15)")
    parser.add_argument(
        "--pitch",
        type=int,
        nargs=2,
        default=(30, 70),
        metavar=("LOW", "HIGH"),
        help="espeak pitch 0..99 (default: 30 70)",
    )
    parser.add_argument(
        "--speed",
        type=int,
        nargs=2,
        default=(140, 200),
        metavar=("LOW", "HIGH"),
        help="words per minute (default: 140 200)",
    )
    parser.add_argument(
        "--amplitude",
        type=int,
        nargs=2,
        default=(60, 110),
        metavar=("LOW", "HIGH"),
        help="espeak amplitude 0..200 (default: 60 110)",
    )
    parser.add_argument(
        "--snr-db",
        type=float,
        nargs=2,
        default=(10.0, 30.0),
        metavar=("LOW", "HIGH"),
        help="white-noise SNR in dB (default: 10 30)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    args = parser.parse_args(argv)

    words = WORD_SETS.get(args.words.lower()) or _comma_list(args.words)
    voices_by_split = synthesize_spoken_commands(
        args.out,
        words=words,
        voices=args.voices,
        clips_per_voice=args.clips_per_voice,
        val_fraction=args.val_fraction,
        test_fraction=args.test_fraction,
        pitch_range=tuple(args.pitch),
        speed_range=tuple(args.speed),
        amplitude_range=tuple(args.amplitude),
        snr_db_range=tuple(args.snr_db),
        random_state=args.seed,
    )
    n_clips = len(words) * args.clips_per_voice
    print(f"wrote {n_clips * len(args.voices)} clips of {len(words)} words to {args.out} with {espeak_version()}")
    for split, voices in voices_by_split.items():
        print(f"  {split}: {len(voices) * n_clips} clips, voices {', '.join(voices)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
