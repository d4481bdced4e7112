"""Synthesize a Speech Commands-format data set of spoken commands with espeak-ng.

A corpus of any size (ssmts.data.speech_corpus.make_corpus): n clips of every word in each
split, voices drawn from every espeak-ng language and variant that reads the words, validation
and test voices never heard in training. Rerunning the same command finishes or reuses DIR, and
the same command with a larger --train-per-word grows it in place:

    python -m ssmts.data.make_spoken_commands --out DIR --words sc10 \\
        --train-per-word 300 --val-per-word 30 --test-per-word 50 --seed 0 --jobs 2

Without --train-per-word, the fixed-voice set of ssmts.data.speech_synth.synthesize_spoken_commands;
its defaults make the compact copy installed with the package (ssmts/data/spoken_commands_mini,
byte for byte with espeak-ng 1.51): 24 voices split 16 / 4 / 4 into training, validation and
test, plus 36 voices that speak test clips only (160 / 40 / 400 clips):

    python -m ssmts.data.make_spoken_commands --out ssmts/data/spoken_commands_mini --seed 0

Load the result with ssmts.data.speech.load_speech_commands(OUT) (words="sc10", "sc35" or "all").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ssmts.data.speech_corpus import WORD_SETS, describe_corpus, make_corpus
from ssmts.data.speech_synth import (
    DEFAULT_VOICES,
    EXTRA_TEST_VOICES,
    NOISE_KINDS,
    espeak_version,
    synthesize_spoken_commands,
)

# Options of one mode only: given in the other mode they are an error, not silently ignored.
_FIXED_VOICE_OPTIONS = ("voices", "extra_test_voices", "clips_per_voice", "val_fraction", "test_fraction", "amplitude")
_CORPUS_OPTIONS = ("val_per_word", "test_per_word", "english_fraction", "level_dbfs", "noise", "jobs", "quiet")


def _comma_list(text: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return items


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--words", default="sc10", help="'sc10', 'sc35', or comma-separated words (default: sc10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    pair = dict(nargs=2, default=None, metavar=("LOW", "HIGH"))
    parser.add_argument("--pitch", type=int, help="espeak pitch 0..99 (default: 20 80; fixed voices 30 70)", **pair)
    parser.add_argument("--speed", type=int, help="words per minute (default: 130 230; fixed voices 140 200)", **pair)
    parser.add_argument(
        "--snr-db", type=float, help="noise SNR in dB (default: 5 30; fixed voices, white noise: 10 30)", **pair
    )

    corpus = parser.add_argument_group("corpus of any size (when --train-per-word is given)")
    corpus.add_argument("--train-per-word", type=int, help="training clips of every word")
    corpus.add_argument("--val-per-word", type=int, help="validation clips of every word (default: 30)")
    corpus.add_argument("--test-per-word", type=int, help="test clips of every word (default: 50)")
    corpus.add_argument(
        "--english-fraction", type=float, help="share of English-accent voices in each split (default: 0.75)"
    )
    corpus.add_argument("--level-dbfs", type=float, help="peak level of the speech in dBFS (default: -24 -3)", **pair)
    corpus.add_argument(
        "--noise", type=_comma_list, help=f"comma-separated noise kinds among {','.join(NOISE_KINDS)} (default: all)"
    )
    corpus.add_argument("--jobs", type=int, help="worker processes (default: the available cores)")
    corpus.add_argument("--quiet", action="store_true", default=None, help="no progress bar")

    fixed = parser.add_argument_group("fixed voice list (without --train-per-word)")
    fixed.add_argument(
        "--voices",
        type=_comma_list,
        help="comma-separated espeak-ng voices such as en-us,en-gb+f3 (default: the 24 DEFAULT_VOICES)",
    )
    fixed.add_argument(
        "--extra-test-voices",
        type=_comma_list,
        help="comma-separated voices that speak test clips only, or 'none' (default: the 36 EXTRA_TEST_VOICES "
        "with the default voices, none with --voices)",
    )
    fixed.add_argument("--clips-per-voice", type=int, help="clips of each word per voice (default: 1)")
    fixed.add_argument("--val-fraction", type=float, help="fraction of voices for validation (default: 0.15)")
    fixed.add_argument("--test-fraction", type=float, help="fraction of voices for test (default: 0.15)")
    fixed.add_argument("--amplitude", type=int, help="espeak amplitude 0..200 (default: 60 110)", **pair)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    corpus_mode = args.train_per_word is not None
    foreign = _FIXED_VOICE_OPTIONS if corpus_mode else _CORPUS_OPTIONS
    given = [f"--{name.replace('_', '-')}" for name in foreign if getattr(args, name) is not None]
    if given:
        mode = "with --train-per-word" if corpus_mode else "without --train-per-word (the fixed voice list)"
        parser.error(f"{', '.join(given)} cannot be used {mode}")
    words = WORD_SETS.get(args.words.lower()) or _comma_list(args.words)
    # Ranges and counts not given take the defaults of the function that makes the data.
    ranges = {
        f"{name}_range": tuple(getattr(args, name))
        for name in ("pitch", "speed", "snr_db", "amplitude", "level_dbfs")
        if getattr(args, name) is not None
    }
    try:
        return _make_corpus(args, words, ranges) if corpus_mode else _make_fixed_voice_set(args, words, ranges)
    except (ValueError, FileExistsError, FileNotFoundError) as error:  # a bad request: its message, no traceback
        parser.exit(2, f"{parser.prog}: error: {error}\n")


def _given(args: argparse.Namespace, names: dict[str, str]) -> dict:
    """{parameter: value} of the options (attribute -> parameter name) given on the command line."""
    return {parameter: getattr(args, name) for name, parameter in names.items() if getattr(args, name) is not None}


def _make_corpus(args: argparse.Namespace, words, ranges: dict) -> int:
    start = time.perf_counter()
    out = make_corpus(
        args.out,
        words=words,
        train_per_word=args.train_per_word,
        seed=args.seed,
        progress=not args.quiet,
        **ranges,
        **_given(
            args,
            {
                "val_per_word": "val_per_word",
                "test_per_word": "test_per_word",
                "english_fraction": "english_fraction",
                "noise": "noise_kinds",
                "jobs": "jobs",
            },
        ),
    )
    seconds = time.perf_counter() - start
    print(f"corpus of {len(words)} words in {out} ({espeak_version()}), {seconds:.0f} s")
    for split, counts in describe_corpus(out).items():
        print(f"  {split}: {counts['clips']} clips, {counts['voices']} voices")
    return 0


def _make_fixed_voice_set(args: argparse.Namespace, words, ranges: dict) -> int:
    voices = args.voices or list(DEFAULT_VOICES)
    if args.extra_test_voices is None:  # the defaults are the shipped copy's recipe
        extra_test_voices = [] if args.voices else list(EXTRA_TEST_VOICES)
    else:
        extra_test_voices = [] if args.extra_test_voices == ["none"] else args.extra_test_voices
    clips_per_voice = 1 if args.clips_per_voice is None else args.clips_per_voice
    voices_by_split = synthesize_spoken_commands(
        args.out,
        words=words,
        voices=voices,
        extra_test_voices=extra_test_voices,
        clips_per_voice=clips_per_voice,
        random_state=args.seed,
        **ranges,
        **_given(args, {"val_fraction": "val_fraction", "test_fraction": "test_fraction"}),
    )
    n_clips = len(words) * clips_per_voice
    n_total = n_clips * (len(voices) + len(extra_test_voices))
    print(f"wrote {n_total} clips of {len(words)} words to {args.out} with {espeak_version()}")
    for split, members in voices_by_split.items():
        print(f"  {split}: {len(members) * n_clips} clips, voices {', '.join(members)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
