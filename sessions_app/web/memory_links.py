"""Sessions and messages named and linked on the memory pages (`memory_app.web.sessions`)."""

from __future__ import annotations

from collections.abc import Iterable

from django.urls import reverse

from openclaw_site.models import Assistant
from sessions_app.models import Message, Session


class DashboardSessionLinks:
    """The dashboard's session pages, for the memory pages' links."""

    def titles(self, assistant: Assistant, session_pks: Iterable[int]) -> dict[int, str]:
        sessions = Session.objects.filter(assistant=assistant, pk__in=set(session_pks))
        return {session.pk: session.title or session.key for session in sessions}

    def message_urls(self, assistant: Assistant, message_pks: Iterable[int]) -> dict[int, str]:
        rows = Message.objects.filter(pk__in=set(message_pks), session__assistant=assistant)
        return {
            pk: reverse("session-message", args=[session_id, seq])
            for pk, session_id, seq in rows.values_list("pk", "session_id", "seq")
        }
