"""The deep networks' recipes on the development protocol of the classification defaults: what the
field found to matter for deep time-series classifiers on small data, tried on `SSMClassifier()` /
`SSMRegressor()` at their defaults.

    python scripts/deep_recipes.py export DIR        # the development sets' training splits + folds
    python scripts/deep_recipes.py run DIR OUT.jsonl [--workers N] [--device cuda] [--recipes ...]
    python scripts/deep_recipes.py table OUT.jsonl   # mean +- spread per recipe and set

`export` reads the sets as the bench does (sktime's / aeon's shipped files, sklearn's digits) and
writes them with the bench's folds (5-fold CV x 2 shufflings of the training splits, seeds 0 and
1), so that `run` needs only ssmts, torch and scikit-learn (a GPU machine without sktime).

Recipes (each a fit per fold; the model seed is 0 unless the recipe name says otherwise):
  base         the estimator at its defaults
  base-s1/-s2  the same with random_state 1 / 2; "ensemble3" in the table averages the class
               probabilities (the predictions, for regression) of base, base-s1 and base-s2, as
               InceptionTime ensembles its networks
  slice-jitter window slicing (a random 90 % window of each series stretched back to its length,
               on half the series of a batch) and jitter (Gaussian noise of 0.03 of the scaled
               series), training batches only
  mixup        mixup (Beta(0.2, 0.2) weights, the loss mixed as the inputs are), classification only
  multires     average pooling by 2 in time after every block but the last (as SaShiMi's
               multi-resolution backbone; the sequence is 8x shorter in the last of 4 blocks)

The augmentations and the pooling are prototypes written here, around the estimators, not options
of the library: the library keeps a recipe only if it wins on this protocol.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time

import numpy as np

from ssmts.bench.classify import CLASSIFICATION_SETS as CLASSIFICATION  # the bench's development sets
from ssmts.bench.classify import REGRESSION_SETS as REGRESSION

RECIPES = ("base", "base-s1", "base-s2", "slice-jitter", "mixup", "multires")
FOLDS, REPEATS = 5, 2


# ------------------------------------------------------------------ export
def export(directory: str) -> None:
    from ssmts.bench.classify import cv_splits, load_classification, load_regression

    os.makedirs(directory, exist_ok=True)
    for regression, names in ((False, CLASSIFICATION), (True, REGRESSION)):
        for name in names:
            X, y = (load_regression if regression else load_classification)(name)[:2]
            lengths = np.array([x.shape[-1] for x in X])
            padded = np.zeros((len(X), X[0].shape[0], lengths.max()))
            for i, x in enumerate(X):
                padded[i, :, : x.shape[-1]] = x
            folds = cv_splits(X, np.asarray(y), FOLDS, regression, REPEATS, 0)
            np.savez_compressed(
                os.path.join(directory, f"{name}.npz"),
                X=padded,
                lengths=lengths,
                ragged=not isinstance(X, np.ndarray),
                y=np.asarray(y),
                regression=regression,
                fit=np.array([f for f, _ in folds], dtype=object),
                held=np.array([h for _, h in folds], dtype=object),
            )
            print(name, padded.shape, "ragged" if not isinstance(X, np.ndarray) else "")


def load(directory: str, name: str):
    data = np.load(os.path.join(directory, f"{name}.npz"), allow_pickle=True)  # our own export, above
    X, lengths = data["X"], data["lengths"]
    if bool(data["ragged"]):
        X = [X[i, :, :n] for i, n in enumerate(lengths)]
    folds = [(np.asarray(f, dtype=np.int64), np.asarray(h, dtype=np.int64)) for f, h in zip(data["fit"], data["held"])]
    return X, data["y"], bool(data["regression"]), folds


# ------------------------------------------------------------------ recipes
_MIXUP = {}  # the current training batch's mixup weights and partner rows, read by the loss


def _augmented_class(recipe: str):
    import torch
    from torch import nn

    class Augmented(nn.Module):
        """A head whose training batches are augmented (identity in eval mode)."""

        def __init__(self, head):
            super().__init__()
            self.head = head

        @property
        def backbone(self):
            return self.head.backbone

        def forward(self, x, mask=None):
            _MIXUP.clear()
            if not self.training:
                return self.head(x, mask)
            b, _, L = x.shape
            n = torch.full((b,), L, device=x.device) if mask is None else mask.sum(-1).long()
            if recipe == "slice-jitter":
                x = _slice(x, n)
                real = torch.ones(b, 1, L, device=x.device) if mask is None else mask[:, None, :].to(x.dtype)
                x = x + 0.03 * torch.randn_like(x) * real
            elif recipe == "mixup":
                lam = torch.distributions.Beta(0.2, 0.2).sample((b,)).to(x.device)
                perm = torch.randperm(b, device=x.device)
                x = lam[:, None, None] * x + (1 - lam[:, None, None]) * x[perm]
                mask = None if mask is None else torch.maximum(mask, mask[perm])
                _MIXUP.update(lam=lam, perm=perm)
            return self.head(x, mask)

    return Augmented


def _slice(x, n):
    """On half the rows, a random window of 90 % of each series' n real steps, stretched back to n."""
    import torch

    b, _, L = x.shape
    t = torch.arange(L, device=x.device, dtype=x.dtype)[None, :]
    span = 0.9 * (n.to(x.dtype) - 1)
    start = torch.rand(b, device=x.device, dtype=x.dtype) * (n.to(x.dtype) - 1 - span)
    pos = start[:, None] + t * 0.9
    pos = torch.minimum(pos, (n.to(x.dtype) - 1)[:, None]).clamp_min(0)
    left = pos.floor().long()
    right = (left + 1).clamp_max((n - 1)[:, None])
    w = (pos - left)[:, None, :]
    gathered = (1 - w) * x.gather(2, left[:, None, :].expand_as(x)) + w * x.gather(2, right[:, None, :].expand_as(x))
    real = t < n[:, None]
    chosen = (torch.rand(b, device=x.device) < 0.5)[:, None] & real
    return torch.where(chosen[:, None, :], gathered, x)


