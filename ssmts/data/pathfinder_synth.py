"""Pathfinder-style generator: are the two circles on the same dashed path?

After Linsley et al. (2018) and the LRA Pathfinder / Path-X data, re-implemented with
numpy and pillow only. Every image holds

* two long paths of `contour_length` dashes (smooth random walks: each dash turns by
  at most `max_turn_degrees` from the previous one, a gap between dashes),
* `n_distractors` short paths of `distractor_length` dashes,
* two circular end markers: both on the ends of the first long path (label 1,
  "connected") or one on an end of each long path (label 0). Both classes always
  have two long paths, so counting long paths does not give the answer away.

Different paths and the markers keep at least `clearance` pixels of empty space
between their strokes, and no path runs into itself, so connectivity is decided by
the path geometry alone and the label is exact. Images are drawn at `supersample`
times the resolution and box-filtered down (anti-aliasing), white on black.

`write_pathfinder` writes the release's folder format so that
`ssmts.data.lra.load_lra_pathfinder` reads it::

    out/pathfinder<res>/curv_contour_length_<L>/imgs/<k>/sample_<n>.png
    out/pathfinder<res>/curv_contour_length_<L>/metadata/<k>.npy   (text, one line per image:
        "imgs/<k> sample_<n>.png <n> <label> <contour_length> <n_distractors> <resolution>")
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ssmts.data.base import TaskData
from ssmts.data.lra import PATHFINDER_SPLIT_SEED, pathfinder_task_from_arrays

# Retry limits. A dash with no room turns again, then the path takes back its last
# dashes, then restarts elsewhere, then the image starts over; the last raises, since
# the style then leaves too little room.
_TURN_TRIES = 12
_BACKTRACKS = 20  # times a path may take back its last _BACKTRACK_DASHES dashes
_BACKTRACK_DASHES = 3
_PATH_TRIES = 30
_IMAGE_TRIES = 50


@dataclass(frozen=True)
class PathfinderStyle:
    """Geometry of a Pathfinder image; lengths in pixels of the output image.

    The defaults are the 32x32 setting, after LRA's Pathfinder32 (14 dashes per
    contour, 2 px dashes, 1 px gaps, marker radius 1.5, 5 distractors of 4 dashes).
    max_turn_degrees (45) is our choice, not a translation of the original generator's
    "continuity": with 30 degrees most 42 px contours cannot bend away from the frame
    of a 32 px image and generation gets several times slower.
    clearance: least empty space between strokes of different paths (and markers);
    it keeps labels exact, since no two paths ever touch.
    Use `PathfinderStyle.for_resolution` for other sizes.
    """

    resolution: int = 32
    contour_length: int = 14
    distractor_length: int = 4
    n_distractors: int = 5
    dash_length: float = 2.0
    dash_gap: float = 1.0
    line_width: float = 1.0
    marker_radius: float = 1.5
    max_turn_degrees: float = 45.0
    clearance: float = 1.0
    supersample: int = 4

    def __post_init__(self) -> None:
        if self.resolution < 16:
            raise ValueError(f"resolution must be at least 16, got {self.resolution}")
        if self.contour_length < 2 or self.distractor_length < 1 or self.n_distractors < 0:
            raise ValueError("need contour_length >= 2, distractor_length >= 1, n_distractors >= 0")
        if min(self.dash_length, self.line_width, self.marker_radius) <= 0 or self.dash_gap < 0:
            raise ValueError("dash_length, line_width and marker_radius must be positive, dash_gap >= 0")
        if self.clearance < 0 or self.supersample < 1 or not 0 <= self.max_turn_degrees <= 90:
            raise ValueError("need clearance >= 0, supersample >= 1 and 0 <= max_turn_degrees <= 90")

    @classmethod
    def for_resolution(cls, resolution: int, **overrides) -> "PathfinderStyle":
        """The 32x32 style scaled to `resolution` (128 is Path-X).

        With s = resolution / 32: dashes and gaps scale by s (so a contour keeps the
        same extent relative to the image), strokes, markers and clearance by sqrt(s)
        (at 128: marker radius 3, as in LRA's Pathfinder128), and there are
        5 + round(log2 s) distractors.
        """
        scale = resolution / 32
        root = math.sqrt(scale)
        style = dict(
            resolution=resolution,
            dash_length=2.0 * scale,
            dash_gap=1.0 * scale,
            line_width=1.0 * root,
            marker_radius=1.5 * root,
            clearance=1.0 * root,
            n_distractors=5 + max(0, round(math.log2(scale))),
        )
        style.update(overrides)
        return cls(**style)


@dataclass
class PathfinderSample:
    """One generated image with its bookkeeping.

    image: (resolution, resolution) uint8, white strokes on black.
    label: 1 if both markers lie on the same path, else 0.
    paths: one (n_dashes, 2, 2) float array per path, dash start/end points as (x, y)
      pixel coordinates (pixel i covers [i, i + 1)); paths[0] and paths[1] are the two
      long contours, the rest distractors.
    markers: (2, 2) marker centres (x, y).
    marker_paths: (2,) index into `paths` of the path each marker sits on.
    """

    image: np.ndarray
    label: int
    paths: list[np.ndarray]
    markers: np.ndarray
    marker_paths: np.ndarray


def _stencil(radius: float, cell: float) -> np.ndarray:
    """(m, 2) integer cell offsets whose centres lie closer than `radius` to the centre cell."""
    reach = int(math.ceil(radius / cell))
    dy, dx = np.mgrid[-reach : reach + 1, -reach : reach + 1]
    inside = (dx**2 + dy**2) * cell**2 < radius**2
    return np.stack([dy[inside], dx[inside]], axis=1)


class _Layout:
    """Places paths and markers so that strokes of different paths never come close.

    Distances are checked on grids of `cell`-sized cells (1/8 of the centre-line
    spacing that strokes of different paths must keep): `blocked` marks every cell
    closer than that spacing to a committed path, or too close to a reserved marker;
    `occupied` marks cells holding a committed centre-line sample. Rounding to cells
    costs at most about a quarter of the clearance.
    """

    def __init__(self, style: PathfinderStyle, rng: np.random.Generator) -> None:
        self.style = style
        self.rng = rng
        self.stroke_distance = style.line_width + style.clearance  # centre line to centre line
        self.disk_distance = style.marker_radius + style.line_width / 2 + style.clearance
        self.cell = self.stroke_distance / 8
        self.size = int(math.ceil(style.resolution / self.cell)) + 1
        self.blocked = np.zeros((self.size, self.size), dtype=bool)
        self.occupied = np.zeros((self.size, self.size), dtype=bool)
        self.stroke_stencil = _stencil(self.stroke_distance, self.cell)
        self.disk_stencil = _stencil(self.disk_distance, self.cell)
        self.disks: list[np.ndarray] = []  # reserved marker centres
        self.edge = style.line_width / 2 + 0.5  # centre lines keep this far inside the frame

    def _cells(self, points: np.ndarray) -> np.ndarray:
        """(k, 2) row/column cell indices of (k, 2) x/y points."""
        return np.floor(points[:, ::-1] / self.cell).astype(np.intp)

    def _around(self, points: np.ndarray, stencil: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row and column indices of every grid cell in `stencil` around each point."""
        cells = (self._cells(points)[:, None, :] + stencil[None]).reshape(-1, 2)
        inside = ((cells >= 0) & (cells < self.size)).all(axis=1)
        return cells[inside, 0], cells[inside, 1]

    def _disk_clear(self, centre: np.ndarray) -> bool:
        r = self.style.marker_radius
        low, high = r + 1.0, self.style.resolution - r - 1.0
        if not (low <= centre[0] <= high and low <= centre[1] <= high):
            return False
        if self.occupied[self._around(centre[None], self.disk_stencil)].any():
            return False
        return all(np.hypot(*(centre - other)) >= 2 * r + self.style.clearance for other in self.disks)

    def grow(self, n_dashes: int, with_markers: bool) -> np.ndarray | None:
        """Place one path of `n_dashes` dashes; returns (n_dashes, 2, 2) or None if no room.

        The path is a random walk of dashes; when no turn within the limit lets the
        next dash fit, the last few dashes are taken back and redrawn (a dead end near
        a wall or another path is common in small images), and after too many of
        those the path starts over elsewhere.
        """
        style, rng = self.style, self.rng
        for _ in range(_PATH_TRIES):
            start = rng.uniform(self.edge, style.resolution - self.edge, size=2)
            if with_markers and not self._disk_clear(start):
                continue
            if self.blocked[tuple(self._cells(start[None]).T)].any():
                continue
            path = self._walk(start, n_dashes, with_markers)
            if path is None:
                continue
            dashes, points = path
            self.occupied[tuple(self._cells(points).T)] = True
            self.blocked[self._around(points, self.stroke_stencil)] = True
            if with_markers:
                end = dashes[-1, 1]
                self.disks += [start, end]
                # Strokes of later paths keep disk_distance from a marker centre.
                self.blocked[self._around(np.stack([start, end]), self.disk_stencil)] = True
            return dashes
        return None

    def _walk(self, start: np.ndarray, n_dashes: int, with_markers: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """Dashes (n_dashes, 2, 2) and centre-line samples (m, 2) of one path from `start`, or None."""
        style, rng = self.style, self.rng
        max_turn = math.radians(style.max_turn_degrees)
        low, high = self.edge, style.resolution - self.edge
        # Own samples closer than these arc lengths are neighbours, not collisions.
        own_skip = 2 * self.stroke_distance
        own_disk_skip = 2 * self.disk_distance
        angles: list[float] = []
        dash_starts: list[np.ndarray] = []
        points, arcs = start[None], np.zeros(1)  # this path's centre-line samples so far
        sizes = [1]  # len(points) after each dash, to take dashes back
        # Cells near this path's own samples that lie more than own_skip behind the tip;
        # the first n_stamped samples are marked (arc lengths only grow along the walk).
        own_blocked = np.zeros_like(self.blocked)
        n_stamped = 0
        backtracks = 0
        while True:
            index = len(angles)
            if index == n_dashes:
                end = dash_starts[-1] + style.dash_length * np.array([math.cos(angles[-1]), math.sin(angles[-1])])
                if not with_markers or self._end_marker_fits(start, end, points, arcs, own_disk_skip):
                    break
                placed = False  # the end marker has no room: redraw the last dashes
            else:
                position, arc = points[-1], arcs[-1]
                step = style.dash_length + (0.0 if index == n_dashes - 1 else style.dash_gap)
                n_samples = int(math.ceil(step / self.cell))
                offsets = np.linspace(step / n_samples, step, n_samples)  # ends exactly at step
                n_behind = int(np.searchsorted(arcs, arc - own_skip))
                if n_behind > n_stamped:
                    own_blocked[self._around(points[n_stamped:n_behind], self.stroke_stencil)] = True
                    n_stamped = n_behind
                # Draw every candidate turn at once and keep the first that fits.
                if angles:
                    candidates = angles[-1] + rng.uniform(-max_turn, max_turn, size=_TURN_TRIES)
                else:
                    candidates = rng.uniform(0.0, 2 * math.pi, size=_TURN_TRIES)
                directions = np.stack([np.cos(candidates), np.sin(candidates)], axis=1)
                samples = position + offsets[None, :, None] * directions[:, None, :]  # (tries, m, 2)
                fits = ((samples >= low) & (samples <= high)).all(axis=(1, 2))
                cells = np.clip(self._cells(samples.reshape(-1, 2)), 0, self.size - 1)
                # Blocked by another path, or by this path's own earlier part.
                hit = self.blocked[cells[:, 0], cells[:, 1]] | own_blocked[cells[:, 0], cells[:, 1]]
                fits &= ~hit.reshape(len(candidates), -1).any(axis=1)
                far = arc + offsets > own_disk_skip
                if with_markers and far.any() and fits.any():
                    # would run over its own start marker
                    fits &= _min_distances(samples[:, far], start[None]) >= self.disk_distance
                placed = bool(fits.any())
                if placed:
                    choice = int(np.argmax(fits))
                    angles.append(float(candidates[choice]))
                    dash_starts.append(position)
                    points = np.concatenate([points, samples[choice]])
                    arcs = np.concatenate([arcs, arc + offsets])
                    sizes.append(len(points))
            if placed:
                continue
            if backtracks == _BACKTRACKS or not angles:
                return None
            backtracks += 1
            keep = max(0, len(angles) - _BACKTRACK_DASHES)
            del angles[keep:], dash_starts[keep:], sizes[keep + 1 :]
            points, arcs = points[: sizes[-1]], arcs[: sizes[-1]]
            if n_stamped > len(points):
                own_blocked.fill(False)
                n_stamped = 0
        directions = np.stack([np.cos(angles), np.sin(angles)], axis=1)
        starts = np.asarray(dash_starts)
        return np.stack([starts, starts + style.dash_length * directions], axis=1), points

    def _end_marker_fits(
        self, start: np.ndarray, end: np.ndarray, points: np.ndarray, arcs: np.ndarray, own_disk_skip: float
    ) -> bool:
        """The end marker must clear other paths, the start marker and this path's earlier part."""
        if not self._disk_clear(end):
            return False
        if np.hypot(*(end - start)) < 2 * self.style.marker_radius + self.style.clearance:
            return False
        early = points[arcs < arcs[-1] - own_disk_skip]
        return not len(early) or _min_distance(early, end[None]) >= self.disk_distance


def _min_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest distance between a point of (k, 2) `a` and one of (m, 2) `b`."""
    return float(np.sqrt(((a[:, None, :] - b[None, :, :]) ** 2).sum(-1).min()))


def _min_distances(candidates: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(t,) smallest distance from each (k, 2) point set in (t, k, 2) `candidates` to (m, 2) `b`."""
    squared = ((candidates[:, :, None, :] - b[None, None, :, :]) ** 2).sum(-1)
    return np.sqrt(squared.min(axis=(1, 2)))


def _render(
    paths: list[np.ndarray],
    markers: np.ndarray,
    style: PathfinderStyle,
    dashed: bool = True,
    supersampled: bool = False,
) -> np.ndarray:
    """Draw paths and markers; uint8 (resolution, resolution), or the supersampled canvas.

    dashed=False draws each path's centre line through its gaps, the "dashes ignored"
    view that the label is defined on.
    """
    from PIL import Image, ImageDraw

    scale = style.supersample
    size = style.resolution * scale
    canvas = Image.new("L", (size, size), 0)
    draw = ImageDraw.Draw(canvas)
    width = max(1, int(round(style.line_width * scale)))

    def to_canvas(point: np.ndarray) -> tuple[float, float]:
        # Pixel j of the canvas covers [j, j + 1): its centre j + 0.5 is what PIL draws at j.
        return (float(point[0]) * scale - 0.5, float(point[1]) * scale - 0.5)

    for path in paths:
        if dashed:
            for start, end in path:
                draw.line([to_canvas(start), to_canvas(end)], fill=255, width=width)
        else:
            draw.line([to_canvas(p) for p in path.reshape(-1, 2)], fill=255, width=width, joint="curve")
    radius = style.marker_radius * scale
    for centre in markers:
        x, y = to_canvas(centre)
        draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=255)
    if supersampled or scale == 1:
        return np.asarray(canvas, dtype=np.uint8).copy()
    return np.asarray(canvas.resize((style.resolution, style.resolution), Image.BOX), dtype=np.uint8).copy()


def render_sample(
    sample: PathfinderSample, style: PathfinderStyle, dashed: bool = True, supersampled: bool = False
) -> np.ndarray:
    """Redraw a sample from its bookkeeping (dashed=False: gaps filled in). uint8 image."""
    return _render(sample.paths, sample.markers, style, dashed=dashed, supersampled=supersampled)


def generate_sample(label: int, style: PathfinderStyle, rng: np.random.Generator) -> PathfinderSample:
    """One Pathfinder image of the given label (1 connected, 0 not)."""
    if label not in (0, 1):
        raise ValueError(f"label must be 0 or 1, got {label}")
    for _ in range(_IMAGE_TRIES):
        layout = _Layout(style, rng)
        paths = []
        for n_dashes, with_markers in [(style.contour_length, True)] * 2 + [
            (style.distractor_length, False)
        ] * style.n_distractors:
            path = layout.grow(n_dashes, with_markers)
            if path is None:
                break
            paths.append(path)
        else:
            ends = [(path[0, 0], path[-1, 1]) for path in paths[:2]]
            if label == 1:
                markers, marker_paths = np.array(ends[0]), np.array([0, 0])
            else:
                first, second = rng.integers(0, 2, size=2)
                markers, marker_paths = np.array([ends[0][first], ends[1][second]]), np.array([0, 1])
            image = _render(paths, markers, style)
            return PathfinderSample(image, label, paths, markers, marker_paths)
        if not paths:
            break  # not even one contour fits into an empty image: more tries will not help
    raise RuntimeError(
        f"could not fit 2 contours of {style.contour_length} dashes and {style.n_distractors} "
        f"distractors into {style.resolution}x{style.resolution}; "
        "use fewer or shorter paths, shorter dashes, a larger max_turn_degrees or less clearance"
    )


def generate_pathfinder(
    n_samples: int, style: PathfinderStyle | None = None, random_state: int = 0
) -> list[PathfinderSample]:
    """`n_samples` images with balanced labels (n // 2 of one class, the rest the other), shuffled."""
    if n_samples < 0:
        raise ValueError(f"n_samples must be non-negative, got {n_samples}")
    style = style or PathfinderStyle()
    rng = np.random.default_rng(random_state)
    labels = rng.permutation(np.arange(n_samples) % 2)
    return [generate_sample(int(label), style, rng) for label in labels]


def write_pathfinder(
    out_dir: str | Path,
    n_samples: int,
    style: PathfinderStyle | None = None,
    images_per_folder: int = 1000,
    random_state: int = 0,
) -> Path:
    """Write a generated set in the LRA release's Pathfinder layout; returns the difficulty dir.

    `ssmts.data.lra.load_lra_pathfinder(out_dir, resolution=style.resolution,
    difficulty=f"curv_contour_length_{style.contour_length}")` reads it back.
    """
    from PIL import Image

    if images_per_folder < 1:
        raise ValueError(f"images_per_folder must be positive, got {images_per_folder}")
    style = style or PathfinderStyle()
    directory = Path(out_dir) / f"pathfinder{style.resolution}" / f"curv_contour_length_{style.contour_length}"
    (directory / "metadata").mkdir(parents=True, exist_ok=True)
    samples = generate_pathfinder(n_samples, style, random_state)
    for folder, first in enumerate(range(0, n_samples, images_per_folder)):
        (directory / "imgs" / str(folder)).mkdir(parents=True, exist_ok=True)
        lines = []
        for n, sample in enumerate(samples[first : first + images_per_folder]):
            Image.fromarray(sample.image).save(directory / "imgs" / str(folder) / f"sample_{n}.png")
            lines.append(
                f"imgs/{folder} sample_{n}.png {n} {sample.label} {style.contour_length} "
                f"{style.n_distractors} {style.resolution}\n"
            )
        # ".npy" by name only: the release's metadata files are text, and so are these.
        (directory / "metadata" / f"{folder}.npy").write_text("".join(lines))
    return directory


def make_pathfinder_task(
    n_samples: int = 2000,
    resolution: int = 32,
    style: PathfinderStyle | None = None,
    random_state: int = 0,
    split_seed: int = PATHFINDER_SPLIT_SEED,
) -> TaskData:
    """Generate a Pathfinder task in memory, split 80/10/10 like `load_lra_pathfinder`.

    X: (n, 1, resolution**2) float32 in [0, 1]; y: (n,) int64. `style` overrides
    `resolution` when given.
    """
    style = style or PathfinderStyle.for_resolution(resolution)
    samples = generate_pathfinder(n_samples, style, random_state)
    size = style.resolution**2
    X = (
        np.stack([s.image.reshape(1, size) for s in samples]).astype(np.float32) / np.float32(255.0)
        if samples
        else np.zeros((0, 1, size), dtype=np.float32)
    )
    y = np.asarray([s.label for s in samples], dtype=np.int64)
    return pathfinder_task_from_arrays(
        X,
        y,
        split_seed,
        source="synthetic: ssmts.data.pathfinder_synth",
        meta={
            "task": f"pathfinder{style.resolution}",
            "resolution": style.resolution,
            "split_protocol": "seeded random 80/10/10",
            "split_seed": split_seed,
            "random_state": random_state,
            "style": asdict(style),
        },
    )
