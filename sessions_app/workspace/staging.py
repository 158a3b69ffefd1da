"""Uploads kept while a replacing import waits for its confirmation (docs/design.md, Limits and refusals).

The dashboard's import over an existing assistant asks first; the upload waits meanwhile in
``VAR_DIR/import-staging/<token>.zip`` and the confirmation takes it once. An upload nobody
confirms within `STAGED_UPLOAD_SECONDS` is abandoned: taking it then refuses and removes it, the
next staging removes every expired one, and so does the periodic job
(`sessions_app.tasks.remove_abandoned_uploads`, every 10 minutes), so a server where nobody
imports again keeps none either. A staging that fails half-way leaves no partial file.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import time
from pathlib import Path
from typing import IO

from django.conf import settings

from sessions_app.workspace.imports import WorkspaceImportError

STAGING_DIR = "import-staging"
# A staged upload waits this long for its confirmation; after that it is abandoned and removed.
STAGED_UPLOAD_SECONDS = 3600
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{22}$")
_EXPIRED = "the confirmed upload has expired; choose the file again"


def staging_directory() -> Path:
    return Path(settings.VAR_DIR) / STAGING_DIR


def stage_upload(upload: IO[bytes]) -> str:
    """Keep an upload while its replacing import waits for a confirmation; return its token."""
    directory = staging_directory()
    directory.mkdir(parents=True, exist_ok=True)
    remove_expired_uploads()
    token = secrets.token_urlsafe(16)
    path = directory / f"{token}.zip"
    try:
        with open(path, "wb") as staged:
            shutil.copyfileobj(upload, staged)
    except BaseException:  # a full disk, a client gone: no partial upload stays behind
        path.unlink(missing_ok=True)
        raise
    return token


def take_staged_upload(token: str) -> IO[bytes]:
    """Open the staged upload ``token`` once: the file is gone when the returned handle is closed."""
    if not _TOKEN_RE.match(token):
        raise WorkspaceImportError(_EXPIRED)
    path = staging_directory() / f"{token}.zip"
    try:
        handle = open(path, "rb")  # noqa: SIM115 - the caller closes it
    except FileNotFoundError:
        raise WorkspaceImportError(_EXPIRED) from None
    path.unlink()  # POSIX: the open handle still reads it
    if _expired(os.fstat(handle.fileno()).st_mtime):
        handle.close()
        raise WorkspaceImportError(_EXPIRED)
    return handle


def discard_staged_upload(token: str) -> None:
    """Remove the staged upload ``token`` now (a new upload replaces it before its confirmation)."""
    if _TOKEN_RE.match(token):
        (staging_directory() / f"{token}.zip").unlink(missing_ok=True)


def remove_expired_uploads() -> int:
    """Remove every staged upload older than `STAGED_UPLOAD_SECONDS`; return how many."""
    directory = staging_directory()
    if not directory.is_dir():
        return 0
    removed = 0
    for staged in directory.glob("*.zip"):
        with contextlib.suppress(FileNotFoundError):  # taken or removed by another process meanwhile
            if _expired(staged.stat().st_mtime):
                staged.unlink()
                removed += 1
    return removed


def _expired(modified: float) -> bool:
    return time.time() - modified > STAGED_UPLOAD_SECONDS