def _mixup_cross_entropy(class_weight=None, label_smoothing=0.0):
    """The library's cross-entropy, mixed as the batch's inputs were (plain where it was not mixed)."""
    import torch.nn.functional as F

    from ssmts.training.objectives import weighted_cross_entropy

    plain = weighted_cross_entropy(class_weight, label_smoothing)

    def loss(logits, y, sample_weight=None):
        if "lam" not in _MIXUP or len(_MIXUP["lam"]) != len(y) or class_weight is not None or sample_weight is not None:
            return plain(logits, y, sample_weight)
        lam, perm = _MIXUP["lam"], _MIXUP["perm"]
        a = F.cross_entropy(logits, y, reduction="none", label_smoothing=label_smoothing)
        b = F.cross_entropy(logits, y[perm], reduction="none", label_smoothing=label_smoothing)
        return (lam * a + (1 - lam) * b).mean()

    return loss


def _multires_classes():
    import torch.nn.functional as F

    from ssmts.nn.backbone import SSMBackbone
    from ssmts.nn.functional import pool
    from ssmts.nn.heads import SequenceHead

    class MultiResBackbone(SSMBackbone):
        """SSMBackbone with average pooling by 2 in time after every block but the last."""

        def features_and_mask(self, u, mask=None):
            x = self._encode_input(u)
            if mask is not None:
                x = x * mask[:, None, :].to(x.dtype)
            for index, block in enumerate(self.blocks):
                x = block(x, mask, None)
                if index < len(self.blocks) - 1 and x.shape[-1] > 1:
                    if mask is None:
                        x = F.avg_pool1d(x, 2, ceil_mode=True)
                    else:
                        m = mask[:, None, :].to(x.dtype)
                        count = F.avg_pool1d(m, 2, ceil_mode=True)
                        x = F.avg_pool1d(x * m, 2, ceil_mode=True) / count.clamp_min(1e-6)
                        mask = (count[:, 0] > 0).to(mask.dtype)
            return self.final_norm(x, mask), mask

        def features(self, u, mask=None, dt=None):
            return self.features_and_mask(u, mask)[0]

    class MultiResHead(SequenceHead):
        def embed(self, x, mask=None, pooling=None):
            z, mask = self.backbone.features_and_mask(x, mask)
            return pool(z, mask, pooling or self.pooling)

    return MultiResBackbone, MultiResHead


