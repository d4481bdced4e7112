"""Where the real data sets' files lie: the folder and file names of each published release.

Plain names only (the standard library, nothing else), so that the task registry and
`ssmts tasks list --data-dir DIR` can say which data are present without importing numpy,
torch or an audio library. The loaders (ssmts.data.lra, .pixels, .speech, .bidmc) read the
same names from here and export them under their usual names.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- LRA (ssmts.data.lra)

LISTOPS_DIR = "listops-1000"
LISTOPS_FILES = {"train": "basic_train.tsv", "val": "basic_val.tsv", "test": "basic_test.tsv"}

AAN_DIR = "tsv_data"
AAN_FILES = {"train": "new_aan_pairs.train.tsv", "val": "new_aan_pairs.eval.tsv", "test": "new_aan_pairs.test.tsv"}

PATHFINDER_DIFFICULTY = "curv_contour_length_14"
"""The 'hard' Pathfinder variant, the one LRA uses."""

# ----------------------------------------------------------------------------- pixels (ssmts.data.pixels)

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}

CIFAR10_DIR = "cifar-10-batches-py"
CIFAR10_TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
CIFAR10_TEST_BATCH = "test_batch"

# ----------------------------------------------------------------------------- Speech Commands (ssmts.data.speech)

SPEECH_COMMANDS_RATE = 16000
"""Sample rate (Hz) of every Speech Commands clip."""

SC10_WORDS = ("yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go")
"""The ten command words of the SC10 task, in the label order of the S4 code."""

SC35_WORDS = (
    "backward",
    "bed",
    "bird",
    "cat",
    "dog",
    "down",
    "eight",
    "five",
    "follow",
    "forward",
    "four",
    "go",
    "happy",
    "house",
    "learn",
    "left",
    "marvin",
    "nine",
    "no",
    "off",
    "on",
    "one",
    "right",
    "seven",
    "sheila",
    "six",
    "stop",
    "three",
    "tree",
    "two",
    "up",
    "visual",
    "wow",
    "yes",
    "zero",
)
"""All 35 word folders of Speech Commands v0.02, sorted (the SC35 label order)."""

SPLIT_LISTS = ("validation_list.txt", "testing_list.txt")

# ----------------------------------------------------------------------------- BIDMC (ssmts.data.bidmc)

# target name -> archive problem name; the S4 code's folder names are the suffixes.
BIDMC_PROBLEMS = {"rr": "BIDMC32RR", "hr": "BIDMC32HR", "spo2": "BIDMC32SpO2"}


def bidmc_target(target: str) -> str:
    """``target`` as a key of BIDMC_PROBLEMS ("rr", "hr" or "spo2", any case); ValueError otherwise."""
    key = str(target).lower()
    if key not in BIDMC_PROBLEMS:
        raise ValueError(f"target must be one of {sorted(BIDMC_PROBLEMS)}, got {target!r}")
    return key


def bidmc_file_names(target: str) -> tuple[str, str]:
    """The archive's (TRAIN, TEST) file names for ``target`` in {"rr", "hr", "spo2"}."""
    problem = BIDMC_PROBLEMS[bidmc_target(target)]
    return f"{problem}_TRAIN.ts", f"{problem}_TEST.ts"
