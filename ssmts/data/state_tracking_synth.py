"""State-tracking problems: offline, seeded generators (numpy only).

Each problem is a finite-state machine driven by a random token sequence; the label at
step t is the state after reading tokens 1..t (a per-step target, so a causal model's
output at step t is its answer for the prefix of length t).

    parity   tokens {0, 1}, state = XOR of the tokens so far (2 states; the group Z2)
    mod5     tokens {0..4}, state = sum of the tokens mod 5 (the cyclic group Z5)
    cycle    cycle navigation: tokens {stay, +1, -1} move an agent on a cycle of 5 positions
             starting at 0; state = its position (Z5 acting by rotations, Deletang et al. 2023)
    a5       the word problem of A5, the alternating group of the 60 even permutations of
             5 elements (the smallest non-solvable group): tokens are elements g_1, g_2, ...,
             state = the product g_1 g_2 ... g_t (composition (p q)(k) = p(q(k)))

parity, mod5 and cycle are abelian (solvable by commuting transitions, but only with sign
flips / rotations: not by positive diagonal ones); a5 needs non-commuting transitions. The
enumeration of A5 is fixed: the even permutations of (0, 1, 2, 3, 4) in lexicographic order
(`a5_elements`), so element 0 is the identity.

Token ids are shifted by one: id 0 is padding (ssmts' token convention), symbol s is id s + 1.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from .base import Split, TaskData

PROBLEMS = ("parity", "mod5", "cycle", "a5")


@dataclass(frozen=True)
class StateTrackingProblem:
    """name, number of input symbols, number of states (classes), one-line description."""

    name: str
    n_symbols: int
    n_states: int
    description: str

    @property
    def vocab_size(self) -> int:
        """Token ids including the padding id 0."""
        return self.n_symbols + 1


PROBLEM_INFO = {
    "parity": StateTrackingProblem("parity", 2, 2, "parity of a bit string (Z2)"),
    "mod5": StateTrackingProblem("mod5", 5, 5, "running sum mod 5 (Z5)"),
    "cycle": StateTrackingProblem("cycle", 3, 5, "cycle navigation: stay/+1/-1 on a 5-cycle"),
    "a5": StateTrackingProblem("a5", 60, 60, "word problem of the alternating group A5 (60 even permutations)"),
}


def _is_even(permutation: tuple[int, ...]) -> bool:
    inversions = sum(
        1 for i in range(len(permutation)) for j in range(i + 1, len(permutation)) if permutation[i] > permutation[j]
    )
    return inversions % 2 == 0


def a5_elements() -> np.ndarray:
    """The 60 even permutations of (0..4) in lexicographic order, (60, 5) int64; row 0 is the identity."""
    return np.array([p for p in itertools.permutations(range(5)) if _is_even(p)], dtype=np.int64)


def a5_multiplication_table() -> np.ndarray:
    """table[i, j] = index of the product p_i p_j, (p_i p_j)(k) = p_i(p_j(k)): (60, 60) int64."""
    elements = a5_elements()
    index = {tuple(p): i for i, p in enumerate(elements)}
    return np.array([[index[tuple(elements[i][elements[j]])] for j in range(60)] for i in range(60)], dtype=np.int64)


def state_sequence(problem: str, symbols: np.ndarray) -> np.ndarray:
    """The state after every step for symbols (n, L) in 0..n_symbols-1: (n, L) int64 in 0..n_states-1."""
    symbols = np.asarray(symbols, dtype=np.int64)
    if problem == "parity":
        return np.cumsum(symbols, axis=1) % 2
    if problem == "mod5":
        return np.cumsum(symbols, axis=1) % 5
    if problem == "cycle":
        moves = np.array([0, 1, -1], dtype=np.int64)[symbols]
        return np.cumsum(moves, axis=1) % 5
    if problem == "a5":
        table = a5_multiplication_table()
        states = np.empty_like(symbols)
        current = np.zeros(symbols.shape[0], dtype=np.int64)  # the identity
        for t in range(symbols.shape[1]):
            current = table[current, symbols[:, t]]
            states[:, t] = current
        return states
    raise ValueError(f"unknown state-tracking problem {problem!r}; choose one of {PROBLEMS}")


def generate_state_tracking(
    problem: str, n: int, length: int, random_state: int | np.random.Generator = 0
) -> tuple[np.ndarray, np.ndarray]:
    """n random sequences of `length` tokens: (tokens (n, L) int64 ids 1..n_symbols, states (n, L) int64)."""
    if problem not in PROBLEM_INFO:
        raise ValueError(f"unknown state-tracking problem {problem!r}; choose one of {PROBLEMS}")
    if int(n) < 1 or int(length) < 1:
        raise ValueError(f"n and length must be >= 1, got n={n}, length={length}")
    rng = random_state if isinstance(random_state, np.random.Generator) else np.random.default_rng(random_state)
    symbols = rng.integers(0, PROBLEM_INFO[problem].n_symbols, size=(int(n), int(length)))
    return symbols + 1, state_sequence(problem, symbols)


def make_state_tracking_task(
    problem: str = "parity",
    n_train: int = 2000,
    n_val: int = 200,
    n_test: int = 200,
    train_length: int = 40,
    test_length: int = 80,
    random_state: int = 0,
) -> TaskData:
    """One problem as a TaskData with per-step labels y (n, L): train and validation at `train_length`,
    test at `test_length` (longer: its steps beyond train_length measure length generalization)."""
    info = PROBLEM_INFO.get(problem)
    if info is None:
        raise ValueError(f"unknown state-tracking problem {problem!r}; choose one of {PROBLEMS}")
    rng = np.random.default_rng(random_state)
    splits = [
        Split(*generate_state_tracking(problem, n, length, rng))
        for n, length in ((n_train, train_length), (n_val, train_length), (n_test, test_length))
    ]
    return TaskData(
        *splits,
        n_classes=info.n_states,
        vocab_size=info.vocab_size,
        classes=[str(k) for k in range(info.n_states)],
        source=f"synthetic: ssmts.data.state_tracking_synth {problem} (seed {random_state})",
        meta={"problem": problem, "train_length": train_length, "test_length": test_length, "per_step_labels": True},
    )


__all__ = [
    "PROBLEMS",
    "PROBLEM_INFO",
    "StateTrackingProblem",
    "a5_elements",
    "a5_multiplication_table",
    "state_sequence",
    "generate_state_tracking",
    "make_state_tracking_task",
]
