"""ListOps and Pathfinder generators: labels checked independently, output read by the loaders."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest
from scipy import ndimage

from ssmts.data.listops_synth import (
    evaluate_tree,
    generate_listops,
    generate_tree,
    make_listops_task,
    tree_to_string,
    write_listops,
)
from ssmts.data.lra import load_lra_listops, load_lra_pathfinder, tokenize_listops
from ssmts.data.pathfinder_synth import (
    PathfinderStyle,
    generate_pathfinder,
    make_pathfinder_task,
    render_sample,
    write_pathfinder,
)

# ---------------------------------------------------------------------------- ListOps

SMALL = dict(min_length=10, max_length=80, max_depth=10, max_args=10)


def evaluate_tokens(tokens):
    """Independent evaluator on the loader's token list (brackets dropped, "]" -> "X")."""

    def parse(position):
        token = tokens[position]
        if token.isdigit():
            return int(token), position + 1
        operator, values, position = token, [], position + 1
        while tokens[position] != "X":
            value, position = parse(position)
            values.append(value)
        values.sort()
        if operator == "[MIN":
            result = values[0]
        elif operator == "[MAX":
            result = values[-1]
        elif operator == "[MED":
            result = int(np.median(values))
        elif operator == "[SM":
            result = sum(values) % 10
        else:
            raise AssertionError(f"unexpected operator {operator}")
        return result, position + 1

    value, end = parse(0)
    assert end == len(tokens), "trailing tokens"
    return value


@pytest.fixture(scope="module")
def listops_splits():
    return generate_listops(300, 30, 30, random_state=0, **SMALL)


def test_listops_serialization_is_lra_left_nested():
    assert tree_to_string(("[MAX", [2, 9])) == "( ( ( [MAX 2 ) 9 ) ] )"
    nested = ("[SM", [("[MIN", [7, 3]), 8])
    assert tree_to_string(nested) == "( ( ( [SM ( ( ( [MIN 7 ) 3 ) ] ) ) 8 ) ] )"
    assert evaluate_tree(nested) == 1
    assert evaluate_tree(("[MED", [1, 2])) == 1 and evaluate_tree(("[MED", [1, 4, 9, 9])) == 6


def test_listops_lengths_labels_uniqueness(listops_splits):
    rows = [row for split in listops_splits.values() for row in split]
    assert [len(s) for s in listops_splits.values()] == [300, 30, 30]
    assert len({source for source, _ in rows}) == len(rows)  # no duplicates, across splits too
    for source, value in rows:
        tokens = tokenize_listops(source)
        assert SMALL["min_length"] < len(tokens) < SMALL["max_length"]
        assert evaluate_tokens(tokens) == value
        assert source.count("(") == source.count(")")
    counts = Counter(value for _, value in rows)
    assert set(counts) == set(range(10))
    assert max(counts.values()) < 0.5 * len(rows)


def test_listops_operator_probability_and_depth():
    rng = random.Random(1)
    trees = [generate_tree(rng, 1, 10, 10)[0] for _ in range(2000)]
    leaf_share = np.mean([isinstance(t, int) for t in trees])
    assert abs(leaf_share - 0.75) < 0.04  # LRA: a digit unless random() <= VALUE_P = 0.25

    def depth(tree):
        return 1 if isinstance(tree, int) else 1 + max(depth(a) for a in tree[1])

    deep = [generate_tree(random.Random(seed), 1, 3, 4)[0] for seed in range(300)]
    assert max(depth(t) for t in deep) == 3  # digits are forced at max_depth
    assert all(2 <= len(t[1]) <= 4 for t in deep if not isinstance(t, int))


def test_listops_seeded_and_round_trips_through_loader(tmp_path, listops_splits):
    # Generation order is kept, so the first 20 examples of a seed never change.
    assert generate_listops(20, 0, 0, random_state=0, **SMALL)["train"] == listops_splits["train"][:20]
    assert generate_listops(20, 0, 0, random_state=1, **SMALL)["train"] != listops_splits["train"][:20]
    write_listops(listops_splits, tmp_path / "listops-1000")
    header = (tmp_path / "listops-1000" / "basic_train.tsv").read_text().splitlines()[0]
    assert header == "Source\tTarget"
    loaded = load_lra_listops(tmp_path, max_length=80)
    direct = make_listops_task(300, 30, 30, random_state=0, pad_to=80, **SMALL)
    for a, b in ((loaded.train, direct.train), (loaded.val, direct.val), (loaded.test, direct.test)):
        assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
        assert np.array_equal(a.lengths, b.lengths)
    assert direct.vocab_size == 16 and direct.train.X.dtype == np.int64


