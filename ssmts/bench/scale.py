"""Learning curves where deep SSMs should win: `python -m ssmts.bench scale [options]`.

Long sequences and growing training sets, generated offline: the deep network (`SSMClassifier`
with a preset per task) against the training-free classifiers, `SSMFeatureClassifier`, MiniRocket,
MultiRocket-Hydra and QUANT, at n = 100, 300, 1,000, 3,000 and 10,000 training series.

Tasks (TASKS):

    speech      spoken words (the 10 SC10 words) from raw audio at 4 kHz, 4,000 steps; also
                scored zero-shot at 2 kHz: the SSM rows rescale Delta (nothing retrained), the
                others get the 2 kHz clips resampled back to 4 kHz. --speech-rate R trains and
                tests at R instead (the rows' task "speech-<R>hz"), the zero-shot test at R / 2:
                with R = 2000 its accuracy is what the same clips at 2 kHz hold for a network
                trained on them, the ceiling of the 4 kHz network's zero-shot accuracy. Read
                from --speech-dir, a directory in the Speech Commands layout; an empty or missing
                one is first filled by ssmts.data.speech_corpus.make_corpus (espeak-ng voices,
                voice-disjoint splits, max(--sizes, 3,000) / 10 training clips a word, 30 validation
                and 50 test clips a word; cached). The pool is ordered by each clip's index within
                its word, so that its first 3,000 clips are the same in every corpus of format 2
                at least that large (a larger corpus holds a smaller one).
    listops     ListOps (the Long Range Arena generator, ssmts.data.listops_synth), expressions of
                --listops-length tokens at most (LRA: 2,000), one-hot channels of the 15 tokens
                (padding all zeros), 10 classes.
    pathfinder  Pathfinder at 32 x 32 (ssmts.data.pathfinder_synth), 1,024 steps, 2 classes; the
                pool is drawn in blocks of 3,000 images, kept in --cache-dir when given.

Protocol: the training series are a seeded, class-stratified subset of n of the task's training
pool (of its first POOL_SIZES series for the sizes up to that, whatever the command's largest);
the validation and test sets are the same for every n and model (speech: the corpus's
voice-disjoint splits, 30 and 50 clips a word; the generated tasks: --test-size series each, drawn
apart from the pool). The network's preset is fixed per task (PRESETS: its settings and where they
come from), chosen on `--validation` rows (scored on the validation split); the test split only
reports. `--splits validation test` scores each fit on both splits, a row each. Every (task, model,
n, seed, split) is a row of the JSON-lines file --out: accuracy (and
zero-shot accuracy), fit and predict seconds, torch threads and the machine's load average before
and after. Rows already in the file are skipped, so an interrupted run continues where it stopped,
and several commands can fill one file. `--report` prints the table and the crossovers and
`--plot PATH` draws the curves.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ssmts.tasks.demo import DEMO

SIZES = (100, 300, 1000, 3000, 10000)
MODELS = ("ssm", "features", "minirocket", "mr-hydra", "quant")
TRAINING_FREE = ("features", "minirocket", "mr-hydra", "quant")
SPEECH_RATE = 4000
# A generated task's training pool holds at least this many series, whatever the sizes asked for, so that
# the subset of a given n and seed is the same series in every run (pathfinder's images are slow to draw).
# The pool every size up to it draws from (so that a row does not depend on the largest size of its
# command); larger sizes draw from the whole pool.
POOL_SIZES = {"listops": 10000, "pathfinder": 3000, "speech": 3000}
PATHFINDER_BLOCK = 3000  # images of one seeded stream of the Pathfinder pool
# QUANT's forest (aeon's: 200 extra-trees) grown in chunks when a work directory keeps them (--work-dir)
QUANT_TREES, QUANT_CHUNKS = 200, 8
# training series a kept piece of MultiRocket-Hydra's transform holds (--work-dir)
MR_HYDRA_PIECE = 500
LISTOPS_TOKENS = 15  # ids 1..15 of ssmts.data.lra's ListOps vocabulary (0 is padding)


@dataclass(frozen=True)
class Preset:
    """The network of one task: SSMClassifier parameters, and why these. own_lengths: the network reads
    a padded task's series (ListOps) at their own lengths, a list of unequal series (`own_lengths`); the
    training-free rows need equal lengths and keep the padding."""

    params: dict
    why: str
    own_lengths: bool = False
    steps_grow_with_n: bool = False  # at most max(params' max_steps, n) steps: a larger set gets more

    def params_for(self, n: int) -> dict:
        """The network's parameters for a row of n training series."""
        if not self.steps_grow_with_n:
            return dict(self.params)
        return dict(self.params, max_steps=max(self.params["max_steps"], int(n)))


# The ListOps network; Pathfinder's is the same read both ways.
LISTOPS_NETWORK = dict(
    d_model=64, d_state=32, n_layers=4, batch_size=32, lr=3e-3, max_epochs=30, min_steps=300, max_steps=3000
)

