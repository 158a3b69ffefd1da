"""Fair sharing between teams: at most a few of one team's expensive requests at once.

A team's searches and imports each take one of the team's slots for that kind of work while they
run; a team with every slot taken is refused 429 ``team_busy`` with ``Retry-After`` (and
``details.retry_after``), so one team's storm of long searches or imports cannot hold every
request thread and core while another team waits (docs/design.md, Limits and refusals).

A search is mostly CPU (its query's embedding, candidates, ranking), so a team's search slots
default to half the cores of the host (`OPENCLAW_TEAM_SEARCH_SLOTS`, docs/deployment.md): four
slots on two cores let one team's storm take both, and another team's searches waited behind it.

A team that asks for more searches at once than its slots, or imports, still shares the cores
with the teams searching beside it, and each of their searches then waits its turn behind the busy
team's work. So while another team has searched in the last `ACTIVE_SECONDS`, the busy team's work
rests for as long as it ran times `TEAM_SEARCH_PACE` (`OPENCLAW_TEAM_SEARCH_PACE`, default 2): a
search of a team refused a slot in the last `ACTIVE_SECONDS` before it gives its slot back, an
import between its documents (`Pacer`). The busy team then works a third of the time it worked
alone while others search, and all of it when they stop; a team within its share never rests,
and nobody waits for the busy team's rests but its own requests. Who searched and who was
refused when is `TeamSearchMark`, a row per team that each process writes at most once a second
per mark, read once per search of a busy team.

A slot is a PostgreSQL session-level advisory lock on the two keys ``(<work>:<n>, <team>)``
(`slot_key`), taken with ``pg_try_advisory_lock`` on a connection of the slot's own (`openclaw_site.platform.locks.
lock_connection`, lent by the pool under `runall`) and released, with the connection given back,
when the work ends however it ends. Not on the request's connection: Django may give that one
back to the pool in the middle of the work (django-q2 closes old connections in places we do not
own; our broker no longer does as a search queues a reindex), and a later request would be lent it
with the slot still held. No
counter can drift: a process that dies takes its connections, and so its slots, with it, and
every process and host that shares the database shares the count.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

from django.conf import settings
from django.db import connection

from openclaw_site.errors import ApiError
from openclaw_site.models import TeamSearchMark
from openclaw_site.platform.locks import lock_connection

RETRY_AFTER_SECONDS = 1
# The longest a search rests after it ran (`TEAM_SEARCH_PACE`), however long it took.
MAX_REST_SECONDS = 0.5


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


def slot_key(work: TeamWork, team_id: int, slot: int) -> tuple[int, int]:
    """Return the two 32-bit keys of a team's slot: the work and slot number, and the team."""
    return _work_key(work, slot), team_id & 0x7FFFFFFF


def _work_key(work: TeamWork, slot: int) -> int:
    return zlib.crc32(f"team-slot:{work.value}:{slot}".encode()) & 0x7FFFFFFF


@contextmanager
def team_slot(team_id: int, work: TeamWork) -> Iterator[None]:
    """Hold one of the team's slots for ``work`` while the block runs; raise 429 when none is free.

    A search marks its team as searching (a refusal, as refused), and a search of a team
    refused of late rests before it gives the slot back while another team searches (module
    docstring).
    """
    limit = work.limit
    if limit <= 0:
        yield
        return
    paced = work is TeamWork.SEARCH and settings.TEAM_SEARCH_PACE > 0
    with lock_connection() as holder:  # released, and given back, when the block ends
        if not _take_slot(holder, team_id, work, limit):
            if paced:
                _mark(holder.execute, team_id, "refused_at")
            raise team_busy_error(work)
        if paced:
            _mark(holder.execute, team_id, "searched_at")
        started = time.monotonic()
        yield
        if paced and others_searching(holder.execute, team_id, only_if_refused=True):
            _rest(time.monotonic() - started)


