"""The benchmark task names, written out as users type them (what the registry must keep)."""

TASK_NAMES = [
    "lra-listops",
    "lra-text",
    "lra-retrieval",
    "lra-image",
    "lra-pathfinder",
    "lra-pathx",
    "sc10",
    "sc35",
    "sc10-mfcc",
    "smnist",
    "psmnist",
    "scifar",
    "bidmc-rr",
    "bidmc-hr",
    "bidmc-spo2",
    "state-tracking",
]