PRESETS = {
    "speech": Preset(
        dict(
            DEMO.classifier,
            d_model=64,
            max_epochs=30,
            min_steps=500,
            max_steps=3000,
            sample_rate=SPEECH_RATE,
            half_rate_share=0.5,
            dt_min=5e-4,
            dt_max=5e-2,
        ),
        "SSMClassifier's defaults, the demo's network (chosen on the shipped clips' validation voices, then "
        "on the development protocol), 30 epochs and at least 500 steps as there, at most 3,000 steps; "
        "chosen on the validation voices at n = 3,000, seed 0 (accuracy at 4 kHz / at 2 kHz): half of the "
        "batches at half the rate (67.3 % / 65.0 % against 61.7 % / 50.3 %), then time scales twice as long "
        "(Delta in [5e-4, 5e-2] instead of [1e-3, 1e-1]: 76.3 % / 78.0 %), those a network trained at 2 kHz "
        "has in its own steps; then, on the second corpus (format 2) at n = 3,000, seed 0, H = 64 against 32 "
        "(84.7 % / 85.0 % against 74.7 % / 75.7 %; the rule set beforehand: taken if more than 2 points above, "
        "for about 1.5x the fit, with a half-rate retention of at least 0.95); then at most n steps when n is "
        "above 3,000 (30 epochs; on n = 10,000, seed 0, 10,000 steps against 3,000: 94.3 % / 94.3 % against "
        "83.7 % / 85.3 %; the rule set beforehand: taken if at least 85.7 % with a retention of at least 0.95)",
        steps_grow_with_n=True,
    ),
    "listops": Preset(
        LISTOPS_NETWORK,
        "4 blocks of H=64, N=32 and the classifier's normalization (ListOps needs depth: LRA presets use 4-6 "
        "blocks), at most 3,000 steps, each expression read at its own length; chosen on the validation "
        "expressions at n = 10,000, seed 0: against 9,000 steps (34.3 % against 34.95 %: less than the 1 point "
        "set beforehand to pay for three times the fit, so the cheaper one stays), then the expressions at "
        "their own lengths against padded to 1,000 tokens (36.05 % against 34.3 %; the rule set beforehand: "
        "taken if higher, as it costs no more), then against reading both ways (34.65 %) and H = 128 (36.15 %): "
        "neither more than the 1 point set beforehand",
        own_lengths=True,
    ),
    "pathfinder": Preset(
        dict(LISTOPS_NETWORK, bidirectional=True),
        "the ListOps preset reading both ways (an image has no direction, and the LRA's Pathfinder models "
        "read both ways); chosen on the validation images at n = 3,000, seed 0: 60.5 % against 59.1 % one "
        "way (the rule set beforehand: taken if above 60.1 %), for about twice the fit",
    ),
}


@dataclass
class HeldOut:
    """Series scored, never trained on; `conditions` are further ways of scoring them."""

    X: np.ndarray
    y: np.ndarray
    conditions: dict = field(default_factory=dict)  # name -> (X, y, rate or None)


@dataclass
class ScaleData:
    """A task's training pool and its held-out splits: "validation" (what presets are chosen on) and
    "test" (reported only); both the same for every n, seed and model."""

    X_pool: np.ndarray
    y_pool: np.ndarray
    splits: dict[str, HeldOut]
    rate: int | None = None
    padded: bool = False  # series end in all-zero steps up to a common length (ListOps)


def own_lengths(X: np.ndarray) -> list[np.ndarray]:
    """Padded series (n, channels, L) -> a list of (channels, L_i), each cut after its last step with a
    nonzero value (all-zero series keep one step)."""
    nonzero = np.any(X != 0, axis=1)  # (n, L)
    lengths = np.where(nonzero.any(1), X.shape[-1] - np.argmax(nonzero[:, ::-1], axis=1), 1)
    return [x[:, :length] for x, length in zip(X, lengths)]


def _one_hot_tokens(X: np.ndarray) -> np.ndarray:
    """(n, L) int64 token ids (0 = padding) -> (n, 15, L) float32 one-hot, padding all zeros."""
    out = np.zeros((len(X), LISTOPS_TOKENS, X.shape[-1]), dtype=np.float32)
    rows, steps = np.nonzero(X > 0)
    out[rows, X[rows, steps] - 1, steps] = 1.0
    return out


def speech_task(rate: int) -> str:
    """The rows' task name of the spoken words at `rate` Hz ("speech" at the default 4 kHz)."""
    return "speech" if rate == SPEECH_RATE else f"speech-{rate}hz"