def _take_slot(holder: Any, team_id: int, work: TeamWork, limit: int) -> bool:
    """Take the first free one of the team's ``limit`` slots on ``holder``; False when all are taken."""
    for slot in range(limit):
        row = holder.execute("SELECT pg_try_advisory_lock(%s, %s)", slot_key(work, team_id, slot)).fetchone()
        if row is not None and row[0]:
            return True
    return False


# A mark is written at most this often by one process; a mark younger than `ACTIVE_SECONDS` is
# "now".
MARK_EVERY_SECONDS = 1.0
ACTIVE_SECONDS = 2.0
_marked: dict[tuple[int, str], float] = {}


def _mark(execute: Any, team_id: int, column: str) -> None:
    """Set the team's ``column`` mark (searched_at, refused_at) to now, at most once a second here."""
    now = time.monotonic()
    if now - _marked.get((team_id, column), -MARK_EVERY_SECONDS) < MARK_EVERY_SECONDS:
        return
    execute(
        f"INSERT INTO {TeamSearchMark._meta.db_table} (team_id, {column}) VALUES (%s, now()) "
        f"ON CONFLICT (team_id) DO UPDATE SET {column} = EXCLUDED.{column}",
        [team_id],
    )
    _marked[(team_id, column)] = now


_OTHERS_SEARCHING_SQL = f"""
    SELECT EXISTS (SELECT 1 FROM {TeamSearchMark._meta.db_table}
                    WHERE searched_at > now() - make_interval(secs => %(active)s) AND team_id <> %(team)s)
"""
_BUSY_AMONG_OTHERS_SQL = f"""
    SELECT EXISTS (SELECT 1 FROM {TeamSearchMark._meta.db_table}
                    WHERE team_id = %(team)s AND refused_at > now() - make_interval(secs => %(active)s))
       AND ({_OTHERS_SEARCHING_SQL})
"""


# An answer of `others_searching` is kept this long in the process, so a team searching many
# times a second asks once per this time (a tenth of `ACTIVE_SECONDS`: the marks move slower).
ANSWER_SECONDS = 0.2
_ANSWERS_KEPT = 10_000
_answers: dict[tuple[int, bool], tuple[float, bool]] = {}


def others_searching(execute: Any, team_id: int, *, only_if_refused: bool = False) -> bool:
    """Tell whether another team searched within `ACTIVE_SECONDS`; with ``only_if_refused``, and
    this team was refused a search slot within that time too. ``execute``: a psycopg
    connection's, or a Django cursor's (whose call returns the cursor)."""
    now, key = time.monotonic(), (team_id, only_if_refused)
    kept = _answers.get(key)
    if kept is not None and now - kept[0] < ANSWER_SECONDS:
        return kept[1]
    sql = _BUSY_AMONG_OTHERS_SQL if only_if_refused else _OTHERS_SEARCHING_SQL
    row = execute(sql, {"active": ACTIVE_SECONDS, "team": team_id}).fetchone()
    answer = bool(row is not None and row[0])
    if len(_answers) >= _ANSWERS_KEPT:
        _answers.clear()
    _answers[key] = (now, answer)
    return answer


def _rest(ran: float) -> None:
    time.sleep(min(ran * settings.TEAM_SEARCH_PACE, MAX_REST_SECONDS))


class Pacer:
    """Paces one long piece of a team's work (an import) while other teams search: call `step`
    between its units; every `PACE_CHECK_SECONDS` of work it looks, and rests if they do."""

    PACE_CHECK_SECONDS = 0.2

    def __init__(self, team_id: int) -> None:
        self.team_id = team_id
        self.since = time.monotonic()

    def step(self) -> None:
        ran = time.monotonic() - self.since
        if ran < self.PACE_CHECK_SECONDS or settings.TEAM_SEARCH_PACE <= 0:
            return
        with connection.cursor() as cursor:
            if others_searching(cursor.execute, self.team_id):
                _rest(ran)
        self.since = time.monotonic()
