"""Paths the user names (--data-dir, --cache-dir, --out), checked before any work starts.

A symlink loop, a file where a directory must be, or a directory that takes no new files is one
message naming the option, the path and what to do, instead of an OSError from deep inside after
the data were loaded or the model trained. Nothing here imports torch (`ssmts tasks list` uses it).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path


class UnusablePathError(OSError):
    """A path the user named cannot be used; str() is the whole message (the CLI exits with 74)."""

    def __str__(self) -> str:
        return self.strerror or super().__str__()


def _prefixes(path: Path) -> list[Path]:
    """`path`'s ancestors from the root down, then `path` itself: absolute, but with links and ".."
    left for the system to follow, so each is what opening the path would walk through."""
    parts = Path(path).expanduser().absolute().parts
    return [Path(*parts[: i + 1]) for i in range(len(parts))]


def _loop(option: str, path: Path, link: Path) -> UnusablePathError:
    return UnusablePathError(
        errno.ELOOP,
        f"{option} {path}: {link} is a symbolic link loop (following its links comes back around to it, "
        f"never to a file or directory); point {option} at the real location or repair the link (ls -l {link})",
    )


def check_input_path(path: str | Path, option: str) -> None:
    """Refuse a path leading into a symlink loop (at it or at an ancestor), naming the link.

    A path that does not exist is left to the loaders, which say what they expected there.
    """
    for prefix in _prefixes(Path(path)):
        try:
            os.stat(prefix)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise _loop(option, Path(path), prefix) from None
            return


def check_output_files(paths: list[str | Path], option: str = "--out") -> None:
    """Refuse output files that could not be written, before any work: a symlink loop or a file on
    the way to them, a directory at their path, or a directory that takes no new files.

    paths: the files a run writes (the first is the one `option` names), in one directory. The last
    existing directory on the way is probed by creating and removing a temporary file, which sees
    what permission bits do not (a read-only file system, sysfs, root); nothing else is created.
    """
    named = Path(paths[0]).expanduser()
    where = f"{option} {named}"
    existing = Path("/")
    for prefix in _prefixes(named.parent):
        try:
            mode = os.stat(prefix).st_mode
        except FileNotFoundError:
            break  # made by the run (mkdir -p)
        except OSError as error:
            if error.errno == errno.ELOOP:
                raise _loop(option, named, prefix) from None
            raise UnusablePathError(error.errno, f"{where}: cannot use {prefix} ({error.strerror})") from None
        if not stat.S_ISDIR(mode):
            raise UnusablePathError(
                errno.ENOTDIR, f"{where}: {prefix} is a file, not a directory; choose an {option} outside it"
            )
        existing = prefix
    else:  # the directory exists: so may the files
        for path in map(Path, paths):
            try:
                mode = os.stat(path).st_mode
            except FileNotFoundError:
                continue
            except OSError as error:
                if error.errno == errno.ELOOP:
                    raise _loop(option, named, path) from None
                raise UnusablePathError(error.errno, f"{where}: cannot use {path} ({error.strerror})") from None
            if stat.S_ISDIR(mode):
                which = where if path == named else f"{where}: {path}"
                raise UnusablePathError(
                    errno.EISDIR,
                    f"{which} is a directory; {option} names the results file (a .json path), and the run "
                    "writes it and its checkpoint, history and config files next to it: choose another "
                    "path or remove the directory",
                )
            if not os.access(path, os.W_OK):
                raise UnusablePathError(
                    errno.EACCES, f"{where}: {path} exists and is not writable; choose another {option}"
                )
    try:
        handle, probe = tempfile.mkstemp(prefix=".ssmts-write-check-", dir=existing)
    except OSError as error:
        raise UnusablePathError(
            error.errno,
            f"{where}: cannot create files in {existing} ({error.strerror}); choose an {option} in a "
            "directory you can write to",
        ) from None
    os.close(handle)
    os.unlink(probe)