def make_estimator(recipe: str, regression: bool, device: str):
    from ssmts.estimators import SSMClassifier, SSMRegressor, classification
    from ssmts.nn.heads import SequenceHead
    from ssmts.training.objectives import weighted_cross_entropy

    _MIXUP.clear()
    # The loss the classifier builds at fit: mixed under mixup, the library's own otherwise.
    classification.weighted_cross_entropy = _mixup_cross_entropy if recipe == "mixup" else weighted_cross_entropy
    seed = {"base-s1": 1, "base-s2": 2}.get(recipe, 0)
    base = SSMRegressor if regression else SSMClassifier
    if recipe.startswith("base"):
        return base(device=device, random_state=seed)
    Augmented = _augmented_class(recipe)
    MultiResBackbone, MultiResHead = _multires_classes()

    class Recipe(base):
        def _network(self, d_input, d_output, pooling=None):
            head = super()._network(d_input, d_output, pooling)
            assert type(head) is SequenceHead
            if recipe == "multires":
                head.backbone.__class__ = MultiResBackbone
                head.__class__ = MultiResHead
                return head
            return Augmented(head)

    Recipe.__name__ = base.__name__
    return Recipe(device=device, random_state=seed)


# ------------------------------------------------------------------ run
def _job(args):
    directory, name, recipe, fold, device = args
    import torch

    torch.set_num_threads(1)
    X, y, regression, folds = load(directory, name)
    fit, held = folds[fold]
    rows = lambda index: X[index] if isinstance(X, np.ndarray) else [X[i] for i in index]  # noqa: E731
    model = make_estimator(recipe, regression, device)
    started = time.perf_counter()
    model.fit(rows(fit), y[fit])
    seconds = time.perf_counter() - started
    if regression:
        out = model.predict(rows(held))
        score = float(np.sqrt(np.mean((out - y[held]) ** 2)) / np.std(y[fit]))
    else:
        out = model.predict_proba(rows(held))
        score = float(np.mean(model.classes_[out.argmax(1)] == y[held]))
        out = {"classes": model.classes_.tolist(), "proba": out.tolist()}
    return dict(
        set=name,
        recipe=recipe,
        fold=fold,
        score=score,
        seconds=seconds,
        held=np.asarray(held).tolist(),
        output=out.tolist() if regression else out,
    )


def run(directory: str, out: str, workers: int, device: str, recipes, sets) -> None:
    done = set()
    if os.path.exists(out):
        with open(out) as f:
            done = {(r["set"], r["recipe"], r["fold"]) for r in map(json.loads, f)}
    jobs = []
    for name in sets:
        regression = name in REGRESSION
        for recipe in recipes:
            if regression and recipe == "mixup":
                continue
            jobs += [
                (directory, name, recipe, k, device) for k in range(FOLDS * REPEATS) if (name, recipe, k) not in done
            ]
    # Recipe by recipe (a run cut short leaves whole recipes), the longest sets first in each.
    priority = ("base", "slice-jitter", "multires", "mixup", "base-s1", "base-s2")
    jobs.sort(key=lambda job: (priority.index(job[2]), job[1] not in ("digits", "ACSF1")))
    print(f"{len(jobs)} fits on {workers} workers", flush=True)
    context = multiprocessing.get_context("spawn")
    with context.Pool(workers) as pool, open(out, "a") as f:
        for record in pool.imap_unordered(_job, jobs):
            f.write(json.dumps(record) + "\n")
            f.flush()
            print(
                record["set"],
                record["recipe"],
                record["fold"],
                f"{record['score']:.3f}",
                f"{record['seconds']:.1f}s",
                flush=True,
            )


