"""Offline byte-level stand-ins for LRA Text (IMDB) and LRA Retrieval (AAN).

Neither corpus can be synthesized honestly, so these are plumbing stand-ins with the
same input contract as the real loaders (byte ids = byte + 1, 0 = padding, vocab 257),
built on tasks that need the whole document:

Text: a document is a run of pseudo-words with a few sentiment cue words ("superb",
"dreadful" ...) scattered through it; the label is the polarity with more cues (ties
never occur). The cues are a small fraction of the bytes, so the model must find and
count them across the document.

Retrieval: every document is filler plus words of one of `n_topics` topics (each a
set of pseudo-words); a pair is labelled related (1) when both documents share the
topic, else 0 (balanced). Like AAN, relatedness is a property of the pair, so the
two-tower model must compare the two encodings.

Both say nothing about accuracy on IMDB or AAN.
"""

from __future__ import annotations

import numpy as np

from ssmts.data.base import Split, TaskData
from ssmts.data.lra import BYTE_VOCAB_SIZE, encode_bytes

POSITIVE_CUES = ("superb", "wonderful", "moving", "brilliant", "delightful", "gripping", "charming", "masterful")
NEGATIVE_CUES = ("dreadful", "boring", "clumsy", "tedious", "awful", "lifeless", "shallow", "grating")

_LETTERS = np.array(list("abcdefghijklmnopqrstuvwxyz"))


