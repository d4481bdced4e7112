"""Writing a file so that readers see the old file or the new one, never half of one."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


@contextmanager
def replacing(path: str | Path, what: str) -> Iterator[Path]:
    """A temporary path beside `path` to write to; when the block ends without an error it replaces
    `path` (a symbolic link there is replaced, never followed to overwrite its target), otherwise it
    is removed. what: the file's description for the error when `path` is a directory."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"cannot write {what} to {path}: it is a directory; give a file name in it")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)  # a failed write leaves nothing behind