# ------------------------------------------------------------------ table
def table(out: str) -> None:
    with open(out) as f:
        records = [json.loads(line) for line in f]
    by = {}
    for r in records:
        by.setdefault((r["set"], r["recipe"]), {})[r["fold"]] = r
    sets = [s for s in CLASSIFICATION + REGRESSION if any(k[0] == s for k in by)]
    recipes = [r for r in RECIPES if any(k[1] == r for k in by)] + ["ensemble"]
    sizes = {}
    for name in sets:
        regression = name in REGRESSION
        # The ensemble of the seeds whose every fold ran (at least two).
        members = [
            by[(name, r)] for r in ("base", "base-s1", "base-s2") if len(by.get((name, r), {})) == FOLDS * REPEATS
        ]
        scores = []
        for k in range(FOLDS * REPEATS) if len(members) >= 2 else ():
            rs = [m[k] for m in members]
            if regression:
                scores.append(_ensemble_rmse(name, rs[0], np.mean([r["output"] for r in rs], axis=0)))
            else:
                proba = np.mean([r["output"]["proba"] for r in rs], axis=0)
                classes = np.array(rs[0]["output"]["classes"])
                scores.append(float(np.mean(classes[proba.argmax(1)] == _held_labels(name, rs[0]))))
            sizes[name] = len(members)
        if scores:
            by[(name, "ensemble")] = {k: {"score": s, "seconds": np.nan} for k, s in enumerate(scores)}
    print("ensemble: seeds per set", sizes)
    print("| recipe | " + " | ".join(sets) + " | mean (classification) |")
    print("|---" * (len(sets) + 2) + "|")
    for recipe in recipes:
        cells, means = [], []
        for name in sets:
            rs = by.get((name, recipe), {})
            s = np.array([r["score"] for r in rs.values()])
            if len(s) == FOLDS * REPEATS:
                cells.append(f"{s.mean():.3f} ± {s.std(ddof=1):.3f}")
                if name in CLASSIFICATION:
                    means.append(s.mean())
            else:
                cells.append(f"({len(s)} folds)" if len(s) else "")
        mean = f"{np.mean(means):.3f}" if len(means) == len([s for s in sets if s in CLASSIFICATION]) else ""
        print(f"| {recipe} | " + " | ".join(cells) + f" | {mean} |")


_DATA_DIR = os.environ.get("DEEP_RECIPES_DATA", ".devdata")


def _held_labels(name, record):
    _, y, _, _ = load(_DATA_DIR, name)
    return y[np.asarray(record["held"])]


def _ensemble_rmse(name, record, pred):
    _, y, _, folds = load(_DATA_DIR, name)
    fit, held = folds[record["fold"]]
    return float(np.sqrt(np.mean((pred - y[held]) ** 2)) / np.std(y[fit]))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("export").add_argument("directory")
    r = sub.add_parser("run")
    r.add_argument("directory")
    r.add_argument("out")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--device", default="cpu")
    r.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=RECIPES)
    r.add_argument("--sets", nargs="+", default=list(CLASSIFICATION + REGRESSION))
    t = sub.add_parser("table")
    t.add_argument("out")
    args = parser.parse_args(argv)
    if args.command == "export":
        export(args.directory)
    elif args.command == "run":
        global _DATA_DIR
        _DATA_DIR = args.directory
        run(args.directory, args.out, args.workers, args.device, args.recipes, args.sets)
    else:
        table(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
