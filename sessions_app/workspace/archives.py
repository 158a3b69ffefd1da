"""A workspace as one zip file: the dashboard's export download and import upload.

The download is `export_assistant` written to a temporary directory (the same files as
`manage.py export_workspace --out DIR`), zipped. The upload is unpacked into a temporary
directory with every name checked (no absolute paths, no '..', no links, bounded sizes) and
handed to `imports.import_workspace`. The zip is read member by member in chunks of
`_COPY_CHUNK` bytes: never the whole archive, never a whole member in memory; each member's size is
judged as declared before anything is unpacked and as actually unpacked while it is written (a
header that lies is refused at its declared size, docs/design.md, Limits and refusals), so an upload passes exactly the checks of
`manage.py import_workspace` and a broken one changes nothing.
"""

from __future__ import annotations

import stat
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import IO

from django.conf import settings

from openclaw_site.models import Assistant
from sessions_app.workspace.exports import export_assistant
from sessions_app.workspace.imports import ImportReport, WorkspaceImportError, import_workspace
from sessions_app.workspace.storage import LocalExportStorage, UnsafeName, clean_name

MAX_ARCHIVE_FILES = 20_000
MAX_UNPACKED_BYTES = 500_000_000
_COPY_CHUNK = 1 << 20
WORKSPACE_FOLDERS = frozenset({"memory", "sessions"})  # a workspace's own folders, never a wrapper


def workspace_zip(assistant: Assistant) -> IO[bytes]:
    """Return a temporary file holding the assistant's workspace as a zip, positioned at its start."""
    archive_file = tempfile.TemporaryFile()  # noqa: SIM115  (returned open; FileResponse closes it)
    with tempfile.TemporaryDirectory() as directory:
        export_assistant(assistant.pk, storage=LocalExportStorage(directory), base="")
        with zipfile.ZipFile(archive_file, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for file in sorted(Path(directory).rglob("*")):
                if file.is_file():
                    archive.write(file, file.relative_to(directory).as_posix())
    archive_file.seek(0)
    return archive_file


def import_zip(upload: IO[bytes], *, team_slug: str, assistant_slug: str, replace: bool) -> ImportReport:
    """Import a zipped workspace (its files at the top, or inside one folder) like `import_workspace`."""
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        _unpack(upload, root)
        return import_workspace(
            directory=_workspace_root(root),
            team_slug=team_slug,
            assistant_slug=assistant_slug,
            replace=replace,
        )


def _unpack(upload: IO[bytes], target: Path) -> None:
    try:
        archive = zipfile.ZipFile(upload)
    except zipfile.BadZipFile:
        raise WorkspaceImportError("the upload is not a zip file") from None
    with archive:
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_ARCHIVE_FILES:
            raise WorkspaceImportError(f"the zip holds {len(members)} files; at most {MAX_ARCHIVE_FILES}")
        _check_declared(members)
        budget = MAX_UNPACKED_BYTES
        for member in members:
            budget -= _extract(archive, member, target, budget)


def largest_member_bytes() -> int:
    """The largest file an import reads: a transcript or sessions.json, or a memory document."""
    return max(settings.MAX_IMPORT_FILE_BYTES, settings.MAX_MEMORY_DOCUMENT_BYTES)


def _check_declared(members: list[zipfile.ZipInfo]) -> None:
    """Refuse, before anything is unpacked, a zip whose members say they are too large or misnamed.

    The declared sizes can lie (a zip bomb's do), so `_copy` counts the bytes it writes too.
    """
    declared = sum(member.file_size for member in members)
    if declared > MAX_UNPACKED_BYTES:
        raise WorkspaceImportError(f"the zip unpacks to {declared} bytes; at most {MAX_UNPACKED_BYTES}")
    largest = largest_member_bytes()
    for member in members:
        if member.file_size > largest:
            raise WorkspaceImportError(
                f"{member.filename} unpacks to {member.file_size} bytes; no workspace file may be "
                f"larger than {largest}"
            )
        # Without the UTF-8 flag a name is read as CP437, which would mangle any non-ASCII name.
        if not member.flag_bits & 0x800 and not member.filename.isascii():
            raise WorkspaceImportError(
                f"{member.filename}: the zip does not mark this name as UTF-8; zip it again with a "
                "tool that stores UTF-8 names"
            )


def _extract(archive: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path, budget: int) -> int:
    """Write one member under ``target`` and return its size; refuse unsafe names and oversize data."""
    if stat.S_ISLNK(member.external_attr >> 16):
        raise WorkspaceImportError(f"{member.filename}: links are not allowed in a workspace")
    try:
        name = clean_name(member.filename.replace("\\", "/"))
    except UnsafeName:
        raise WorkspaceImportError(f"{member.filename}: a path outside the workspace") from None
    if not name:
        return 0
    destination = target / name
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        return _copy(archive, member, destination, budget)
    except (OSError, ValueError) as error:  # a name too long, a file and a folder of one name, a NUL
        reason = getattr(error, "strerror", None) or str(error)
        raise WorkspaceImportError(f"{member.filename}: cannot be unpacked ({reason})") from None


def _copy(archive: zipfile.ZipFile, member: zipfile.ZipInfo, destination: Path, budget: int) -> int:
    """Unpack one member in bounded chunks, never past its declared size nor the zip's budget."""
    written = 0
    try:
        with archive.open(member) as source, destination.open("wb") as sink:
            while chunk := source.read(_COPY_CHUNK):
                written += len(chunk)
                if written > member.file_size:
                    raise _lying_header(member)
                if written > budget:
                    raise WorkspaceImportError(f"the zip unpacks to more than {MAX_UNPACKED_BYTES} bytes")
                sink.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        # zipfile stops a member at its declared size and then finds its checksum wrong: a header
        # that understates what follows (a zip bomb's), or a damaged zip.
        raise _lying_header(member, reason=str(error)) from None
    return written


def _lying_header(member: zipfile.ZipInfo, *, reason: str = "") -> WorkspaceImportError:
    because = f" ({reason})" if reason else ""
    return WorkspaceImportError(
        f"{member.filename}: its data is not what the zip's header declares ({member.file_size} "
        f"bytes){because}; the zip is damaged or forged"
    )


def _workspace_root(directory: Path) -> Path:
    """The unpacked workspace: the top of the zip, or the one folder that wraps it (a zipped directory)."""
    entries = [entry for entry in directory.iterdir() if entry.name != "__MACOSX"]
    if len(entries) == 1 and entries[0].is_dir() and entries[0].name not in WORKSPACE_FOLDERS:
        return entries[0]
    return directory
