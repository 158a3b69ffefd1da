"""Fair sharing between teams: at most a few of one team's expensive requests at once.

A team's searches and imports each take one of the team's slots for that kind of work while they
run; a team with every slot taken is refused 429 ``team_busy`` with ``Retry-After`` (and
``details.retry_after``), so one team's storm of long searches or imports cannot hold every
request thread and core while another team waits (docs/design.md, Limits and refusals).

A search is mostly CPU (its query's embedding, candidates, ranking), so a team's search slots
default to half the cores of the host (`OPENCLAW_TEAM_SEARCH_SLOTS`, docs/deployment.md): four
slots on two cores let one team's storm take both, and another team's searches waited behind it.

A slot is a PostgreSQL session-level advisory lock, ``team-slot:<work>:<team>:<n>``, taken with
``pg_try_advisory_lock`` on a connection of the slot's own (`openclaw_site.platform.locks.
lock_connection`, lent by the pool under `runall`) and released, with the connection given back,
when the work ends however it ends. Not on the request's connection: Django may give that one
back to the pool in the middle of the work (django-q2 closes old connections in places we do not
own; our broker no longer does as a search queues a reindex), and a later request would be lent it
with the slot still held. No
counter can drift: a process that dies takes its connections, and so its slots, with it, and
every process and host that shares the database shares the count.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from django.conf import settings

from openclaw_site.errors import ApiError
from openclaw_site.platform.locks import lock_connection

RETRY_AFTER_SECONDS = 1


class TeamWork(StrEnum):
    """The kinds of expensive work a team has slots for."""

    SEARCH = "search"
    IMPORT = "import"

    @property
    def limit(self) -> int:
        """Return how many of a team's requests of this kind may run at once (0: no limit)."""
        limits = {TeamWork.SEARCH: settings.TEAM_SEARCH_SLOTS, TeamWork.IMPORT: settings.TEAM_IMPORT_SLOTS}
        return int(limits[self])

    @property
    def busy_message(self) -> str:
        if self is TeamWork.IMPORT:
            return (
                "Another import of this team is running; nothing was imported. Try again when it has "
                "finished."
            )
        searches = "1 search" if self.limit == 1 else f"{self.limit} searches"
        return (
            f"This team already runs {searches} at once, its share of the server; "
            f"try again in {RETRY_AFTER_SECONDS} s (see Retry-After)."
        )


def team_busy_error(work: TeamWork) -> ApiError:
    """The 429 ``team_busy`` refusal: every slot of the team for this work is taken."""
    return ApiError(
        "team_busy",
        work.busy_message,
        status_code=429,
        details={"retry_after": RETRY_AFTER_SECONDS, "work": work.value, "limit": work.limit},
    )


def _slot_name(work: TeamWork, team_id: int, slot: int) -> str:
    return f"team-slot:{work.value}:{team_id}:{slot}"


@contextmanager
def team_slot(team_id: int, work: TeamWork) -> Iterator[None]:
    """Hold one of the team's slots for ``work`` while the block runs; raise 429 when none is free."""
    limit = work.limit
    if limit <= 0:
        yield
        return
    with lock_connection() as holder:  # released, and given back, when the block ends
        if not _take_slot(holder, team_id, work, limit):
            raise team_busy_error(work)
        yield


def _take_slot(holder: Any, team_id: int, work: TeamWork, limit: int) -> bool:
    """Take the first free one of the team's ``limit`` slots on ``holder``; False when all are taken."""
    for slot in range(limit):
        name = _slot_name(work, team_id, slot)
        row = holder.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", [name]).fetchone()
        if row is not None and row[0]:
            return True
    return False