def _pseudo_words(rng: np.random.Generator, n: int, exclude: set[str]) -> list[str]:
    """n distinct lowercase pseudo-words of 2..8 letters that are not in `exclude`."""
    words: list[str] = []
    seen = set(exclude)
    while len(words) < n:
        word = "".join(rng.choice(_LETTERS, size=int(rng.integers(2, 9))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _words_within(draw, n_bytes: int) -> list[str]:
    """Words from draw() until one more would make the space-joined text longer than n_bytes."""
    words, size = [], -1  # n words take sum(len) + n - 1 bytes
    while True:
        word = draw()
        if size + 1 + len(word) > n_bytes:
            return words
        words.append(word)
        size += 1 + len(word)


_MIN_LENGTH = 96
"""Shortest document in bytes: room for 7 cue words (at most 10 bytes each with the space) and filler."""


def _lengths(rng: np.random.Generator, n: int, max_length: int) -> np.ndarray:
    """Document lengths in bytes, uniform in [max(96, max_length / 4), max_length]."""
    if max_length < _MIN_LENGTH:
        raise ValueError(f"max_length must be at least {_MIN_LENGTH} bytes, got {max_length}")
    return rng.integers(max(_MIN_LENGTH, max_length // 4), max_length + 1, size=n)


def make_text_standin(
    n_train: int, n_val: int, n_test: int, *, max_length: int = 4096, random_state: int = 0
) -> TaskData:
    """Byte-level sentiment stand-in for LRA Text.

    X: (n, max_length) int64 byte ids (0 = padding); y: (n,) int64 (0 = negative, 1 = positive);
    lengths: (n,) byte counts. Every document holds 3, 5 or 7 cue words, the majority of
    the label's polarity, at uniformly random word positions.
    """
    rng = np.random.default_rng(random_state)
    filler = _pseudo_words(rng, 500, set(POSITIVE_CUES) | set(NEGATIVE_CUES))
    n = n_train + n_val + n_test
    y = rng.permutation(np.arange(n) % 2).astype(np.int64)
    documents = []
    cue_room = 1 + max(map(len, POSITIVE_CUES + NEGATIVE_CUES))
    for label, n_bytes in zip(y, _lengths(rng, n, max_length)):
        n_cues = int(rng.choice([3, 5, 7]))
        n_major = int(rng.integers(n_cues // 2 + 1, n_cues + 1))
        major, minor = (POSITIVE_CUES, NEGATIVE_CUES) if label == 1 else (NEGATIVE_CUES, POSITIVE_CUES)
        cues = [major[int(rng.integers(len(major)))] for _ in range(n_major)]
        cues += [minor[int(rng.integers(len(minor)))] for _ in range(n_cues - n_major)]
        # Filler leaves room for the cues, which are then inserted at random word positions.
        words = _words_within(lambda: filler[int(rng.integers(len(filler)))], int(n_bytes) - n_cues * cue_room)
        for cue in cues:
            words.insert(int(rng.integers(len(words) + 1)), cue)
        documents.append(" ".join(words).encode("ascii"))
    X, lengths = encode_bytes(documents, max_length)
    splits = _three_way(X, y, lengths, n_train, n_val)
    return TaskData(
        *splits,
        n_classes=2,
        vocab_size=BYTE_VOCAB_SIZE,
        classes=["neg", "pos"],
        source="synthetic: ssmts.tasks.synthetic_text.make_text_standin",
        meta={
            "task": "text",
            "stand_in_for": "lra-text",
            "max_length": max_length,
            "tokenizer": "bytes (id = byte + 1)",
            "random_state": random_state,
            "recipe": "pseudo-word filler with 3/5/7 sentiment cue words, label = majority polarity",
        },
    )


def make_retrieval_standin(
    n_train: int,
    n_val: int,
    n_test: int,
    *,
    max_length: int = 4000,
    n_topics: int = 16,
    topic_share: float = 0.2,
    random_state: int = 0,
) -> TaskData:
    """Byte-level document-pair stand-in for LRA Retrieval.

    X: (n, 2, max_length) int64 byte ids of the two documents; y: (n,) int64, 1 when both
    documents are about the same topic; lengths: (n, 2) byte counts. About `topic_share`
    of each document's words come from its topic's 20 words, the rest from shared filler.
    """
    if n_topics < 2:
        raise ValueError(f"n_topics must be at least 2, got {n_topics}")
    rng = np.random.default_rng(random_state)
    filler = _pseudo_words(rng, 500, set())
    topic_words: list[list[str]] = []
    for _ in range(n_topics):  # topics share no word with the filler or with each other
        topic_words.append(_pseudo_words(rng, 20, set(filler).union(*topic_words)))
    n = n_train + n_val + n_test
    y = rng.permutation(np.arange(n) % 2).astype(np.int64)

    def document(topic: int, n_bytes: int) -> bytes:
        def draw() -> str:
            if rng.random() < topic_share:
                return topic_words[topic][int(rng.integers(20))]
            return filler[int(rng.integers(len(filler)))]

        return " ".join(_words_within(draw, n_bytes)).encode("ascii")

    first, second = [], []
    for label, (n1, n2) in zip(y, _lengths(rng, 2 * n, max_length).reshape(n, 2)):
        topic = int(rng.integers(n_topics))
        other = topic if label == 1 else int((topic + rng.integers(1, n_topics)) % n_topics)
        first.append(document(topic, int(n1)))
        second.append(document(other, int(n2)))
    X1, lengths1 = encode_bytes(first, max_length)
    X2, lengths2 = encode_bytes(second, max_length)
    X = np.stack([X1, X2], axis=1)
    lengths = np.stack([lengths1, lengths2], axis=1)
    splits = _three_way(X, y, lengths, n_train, n_val)
    return TaskData(
        *splits,
        n_classes=2,
        vocab_size=BYTE_VOCAB_SIZE,
        classes=["unrelated", "related"],
        source="synthetic: ssmts.tasks.synthetic_text.make_retrieval_standin",
        meta={
            "task": "retrieval",
            "stand_in_for": "lra-retrieval",
            "max_length": max_length,
            "tokenizer": "bytes (id = byte + 1)",
            "input_layout": "X[:, 0] = text1, X[:, 1] = text2",
            "n_topics": n_topics,
            "topic_share": topic_share,
            "random_state": random_state,
        },
    )


def _three_way(X: np.ndarray, y: np.ndarray, lengths: np.ndarray, n_train: int, n_val: int) -> list[Split]:
    bounds = (n_train, n_train + n_val)
    return [Split(X[a:b], y[a:b], lengths[a:b]) for a, b in zip((0, *bounds), (*bounds, len(y)))]
