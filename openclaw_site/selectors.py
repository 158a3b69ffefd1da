"""Team-scoped reads of the site's own objects: assistants, API keys, task records.

Every lookup a view makes by a name or id from the URL goes through a selector that filters by the
caller's team, so tenancy is checked here and nowhere else. A selector that finds nothing raises
`NotFound`, whether the object does not exist or belongs to another team (the two are never told
apart). It is a `DomainError` (404 ``not_found``): the dashboard turns it into its 404 page
(`openclaw_site.web.base.team_view`), every API renders it as its own 404 error.
"""

from __future__ import annotations

from datetime import date

from django.db.models import QuerySet

from openclaw_site.errors import DomainError
from openclaw_site.models import ApiKey, Assistant, Membership, TaskRecord, Team, UsageRecord


class NotFound(DomainError):
    """Nothing by that name where the caller may look: missing, or another team's.

    ``noun`` names the object as a sentence does ("assistant", "API key"), ``key`` is the name the
    caller gave when the error repeats it, ``within`` is where it was looked for. Its message is
    the 404 every adapter answers ("Assistant 'helper' not found."); ``str()`` is the sentence a
    page or a log says ("No such assistant in this team.").
    """

    def __init__(self, noun: str, *, key: str | None = None, within: str | None = "this team") -> None:
        self.noun = noun
        self.key = key
        self.within = within
        super().__init__("not_found", f"{self.what} not found.", status=404)
        self.args = (f"No such {noun} in {within}." if within else f"No such {noun}.",)

    @property
    def what(self) -> str:
        """Name the object as the API's error does: "Assistant 'helper'", "Session"."""
        subject = self.noun[:1].upper() + self.noun[1:]
        return subject if self.key is None else f"{subject} {self.key!r}"


def assistant_get(*, team: Team, slug: str) -> Assistant:
    """Return the team's assistant ``slug``, or raise NotFound."""
    assistant = Assistant.objects.filter(team=team, slug=slug).select_related("team").first()
    if assistant is None:
        raise NotFound("assistant", key=slug)
    return assistant


def assistant_list(*, team: Team, archived: bool | None = None) -> QuerySet[Assistant]:
    """Return the team's assistants by slug; only the archived or the active ones when asked."""
    assistants = Assistant.objects.filter(team=team).select_related("team").order_by("slug")
    if archived is not None:
        assistants = assistants.filter(archived_at__isnull=not archived)
    return assistants


def api_key_get(*, team: Team, pk: int) -> ApiKey:
    """Return the team's API key ``pk``, or raise NotFound."""
    key = ApiKey.objects.filter(team=team, pk=pk).first()
    if key is None:
        raise NotFound("API key")
    return key


def api_key_list(*, team: Team) -> QuerySet[ApiKey]:
    """Return the team's API keys, newest first, with who created them."""
    return ApiKey.objects.filter(team=team).select_related("created_by")


def task_record_get(*, team: Team, task_id: str) -> TaskRecord:
    """Return the team's background task ``task_id``, or raise NotFound."""
    record = TaskRecord.objects.filter(team=team, task_id=task_id).first()
    if record is None:
        raise NotFound("task")
    return record


def task_record_list(*, team: Team) -> QuerySet[TaskRecord]:
    """Return the team's background tasks, newest first."""
    return TaskRecord.objects.filter(team=team).order_by("-created_at", "-id")


def usage_records(
    *,
    team: Team,
    assistant: Assistant | None = None,
    session_id: int | None = None,
    since: date | None = None,
    until: date | None = None,
) -> QuerySet[UsageRecord]:
    """Return the team's usage records, narrowed to an assistant, a session or days (inclusive)."""
    records = UsageRecord.objects.filter(team=team)
    if assistant is not None:
        records = records.filter(assistant=assistant)
    if session_id is not None:
        records = records.filter(session_id=session_id)
    if since is not None:
        records = records.filter(created_at__date__gte=since)
    if until is not None:
        records = records.filter(created_at__date__lte=until)
    return records


def membership_list(*, team: Team) -> QuerySet[Membership]:
    """Return the team's members with their users, admins first."""
    return Membership.objects.filter(team=team).select_related("user").order_by("role", "user__username")


def membership_get(*, team: Team, pk: int) -> Membership:
    """Return the team's membership ``pk``, or raise NotFound."""
    membership = Membership.objects.filter(team=team, pk=pk).select_related("user", "team").first()
    if membership is None:
        raise NotFound("member")
    return membership
