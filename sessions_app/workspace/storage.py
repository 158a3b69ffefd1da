"""Where export files go: a small storage interface and its local-disk implementation.

Names are POSIX paths relative to the storage root, as in Django's ``Storage`` API, so an adapter
over ``django.core.files.storage`` (S3 and friends, docs/design.md, Exports) can replace
`LocalExportStorage` without touching `sessions_app.workspace.exports`.

Pure: no Django import.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol

# Temp files are hidden siblings of their target (".MEMORY.md.<random>.tmp"): same directory, so
# the final os.replace is an atomic rename on the same file system.
TEMP_PREFIX = "."
TEMP_SUFFIX = ".tmp"


class ExportStorage(Protocol):
    """The operations the exporter needs.

    `save_lines` replaces a whole file atomically. `append_lines` adds to the end of a transcript in
    place: a crash can leave a torn tail, which the exporter cuts off with `truncate` because it
    records the size each write left (docs/design.md, Exports).
    """

    def save_lines(self, name: str, chunks: Iterable[str]) -> None: ...

    def append_lines(self, name: str, chunks: Iterable[str]) -> int: ...

    def size(self, name: str) -> int | None: ...

    def truncate(self, name: str, size: int) -> None: ...

    def read_head(self, name: str, length: int) -> bytes: ...

    def read_lines(self, name: str) -> Iterator[bytes] | None: ...

    def delete(self, name: str) -> None: ...

    def exists(self, name: str) -> bool: ...

    def listdir(self, name: str) -> tuple[list[str], list[str]]: ...

    def remove_empty_dirs(self, name: str, *, stop_at: str) -> None: ...

    def remove_tree(self, name: str) -> None: ...


class UnsafeName(ValueError):
    """A storage name that would leave the storage root."""


def clean_name(name: str) -> str:
    """Return ``name`` normalised, refusing absolute paths and '..' segments."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise UnsafeName(f"export path {name!r} must be relative and stay inside the export root")
    return path.as_posix() if path.parts else ""


def is_temp_name(filename: str) -> bool:
    """Tell whether a file name is one of our temp files (left behind only by a crashed writer)."""
    return filename.startswith(TEMP_PREFIX) and filename.endswith(TEMP_SUFFIX)


class LocalExportStorage:
    """Files under a local directory, written temp-file + fsync + rename, or appended + fsync."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def path(self, name: str) -> Path:
        cleaned = clean_name(name)
        return self.root / cleaned if cleaned else self.root

    def save_lines(self, name: str, chunks: Iterable[str]) -> None:
        """Write ``chunks`` to ``name``: readers see the old file or the complete new one, never a part."""
        target = self.path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(
            dir=target.parent, prefix=f"{TEMP_PREFIX}{target.name}.", suffix=TEMP_SUFFIX
        )
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
                for chunk in chunks:
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temp, 0o644)  # mkstemp creates 0600; the mirror is meant to be read by others
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        _fsync_directory(target.parent)

    def save_text(self, name: str, text: str) -> None:
        self.save_lines(name, [text])

    def append_lines(self, name: str, chunks: Iterable[str]) -> int:
        """Append ``chunks`` to the existing file ``name`` durably and return its new size in bytes."""
        # No O_CREAT: a transcript is only appended to after its header was written by save_lines.
        fd = os.open(self.path(name), os.O_WRONLY | os.O_APPEND)
        with os.fdopen(fd, "ab") as handle:
            for chunk in chunks:
                handle.write(chunk.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
            return os.fstat(handle.fileno()).st_size

    def size(self, name: str) -> int | None:
        """Return the size of the file ``name`` in bytes, or None if there is no such file."""
        try:
            return self.path(name).stat().st_size
        except FileNotFoundError:
            return None

    def truncate(self, name: str, size: int) -> None:
        """Cut the file ``name`` back to its first ``size`` bytes, durably."""
        fd = os.open(self.path(name), os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def read_head(self, name: str, length: int) -> bytes:
        """Return the first ``length`` bytes of ``name`` (fewer if it is shorter; none if it is missing)."""
        try:
            with self.path(name).open("rb") as handle:
                return handle.read(length)
        except FileNotFoundError:
            return b""

    def read_lines(self, name: str) -> Iterator[bytes] | None:
        """Return the lines of ``name`` one at a time (bytes, newline kept), or None if it is missing."""
        try:
            handle = self.path(name).open("rb")
        except FileNotFoundError:
            return None
        return _lines_of(handle)

    def delete(self, name: str) -> None:
        self.path(name).unlink(missing_ok=True)

    def exists(self, name: str) -> bool:
        return self.path(name).exists()

    def listdir(self, name: str) -> tuple[list[str], list[str]]:
        """Return (directories, files) directly under ``name``; both empty if it does not exist."""
        directory = self.path(name)
        if not directory.is_dir():
            return [], []
        entries = sorted(directory.iterdir())
        return [e.name for e in entries if e.is_dir()], [e.name for e in entries if e.is_file()]

    def remove_empty_dirs(self, name: str, *, stop_at: str) -> None:
        """Remove ``name`` and its parents while they are empty, never ``stop_at`` or above."""
        directory, stop = self.path(name), self.path(stop_at)
        while directory != stop and stop in directory.parents:
            try:
                directory.rmdir()
            except OSError:  # not empty (or already gone): stop climbing
                return
            directory = directory.parent

    def remove_tree(self, name: str) -> None:
        """Remove the directory ``name`` with everything in it (never the root itself)."""
        directory = self.path(name)
        if directory != self.root and directory.is_dir():
            shutil.rmtree(directory)


def _fsync_directory(directory: Path) -> None:
    # The rename is durable only once the directory entry is on disk (POSIX; a no-op elsewhere).
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _lines_of(handle: BinaryIO) -> Iterator[bytes]:
    with handle:
        yield from handle