def test_listops_rejects_bad_ranges():
    with pytest.raises(ValueError, match="min_length"):
        generate_listops(1, 1, 1, min_length=50, max_length=40)
    with pytest.raises(RuntimeError, match="widen the range"):
        generate_listops(5, 0, 0, min_length=2, max_length=4, max_tries=200)


# ---------------------------------------------------------------------------- Pathfinder

STYLE = PathfinderStyle()
N_IMAGES = 24


@pytest.fixture(scope="module")
def samples():
    return generate_pathfinder(N_IMAGES, STYLE, random_state=0)


def test_pathfinder_labels_balanced_and_images_valid(samples):
    labels = [s.label for s in samples]
    assert labels.count(1) == labels.count(0) == N_IMAGES // 2
    assert labels != sorted(labels)  # shuffled, not one class then the other
    for sample in samples:
        assert sample.image.shape == (32, 32) and sample.image.dtype == np.uint8
        assert len(sample.paths) == 2 + STYLE.n_distractors
        assert [len(p) for p in sample.paths[:2]] == [STYLE.contour_length] * 2
        ends = [tuple(sample.paths[k][0, 0]) for k in sample.marker_paths] + [
            tuple(sample.paths[k][-1, 1]) for k in sample.marker_paths
        ]
        assert all(tuple(m) in ends for m in sample.markers)  # markers sit on path ends
        assert (sample.marker_paths[0] == sample.marker_paths[1]) == (sample.label == 1)


def test_pathfinder_markers_connected_iff_label_when_gaps_are_filled(samples):
    """Redraw every path as a solid line; the markers must share a blob exactly for label 1."""
    scale = STYLE.supersample
    for sample in samples:
        solid = render_sample(sample, STYLE, dashed=False, supersampled=True) > 0
        blobs, n_blobs = ndimage.label(solid, structure=np.ones((3, 3)))
        assert n_blobs == len(sample.paths)  # no two paths touch, even diagonally
        at = [blobs[int(y * scale), int(x * scale)] for x, y in sample.markers]
        assert min(at) > 0
        assert (at[0] == at[1]) == (sample.label == 1)


def test_pathfinder_image_is_the_dashed_bookkeeping(samples):
    """Every lit pixel of the image lies on a redrawn path or marker, and the dashes have gaps."""
    for sample in samples:
        assert np.array_equal(render_sample(sample, STYLE), sample.image)
        solid = ndimage.binary_dilation(render_sample(sample, STYLE, dashed=False) > 0)
        assert not (sample.image > 0)[~solid].any()
        dashed = render_sample(sample, STYLE, supersampled=True) > 0
        filled = render_sample(sample, STYLE, dashed=False, supersampled=True) > 0
        assert dashed.sum() < 0.9 * filled.sum()


def test_pathfinder_writer_is_read_by_loader(tmp_path):
    directory = write_pathfinder(tmp_path, 10, STYLE, images_per_folder=4, random_state=3)
    assert sorted(p.name for p in (directory / "metadata").iterdir()) == ["0.npy", "1.npy", "2.npy"]
    first_line = (directory / "metadata" / "0.npy").read_text().splitlines()[0].split()
    assert first_line[:2] == ["imgs/0", "sample_0.png"] and first_line[3] in ("0", "1")
    loaded = load_lra_pathfinder(tmp_path, resolution=32)
    direct = make_pathfinder_task(10, style=STYLE, random_state=3)
    for a, b in ((loaded.train, direct.train), (loaded.val, direct.val), (loaded.test, direct.test)):
        assert np.array_equal(a.X, b.X) and np.array_equal(a.y, b.y)
    assert (len(loaded.train), len(loaded.val), len(loaded.test)) == (8, 1, 1)
    X = np.concatenate([loaded.train.X, loaded.val.X, loaded.test.X])
    assert X.shape == (10, 1, 1024) and X.dtype == np.float32 and 0 <= X.min() and X.max() <= 1
    assert np.concatenate([loaded.train.y, loaded.val.y, loaded.test.y]).sum() == 5


def test_pathfinder_other_resolutions_and_impossible_styles():
    task = make_pathfinder_task(2, resolution=128, random_state=0)
    assert task.train.X.shape[1:] == (1, 128 * 128)
    assert PathfinderStyle.for_resolution(128).marker_radius == pytest.approx(3.0)
    with pytest.raises(RuntimeError, match="could not fit"):
        generate_pathfinder(1, PathfinderStyle(resolution=16, contour_length=30), random_state=0)
    with pytest.raises(ValueError, match="resolution"):
        PathfinderStyle(resolution=8)