def load_speech(directory: str | Path, n_max: int, rate: int = SPEECH_RATE) -> ScaleData:
    """SC10 words at `rate` Hz (band-limited from the 16 kHz clips); zero-shot test at rate / 2. A
    directory without clips is synthesized first (ssmts.data.speech_corpus.make_corpus)."""
    from ssmts.data.speech import SPEECH_COMMANDS_RATE, load_speech_commands
    from ssmts.nn.resampling import change_rate

    directory = Path(directory)
    if not (directory / "testing_list.txt").exists():
        from ssmts.data.speech_corpus import make_corpus

        print(f"speech: synthesizing the spoken-words corpus into {directory} (cached for later runs)", flush=True)
        make_corpus(directory, "sc10", train_per_word=-(-n_max // 10), val_per_word=30, test_per_word=50)

    data = load_speech_commands(directory, words="sc10")
    to_rate = lambda X, rate: change_rate(X, SPEECH_COMMANDS_RATE, rate, method="resample")  # noqa: E731
    half = rate // 2
    order = _clip_order(directory, data.meta["files"]["train"])

    def held_out(split) -> HeldOut:
        y = np.asarray(split.y)
        return HeldOut(to_rate(split.X, rate), y, {"half_rate": (to_rate(split.X, half), y, half)})

    return ScaleData(
        to_rate(data.train.X[order], rate),
        np.asarray(data.train.y)[order],
        {"validation": held_out(data.val), "test": held_out(data.test)},
        rate,
    )


def _clip_order(directory: Path, train_files: list[str]) -> np.ndarray:
    """Order of the training clips in the pool: by their index within their word in the corpus
    (speech_corpus.training_clip_index: the k-th clips of every word, then the (k+1)-th), so that the
    first 10 m clips are the corpus of m clips a word that a larger corpus holds (format 2) and the
    pool's prefix of POOL_SIZES["speech"] is the same in every corpus at least that large. Clips the
    manifest does not name (a corpus of other origin) keep the loader's order, after the others."""
    from ssmts.data.speech_corpus import training_clip_index

    index = training_clip_index(directory)
    unnamed = len(train_files)
    return np.asarray(
        sorted(range(len(train_files)), key=lambda i: (index.get(train_files[i], unnamed), i)), dtype=np.int64
    )


def load_listops(n_max: int, max_length: int, n_test: int = 2000, seed: int = 0) -> ScaleData:
    """Expressions in generation order: the test set first, then as many for validation, then the
    pool, so that neither held-out set depends on n_max (and a smaller pool is a prefix of a larger)."""
    from ssmts.data.listops_synth import make_listops_task

    task = make_listops_task(  # its "train", "val", "test" are the first, second and third in order
        n_test, n_test, n_max, min_length=max_length // 4, max_length=max_length, pad_to=max_length, random_state=seed
    )
    held_out = lambda split: HeldOut(_one_hot_tokens(np.asarray(split.X)), np.asarray(split.y))  # noqa: E731
    return ScaleData(
        _one_hot_tokens(np.asarray(task.test.X)),
        np.asarray(task.test.y),
        {"test": held_out(task.train), "validation": held_out(task.val)},
        padded=True,
    )


def _write_npz(path: Path, **arrays) -> None:
    """np.savez to `path` through a partial file: a run killed while writing leaves no half file."""
    partial = path.with_name(path.name.removesuffix(".npz") + ".partial.npz")
    np.savez(partial, **arrays)
    os.replace(partial, path)


def _pathfinder_images(n: int, random_state: list[int], cache_dir: str | Path | None) -> tuple[np.ndarray, np.ndarray]:
    """n images of one seeded stream, (n, 1, 1024) float32 in [0, 1], and their labels. With cache_dir
    they are kept there (uint8, .npz, no pickles) and read back by later runs: drawing one takes
    ~0.06 s."""
    from ssmts.data.pathfinder_synth import generate_pathfinder

    path = None if cache_dir is None else Path(cache_dir) / f"pathfinder32-{'-'.join(map(str, random_state))}-{n}.npz"
    if path is not None and path.exists():
        with np.load(path, allow_pickle=False) as saved:
            pixels, labels = saved["pixels"], saved["labels"]
        if pixels.shape != (n, 1024) or pixels.dtype != np.uint8 or labels.shape != (n,):
            raise ValueError(f"{path} does not hold {n} Pathfinder images of 32 x 32: delete it to draw them again")
    else:
        samples = generate_pathfinder(n, random_state=random_state)
        pixels = np.stack([s.image.reshape(-1) for s in samples]) if samples else np.zeros((0, 1024), np.uint8)
        labels = np.asarray([s.label for s in samples], dtype=np.int64)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_npz(path, pixels=pixels, labels=labels)
    return pixels[:, None, :].astype(np.float32) / np.float32(255.0), labels.astype(np.int64)


def load_pathfinder(n_max: int, n_test: int = 2000, seed: int = 0, cache_dir: str | Path | None = None) -> ScaleData:
    """Test and validation images from two seeded streams, the pool from blocks of PATHFINDER_BLOCK
    images of further streams: the held-out sets do not depend on n_max, and a smaller pool is a
    prefix of a larger. (The first block's stream is [seed, 2], the pool of the first rows measured.)"""
    blocks = [
        _pathfinder_images(PATHFINDER_BLOCK, [seed, 2] if k == 0 else [seed, 2, k], cache_dir)
        for k in range(-(-n_max // PATHFINDER_BLOCK))
    ]
    X_pool = np.concatenate([X for X, _ in blocks])[:n_max]
    y_pool = np.concatenate([y for _, y in blocks])[:n_max]
    held_out = lambda stream: HeldOut(*_pathfinder_images(n_test, [seed, stream], cache_dir))  # noqa: E731
    return ScaleData(X_pool, y_pool, {"test": held_out(0), "validation": held_out(1)})


def subset(y_pool: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Indices of n training series, stratified by class (as equal per class as the pool allows), seeded."""
    if n > len(y_pool):
        raise ValueError(f"asked for {n} training series but the task's pool has {len(y_pool)}")
    rng = np.random.default_rng(seed)
    classes = np.unique(y_pool)
    by_class = [rng.permutation(np.flatnonzero(y_pool == c)) for c in classes]
    chosen, k = [], 0
    while len(chosen) < n:  # round robin over the classes: stratified, and exact n
        members = by_class[k % len(classes)]
        taken = k // len(classes)
        if taken < len(members):
            chosen.append(members[taken])
        k += 1
        if k > len(classes) * (len(y_pool) + 1):
            break
    return np.sort(np.asarray(chosen[:n]))


def _load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _at_training_rate(X: np.ndarray, rate: int | None, train_rate: int | None) -> np.ndarray:
    """X at `rate` resampled back to the training rate: what the rows that cannot be told a rate read."""
    if rate is None or rate == train_rate:
        return X
    from ssmts.nn.resampling import change_rate

    return change_rate(X, rate, train_rate, method="resample")


def _predict_at(model, kind: str, X: np.ndarray, rate: int | None, train_rate: int | None) -> np.ndarray:
    """Predictions for X at `rate`: the SSM rows are told the rate (Delta rescaled); the others get X
    resampled back to the training rate (what they need to see the same signal)."""
    if kind in ("ssm", "features") and rate is not None and rate != train_rate:
        return model.predict(X, sample_rate=rate)
    return model.predict(_at_training_rate(X, rate, train_rate))


def _saved(work: Path, name: str, compute) -> tuple[np.ndarray, float]:
    """(array, seconds): computed once (_shared), then read from work/<name>.npz (no pickles)."""
    _shared(work, [name], lambda _: {"value": compute()})
    stored = _read(work, name)
    return stored["value"], float(stored["seconds"])


def _mark_training_series(work: Path, X_train: np.ndarray, y: np.ndarray) -> None:
    """Refuses a work directory that holds the work of other training series; marks it as this one's."""
    import hashlib

    fingerprint = hashlib.sha256(np.ascontiguousarray(X_train).tobytes() + y.tobytes()).hexdigest()
    mark = work / "training-series.sha256"
    if mark.exists() and mark.read_text() != fingerprint:
        raise ValueError(f"{work} holds the work of other training series (another pool or length): delete it")
    mark.write_text(fingerprint)


def _quant_in_chunks(
    data: ScaleData, index: np.ndarray, seed: int, split: str, work: Path
) -> tuple[float, float, dict[str, np.ndarray]]:
    """QUANT as aeon builds it (its transform; 200 extra-trees, a tenth of the features a split,
    entropy), the trees grown in QUANT_CHUNKS seeded chunks whose class probabilities on the held-out
    series are kept in `work` with the transformed series: a fit stopped part way continues at its next
    chunk. The forest's vote is the mean of the chunks' (equal chunks: the mean over the trees), so this
    is aeon's model with other tree seeds. Returns the fit and predict seconds (sums over the chunks and
    the transforms, whenever they ran) and the predictions on `split` ("") and on each of its
    conditions."""
    from aeon.transformations.collection.interval_based import QUANTTransformer

    from .classify import quant_forest

    work.mkdir(parents=True, exist_ok=True)
    held_out = data.splits[split]
    inputs = {"": held_out.X}
    for condition, (X, _, rate) in held_out.conditions.items():
        inputs[condition] = _at_training_rate(X, rate, data.rate)

    saved = functools.partial(_saved, work)
    X_train, y = data.X_pool[index], data.y_pool[index]
    _mark_training_series(work, X_train, y)
    transformer = QUANTTransformer().fit(X_train[:1])  # its intervals depend on the length only
    train, fit_seconds = saved("train", lambda: transformer.transform(X_train))
    features, predict_seconds = {}, 0.0
    for name, X in inputs.items():
        features[name], seconds = saved(f"held-out-{name or split}", lambda X=X: transformer.transform(X))
        predict_seconds += seconds if not name else 0.0
    votes = {name: 0.0 for name in inputs}
    trees = QUANT_TREES // QUANT_CHUNKS

    def grow(name: str) -> dict[str, np.ndarray]:
        chunk = int(name.removeprefix("chunk-"))
        forest = quant_forest(False).set_params(n_estimators=trees, random_state=seed * QUANT_CHUNKS + chunk)
        started = time.perf_counter()
        forest.fit(train, y)
        grown = time.perf_counter() - started
        started = time.perf_counter()
        probabilities = {"p0": forest.predict_proba(features[""])}  # timed: the split's own predictions
        predicted = time.perf_counter() - started
        probabilities |= {f"p{i}": forest.predict_proba(features[name]) for i, name in enumerate(inputs) if name}
        return dict(classes=forest.classes_, fit_seconds=grown, predict_seconds=predicted, **probabilities)

    chunks = [f"chunk-{chunk}" for chunk in range(QUANT_CHUNKS)]
    _shared(work, chunks, grow)
    for chunk in chunks:
        stored = _read(work, chunk)
        classes = stored["classes"]
        fit_seconds += float(stored["fit_seconds"])
        predict_seconds += float(stored["predict_seconds"])
        for i, name in enumerate(inputs):
            votes[name] = votes[name] + stored[f"p{i}"] / QUANT_CHUNKS
    return fit_seconds, predict_seconds, {name: classes[np.argmax(v, axis=1)] for name, v in votes.items()}


def _shared(work: Path, names: Sequence[str], compute: Callable[[str], dict]) -> None:
    """Makes work/<name>.npz of each of `names` (compute(name): its arrays, stored with the seconds it
    took) unless it is there. Several processes running the same command share the pieces: one that
    another live process has claimed is left to it and waited for; one whose process stopped is made
    here."""
    pending = list(names)
    while pending:
        for name in list(pending):
            path, claim = work / f"{name}.npz", work / f"{name}.claim"
            if not path.exists() and _claim(claim):
                if not path.exists():  # unless made between the look and the claim
                    started = time.perf_counter()
                    arrays = compute(name)
                    _write_npz(path, seconds=time.perf_counter() - started, **arrays)
                claim.unlink()
            if path.exists():
                pending.remove(name)
        if pending:
            time.sleep(10)


def _read(work: Path, name: str) -> dict[str, np.ndarray]:
    with np.load(work / f"{name}.npz", allow_pickle=False) as stored:
        return dict(stored)


def _mr_hydra_in_pieces(
    data: ScaleData, index: np.ndarray, seed: int, splits: Sequence[str], work: Path
) -> tuple[float, dict[str, float], dict[tuple[str, str], np.ndarray]]:
    """aeon's MultiRocketHydraClassifier, its model exactly (the same predictions; n_jobs: the row's
    threads), with its transforms' work kept in `work`: the two transforms fitted on the n training
    series as aeon fits them, the training series transformed MR_HYDRA_PIECE at a time and the held-out
    sets one at a time, each piece kept with its seconds, so that a fit stopped part way (hours at
    n = 10,000 clips of 4,000 steps) continues at its next piece and several processes can share one fit.
    Then aeon's scalers and ridge on the whole, once. Returns the fit seconds (the transforms' pieces
    summed, whenever and wherever they ran, as one process would spend them), each split's predict
    seconds and the predictions on each (split, condition), "" the split itself."""
    import torch
    from aeon.classification.convolution_based import MultiRocketHydraClassifier
    from aeon.classification.convolution_based._mr_hydra import _SparseScaler
    from aeon.transformations.collection.convolution_based import HydraTransformer, MultiRocket
    from sklearn.linear_model import RidgeClassifierCV
    from sklearn.preprocessing import StandardScaler

    from .classify import _hydra_in_batches, _threads

    work.mkdir(parents=True, exist_ok=True)
    X_train, y = data.X_pool[index], data.y_pool[index]
    _mark_training_series(work, X_train, y)
    _hydra_in_batches()
    model = MultiRocketHydraClassifier(random_state=seed, n_jobs=_threads())
    started = time.perf_counter()
    hydra = HydraTransformer(
        n_kernels=model.n_kernels, n_groups=model.n_groups, n_jobs=model.n_jobs, random_state=seed
    ).fit(X_train)
    multirocket = MultiRocket(n_jobs=model.n_jobs, random_state=seed).fit(X_train)
    transforms_fitted = time.perf_counter() - started

    inputs = {f"train-{start}": X_train[start : start + MR_HYDRA_PIECE] for start in range(0, len(y), MR_HYDRA_PIECE)}
    held_out = {}
    for split in splits:
        held_out[split, ""] = f"held-out-{split}"
        inputs[f"held-out-{split}"] = data.splits[split].X
        for condition, (X, _, rate) in data.splits[split].conditions.items():
            held_out[split, condition] = f"held-out-{split}-{condition}"
            inputs[f"held-out-{split}-{condition}"] = _at_training_rate(X, rate, data.rate)

    def transformed(name: str) -> dict[str, np.ndarray]:
        return {"hydra": np.asarray(hydra.transform(inputs[name])), "multirocket": multirocket.transform(inputs[name])}

    _shared(work, list(inputs), transformed)

    def fit_and_predict(_name: str) -> dict[str, np.ndarray]:
        pieces = [_read(work, name) for name in inputs if name.startswith("train-")]
        transformed_seconds = sum(float(piece["seconds"]) for piece in pieces)
        started = time.perf_counter()
        scale_hydra, scale_multirocket = _SparseScaler(), StandardScaler()
        scale_hydra.fit(torch.from_numpy(np.concatenate([piece["hydra"] for piece in pieces])))
        scale_multirocket.fit(np.concatenate([piece["multirocket"] for piece in pieces]))

        def scaled(features: dict[str, np.ndarray]) -> np.ndarray:
            hydra_part = scale_hydra.transform(torch.from_numpy(features["hydra"])).numpy()
            return np.concatenate((hydra_part, scale_multirocket.transform(features["multirocket"])), axis=1)

        train = np.concatenate([scaled(pieces.pop(0)) for _ in range(len(pieces))])  # the raw pieces freed as scaled
        ridge = RidgeClassifierCV(alphas=np.logspace(-3, 3, 10), class_weight=model.class_weight).fit(train, y)
        del train
        out = {"fit_seconds": np.float64(transformed_seconds + time.perf_counter() - started)}
        for (split, condition), name in held_out.items():
            piece = _read(work, name)
            started = time.perf_counter()
            out[f"predicted-{name}"] = ridge.predict(scaled(piece))
            out[f"predict_seconds-{name}"] = np.float64(float(piece["seconds"]) + time.perf_counter() - started)
        return out

    model_name = "model-" + "-".join(splits)
    _shared(work, [model_name], fit_and_predict)
    fitted = _read(work, model_name)
    predictions = {key: fitted[f"predicted-{name}"] for key, name in held_out.items()}
    predict_seconds = {split: float(fitted[f"predict_seconds-{held_out[split, '']}"]) for split in splits}
    return transforms_fitted + float(fitted["fit_seconds"]), predict_seconds, predictions


def _claim(path: Path) -> bool:
    """True if this process may do the work `path` stands for: no claim, or the claim of a process
    that no longer runs (then taken over); the claim holds this process's id."""
    try:
        owner = int(path.read_text() or 0)
    except (FileNotFoundError, ValueError):
        owner = None
    if owner is not None and owner != os.getpid():
        try:
            os.kill(owner, 0)
            return False  # alive
        except ProcessLookupError:
            path.unlink(missing_ok=True)
        except PermissionError:
            return False
    try:
        with open(path, "x") as f:
            f.write(str(os.getpid()))
        return True
    except FileExistsError:
        return path.read_text() == str(os.getpid())


def run_row(
    task: str,
    kind: str,
    data: ScaleData,
    n: int,
    seed: int,
    overrides: dict | None = None,
    name: str | None = None,
    splits: Sequence[str] = ("test",),
    work_dir: str | Path | None = None,
    unpadded: bool | None = None,
) -> list[dict]:
    """Fit one model on n training series and score it on each of `splits`: the rows written to the
    results file, one a split, all of the one fit (their fit seconds are that fit's). overrides:
    parameters of the ssm row that replace its preset's (recorded in the rows); name: the rows' task
    (default: task, whose preset the network takes). work_dir: where the quant rows keep their
    transformed series and trees' votes chunk by chunk (_quant_in_chunks), to continue a stopped fit
    (there the forest is grown once a split). unpadded: whether the network reads padded series
    (data.padded) at their own lengths (`own_lengths`), as a list of unequal series (None: as the preset
    says); the others keep the padding."""
    import torch

    from .classify import make_model

    base = POOL_SIZES.get(task, len(data.y_pool))
    index = subset(data.y_pool[: base if n <= base else len(data.y_pool)], n, seed)
    params = dict(PRESETS[task].params_for(n), **(overrides or {})) if kind == "ssm" else {}
    if kind == "features" and data.rate is not None:
        params["sample_rate"] = data.rate
    reads_padding = kind == "ssm" and data.padded
    unpadded = reads_padding and (PRESETS[task].own_lengths if unpadded is None else unpadded)
    series = own_lengths if unpadded else (lambda X: X)
    load_before = _load_average()
    model, fit_seconds = None, None
    if kind == "mr-hydra" and work_dir is not None:
        work = Path(work_dir) / f"mr-hydra-{name or task}-{n}-{seed}"
        fit_seconds, pieces_predict_seconds, pieces_predicted = _mr_hydra_in_pieces(data, index, seed, splits, work)
    elif not (kind == "quant" and work_dir is not None):
        model = make_model(kind, False, params, seed)
        started = time.perf_counter()
        model.fit(series(data.X_pool[index]), data.y_pool[index])
        fit_seconds = time.perf_counter() - started
    rows = []
    for split in splits:
        held_out = data.splits[split]
        if kind == "mr-hydra" and model is None:
            predict_seconds = pieces_predict_seconds[split]
            predict = lambda X, condition=None, split=split: pieces_predicted[split, condition or ""]  # noqa: E731
        elif model is None:
            work = Path(work_dir) / f"quant-{name or task}-{n}-{seed}-{split}"
            fit_seconds, predict_seconds, predicted = _quant_in_chunks(data, index, seed, split, work)
            predict = lambda X, condition=None: predicted[condition or ""]  # noqa: E731
        else:
            started = time.perf_counter()
            held_out_predictions = _predict_at(model, kind, series(held_out.X), None, data.rate)
            predict_seconds = time.perf_counter() - started
            predict = lambda X, condition=None, first=held_out_predictions, held_out=held_out: (  # noqa: E731
                first
                if condition is None
                else _predict_at(model, kind, series(X), held_out.conditions[condition][2], data.rate)
            )
        row = dict(
            task=name or task,
            model=kind,
            n=int(n),
            seed=int(seed),
            split=split,
            accuracy=float(np.mean(predict(held_out.X) == held_out.y)),
            fit_seconds=round(fit_seconds, 2),
            predict_seconds=round(predict_seconds, 2),
            n_test=int(len(held_out.y)),
            threads=torch.get_num_threads(),
            load_before=load_before,
            load_after=_load_average(),
        )
        for condition, (X, y, rate) in held_out.conditions.items():
            row[f"{split}_{condition}"] = float(np.mean(predict(X, condition) == y))
        if kind == "ssm":
            row["params"] = params
        if reads_padding:
            row["own_lengths"] = unpadded
        if kind == "quant" and model is None:
            row["tree_chunks"] = QUANT_CHUNKS
        rows.append(row)
    return rows


def read_rows(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise ValueError(f"{path}, line {number}: not a JSON row ({error}); remove or fix that line") from error
    return rows


def _split(row: dict) -> str:
    return row.get("split", "test")  # rows written before validation runs existed are test rows


def _key(row: dict) -> tuple:
    return row["task"], row["model"], row["n"], row["seed"], _split(row)


def _refuse_other_network_settings(
    parser, existing: list[dict], task: str, params_for: Callable[[int], dict], out: str
) -> None:
    """One file, one network per task: a row of other settings would count as done for this run (which
    would then fit nothing) and the report would average the two. params_for(n): this run's settings for
    a row of n training series."""
    for row in existing:
        if row["task"] != task or row["model"] != "ssm" or "params" not in row:
            continue
        wanted = json.loads(json.dumps(params_for(row["n"])))  # as a row keeps them (tuples become lists)
        if row["params"] != wanted:
            differences = "; ".join(
                f"{key}: {row['params'].get(key)!r} there, {wanted.get(key)!r} now"
                for key in sorted(set(row["params"]) | set(wanted))
                if row["params"].get(key) != wanted.get(key)
            )
            parser.error(
                f"{out} holds {task} network rows of other settings (n = {row['n']}: {differences}); write this "
                "network's rows to another --out"
            )


@functools.cache
def _classifier_defaults() -> dict:
    """SSMClassifier's default parameters, as a row keeps parameters (JSON)."""
    from ssmts.estimators import SSMClassifier

    return json.loads(json.dumps(SSMClassifier().get_params()))


def _model_of(row: dict) -> str:
    """The row's model; a network whose settings differ from its task's preset (each unset one read as
    SSMClassifier's default) is a model of its own, named by them, e.g. "ssm (bidirectional=True)", so
    that it is never averaged with the preset."""
    base = row["task"].split("-")[0]  # speech-2000hz: the speech preset at another rate
    if row["model"] != "ssm" or "params" not in row or base not in PRESETS:
        return row["model"]
    defaults = _classifier_defaults()
    preset = PRESETS[base]
    used = dict(defaults, **row["params"])
    # the rate is in the task's name (speech-2000hz)
    wanted = {**defaults, **json.loads(json.dumps(preset.params_for(row["n"]))), "sample_rate": used["sample_rate"]}
    changes = [f"{key}={used[key]}" for key in sorted(used) if used[key] != wanted.get(key)]
    own_lengths = row.get("own_lengths", False)  # rows from before the key read the padding
    if own_lengths != preset.own_lengths:
        changes.append("own lengths" if own_lengths else "padded")
    return f"ssm ({', '.join(changes)})" if changes else "ssm"


def summarize(rows: list[dict], split: str = "test") -> dict:
    """{(task, model, n): (mean accuracy, spread over seeds (max - min), seeds, mean fit seconds, and
    each further condition's mean accuracy, e.g. half_rate)} of the rows scored on `split`; a network
    of other settings than the preset's is its own model (`_model_of`)."""
    groups: dict = {}
    for row in rows:
        if _split(row) == split:
            groups.setdefault((row["task"], _model_of(row), row["n"]), []).append(row)
    out = {}
    for key, members in sorted(groups.items()):
        seeds = [m["seed"] for m in members]
        if len(set(seeds)) < len(seeds):
            # two rows of one seed (files joined by hand) would weigh that seed twice in the mean
            twice = sorted({s for s in seeds if seeds.count(s) > 1})
            raise ValueError(f"{key[0]} {key[1]} n={key[2]}: seed(s) {twice} have more than one {split} row")
        accuracy = np.array([m["accuracy"] for m in members])
        prefix = f"{split}_"
        extras = {
            name[len(prefix) :]: float(np.mean([m[name] for m in members]))
            for name in members[0]
            if name.startswith(prefix) and all(name in m for m in members)
        }
        out[key] = dict(
            accuracy=float(accuracy.mean()),
            spread=float(accuracy.max() - accuracy.min()),
            seeds=len(members),
            fit_seconds=float(np.mean([m["fit_seconds"] for m in members])),
            **extras,
        )
    return out


def _networks(summary: dict) -> list[tuple[str, str]]:
    """(task, network) of every network in `summary`: the preset's ("ssm") and any other ("ssm (...)")."""
    return sorted({(key[0], key[1]) for key in summary if key[1] == "ssm" or key[1].startswith("ssm (")})


def _crossover_name(task: str, network: str) -> str:
    return task if network == "ssm" else f"{task}, {network}"


def crossovers(summary: dict) -> dict:
    """{task: the smallest n from which the network is ahead of every training-free row measured at
    that n and at every larger n measured (None: never; absent: nothing to compare)}; a network of other
    settings than the preset's has its own entry, "task, ssm (...)"."""
    result = {}
    for task, network in _networks(summary):
        sizes = sorted({key[2] for key in summary if key[:2] == (task, network)})
        ahead = []
        for n in sizes:
            others = [summary[(task, m, n)]["accuracy"] for m in TRAINING_FREE if (task, m, n) in summary]
            if others:
                ahead.append((n, summary[(task, network, n)]["accuracy"] > max(others)))
        if not ahead:
            continue
        first = None
        for i, (n, is_ahead) in enumerate(ahead):
            if all(a for _, a in ahead[i:]):
                first = n
                break
        result[_crossover_name(task, network)] = first
    return result


def _summaries_by_seed(rows: list[dict], split: str = "test") -> dict:
    """{seed: `summarize` of that seed's rows alone}."""
    seeds = sorted({row["seed"] for row in rows if _split(row) == split})
    return {seed: summarize([row for row in rows if row["seed"] == seed], split) for seed in seeds}


def crossovers_by_seed(rows: list[dict], split: str = "test") -> dict:
    """{task: {seed: crossover n (None: never)}}: `crossovers` of each seed's rows alone, the spread
    the mean's crossover hides (a seed compares against the training-free rows of the same seed)."""
    result: dict = {}
    for seed, summary in _summaries_by_seed(rows, split).items():
        for task, n in crossovers(summary).items():
            result.setdefault(task, {})[seed] = n
    return result


def _table(summary: dict) -> list[str]:
    lines = [
        "| task | model | n | seeds | accuracy | spread | zero-shot half rate | fit s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (task, model, n), s in summary.items():
        half = f"{s['half_rate']:.3f}" if "half_rate" in s else ""
        lines.append(
            f"| {task} | {model} | {n} | {s['seeds']} | {s['accuracy']:.3f} | {s['spread']:.3f} | {half} | "
            f"{s['fit_seconds']:.1f} |"
        )
    return lines


def _unchecked(summary: dict, task: str, network: str, n: int | None) -> str:
    """The training-free rows missing at the sizes that decide crossover `n` ('' when none is)."""
    sizes = sorted({key[2] for key in summary if key[:2] == (task, network)})
    deciding = [m for m in sizes if m >= n] if n is not None else sizes[-1:]
    missing = {m: [k for k in deciding if (task, m, k) not in summary] for m in TRAINING_FREE}
    return "; ".join(f"{m} at n = {', '.join(map(str, ks))}" for m, ks in missing.items() if ks)


def format_report(rows: list[dict]) -> str:
    """The test rows' table and crossovers (of the seeds' means, then of each seed alone); then the
    validation rows' table, if any."""
    summary = summarize(rows)
    lines = ["Test splits:", "", *_table(summary), ""]
    by_seed = {seed: (s, crossovers(s)) for seed, s in _summaries_by_seed(rows).items()}
    found = crossovers(summary)
    for task, network in _networks(summary):
        name = _crossover_name(task, network)
        if name not in found:
            continue
        n = found[name]
        caveat = _unchecked(summary, task, network, n)
        seeds = []
        for seed, (seed_summary, seed_crossovers) in by_seed.items():
            if name not in seed_crossovers:
                continue
            m = seed_crossovers[name]
            seed_caveat = _unchecked(seed_summary, task, network, m)
            seeds.append(
                f"seed {seed} {'from n = ' + str(m) if m is not None else 'never'}"
                + (f" (not measured there: {seed_caveat})" if seed_caveat else "")
            )
        lines.append(
            (
                f"{name}: the network is ahead of every training-free row measured from n = {n} on (among the sizes "
                "measured)"
                if n is not None
                else f"{name}: no crossover: the network is not ahead of every training-free row at the largest size"
            )
            + (f"; not measured there: {caveat}" if caveat else "")
            + "; each seed alone: "
            + ", ".join(seeds)
        )
    validation = summarize(rows, "validation")
    if validation:
        lines += ["", "Validation splits (what the presets are chosen on):", "", *_table(validation)]
    return "\n".join(lines)


def plot(rows: list[dict], path: str | Path) -> None:
    """Accuracy against n (log axis), one panel a task, one line a model, seeds' range as bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarize(rows)
    tasks = sorted({key[0] for key in summary})
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.5 * len(tasks), 3.6), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        variants = sorted({m for (t, m, _) in summary if t == task and m.startswith("ssm (")})
        for model in [*MODELS, *variants]:
            points = sorted((n, s) for (t, m, n), s in summary.items() if t == task and m == model)
            if not points:
                continue
            ns = [n for n, _ in points]
            acc = [s["accuracy"] for _, s in points]
            half = [s["spread"] / 2 for _, s in points]
            # one colour a model in every panel (a panel without some model must not shift the others')
            if model in MODELS:
                style = dict(lw=2.4, color="black") if model == "ssm" else dict(lw=1.2, color=f"C{MODELS.index(model)}")
            else:  # a network of other settings than the preset's
                style = dict(lw=1.6, color="black", ls=":", alpha=0.5 + 0.5 / (1 + variants.index(model)))
            ax.errorbar(ns, acc, yerr=half, marker="o", ms=4, capsize=2, label=model, **style)
            if model == "ssm" and all("half_rate" in s for _, s in points):
                ax.plot(
                    ns,
                    [s["half_rate"] for _, s in points],
                    ls="--",
                    color="black",
                    lw=1.2,
                    label="ssm, zero-shot half rate",
                )
        ax.set_xscale("log")
        ax.set_xlabel("training series n")
        ax.set_title(task)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("test accuracy")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ssmts.bench scale", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=["speech", "listops", "pathfinder"], choices=sorted(PRESETS))
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--sizes", nargs="+", type=int, default=list(SIZES), help="training series n")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument(
        "--out", default="scale.jsonl", help="JSON-lines results file, appended to (default %(default)s)"
    )
    parser.add_argument("--speech-dir", default=None, help="spoken-commands directory (Speech Commands layout)")
    parser.add_argument(
        "--speech-rate", type=int, default=SPEECH_RATE, help="the speech task's sample rate in Hz (default %(default)s)"
    )
    parser.add_argument("--listops-length", type=int, default=1000, help="longest ListOps expression (tokens)")
    parser.add_argument("--test-size", type=int, default=2000, help="test series of the generated tasks")
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="where the generated Pathfinder images are kept (uint8 .npz), read back by later runs (default: "
        "drawn again by every run, ~0.06 s an image)",
    )
    parser.add_argument(
        "--work-dir",
        default=None,
        help="where the quant rows keep their transformed series and their trees' votes, 25 trees at a time, "
        "and the mr-hydra rows their transformed series, 500 at a time, so that a stopped fit (hours at "
        "n = 10,000) continues where it stopped; several processes running one command share the pieces",
    )
    parser.add_argument(
        "--params", default="{}", help="JSON of parameters of the ssm row that replace its preset's (kept in the rows)"
    )
    parser.add_argument(
        "--padded",
        action="store_true",
        help="the network reads the ListOps expressions padded to --listops-length, as its preset did before "
        '2026-11-29, instead of at their own lengths (the rows say "own_lengths": false; like --params, give '
        "such rows their own --out)",
    )
    parser.add_argument("--threads", type=int, default=None, help="torch's and the baselines' threads (default: all)")
    parser.add_argument(
        "--splits",
        nargs="+",
        default=None,
        choices=("validation", "test"),
        help="the held-out splits each fit is scored on, a row each (default: test)",
    )
    parser.add_argument(
        "--validation",
        action="store_true",
        help="score on the validation split (what presets are chosen on) instead of the test split: --splits "
        "validation",
    )
    parser.add_argument("--report", action="store_true", help="print the table of --out and exit")
    parser.add_argument("--plot", default=None, metavar="PATH", help="draw the curves of --out to PATH and exit")
    args = parser.parse_args(argv)

    if args.report or args.plot:
        rows = read_rows(args.out)
        if not rows:
            parser.error(f"{args.out} holds no rows yet")
        if args.report:
            print(format_report(rows))
        if args.plot:
            plot(rows, args.plot)
            print(f"wrote {args.plot}")
        return 0
    if not 100 <= args.speech_rate <= 16000:
        parser.error(f"--speech-rate must be between 100 and 16000 Hz (the clips' rate), got {args.speech_rate}")
    if any(n < 10 for n in args.sizes):
        parser.error("--sizes must be at least 10 (one series a class)")
    if "speech" in args.tasks and args.speech_dir is None:
        parser.error(
            "the speech task reads a spoken-commands directory: give --speech-dir (an empty one is filled "
            "with synthesized clips), or leave speech out of --tasks"
        )
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")  # see ssmts.bench.classify
    import torch

    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be an integer >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    try:
        overrides = json.loads(args.params)
    except json.JSONDecodeError as error:
        parser.error(f"--params is not valid JSON: {error}")
    if not isinstance(overrides, dict):
        parser.error(f"--params must be a JSON object of parameters, got {args.params!r}")
    if args.padded and ("listops" not in args.tasks or "ssm" not in args.models):
        parser.error("--padded applies to the network's rows (ssm) on ListOps: add listops to --tasks, ssm to --models")
    unpadded = False if args.padded else None  # None: as the preset says
    existing = read_rows(args.out)
    done = {_key(row) for row in existing}
    # One file, one input of the ListOps network: a row read the other way would count as done, and the
    # report would average the two. Rows from before the key was written read the padding.
    own = PRESETS["listops"].own_lengths if unpadded is None else unpadded
    other_input = [
        row
        for row in existing
        if row["task"] == "listops" and row["model"] == "ssm" and row.get("own_lengths", False) != own
    ]
    if other_input and "listops" in args.tasks and "ssm" in args.models:
        parser.error(
            f"{args.out} holds ListOps network rows read {'padded' if own else 'at their own lengths'} "
            f"({len(other_input)}); write rows read {'at their own lengths' if own else 'padded'} to another --out"
        )
    loaders: dict[str, Callable[[int], ScaleData]] = {
        "speech": lambda n: load_speech(args.speech_dir, n, args.speech_rate),
        "listops": lambda n: load_listops(n, args.listops_length, args.test_size),
        "pathfinder": lambda n: load_pathfinder(n, args.test_size, cache_dir=args.cache_dir),
    }
    n_max = max(args.sizes)
    if args.validation and args.splits is not None:
        parser.error("give --splits or --validation, not both (--validation is --splits validation)")
    splits = list(dict.fromkeys(args.splits or (["validation"] if args.validation else ["test"])))
    # the rows' task name and the network's settings that replace its preset's (at another speech rate:
    # its Delta set for that rate)
    names = {task: speech_task(args.speech_rate) if task == "speech" else task for task in args.tasks}
    task_overrides = {
        task: dict({"sample_rate": args.speech_rate} if names[task] != task else {}, **overrides) for task in args.tasks
    }
    if "ssm" in args.models:  # before any fit: a refusal after hours of fitting would waste them
        for task in args.tasks:
            network = lambda n, task=task: dict(PRESETS[task].params_for(n), **task_overrides[task])  # noqa: E731
            _refuse_other_network_settings(parser, existing, names[task], network, args.out)
    for task in args.tasks:
        name = names[task]
        todo = [
            (m, n, s)
            for n in sorted(args.sizes)
            for s in args.seeds
            for m in args.models
            if any((name, m, n, s, split) not in done for split in splits)
        ]
        if not todo:
            continue
        pool = max(n_max, POOL_SIZES.get(task, 0))
        print(f"{task}: loading (pool of up to {pool} training series)", flush=True)
        data = loaders[task](pool)
        sizes = [n for n in sorted(args.sizes) if n <= len(data.y_pool)]
        if len(sizes) < len(args.sizes):
            print(f"{task}: the pool has {len(data.y_pool)} training series; sizes above it are skipped", flush=True)
        for model, n, seed in todo:
            if n not in sizes:
                continue
            wanted = [split for split in splits if (name, model, n, seed, split) not in done]
            one_fit = run_row(task, model, data, n, seed, task_overrides[task], name, wanted, args.work_dir, unpadded)
            for row in one_fit:
                if _key(row) in {_key(r) for r in read_rows(args.out)}:
                    # another command wrote it meanwhile: one row a key, but this fit is not thrown away unseen
                    print(f"not written, {args.out} already has this row (another command wrote it): {json.dumps(row)}")
                    continue
                with open(args.out, "a") as f:
                    f.write(json.dumps(row) + "\n")
                half = f"{row['split']}_half_rate"
                extra = f", half rate {row[half]:.3f}" if half in row else ""
                print(
                    f"{name} {model} n={n} seed={seed} ({row['split']}): accuracy {row['accuracy']:.3f}{extra}, "
                    f"fit {row['fit_seconds']:.1f} s ({row['threads']} threads, load {row['load_before']})",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
