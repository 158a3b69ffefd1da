"""What a session tells a memory write about its trust (docs/design.md, Provenance, consolidation and forgetting).

memory_app cannot read sessions; this looks at a session's recent tool results and answers with
`memory_app.governance.trust.fetching_tools_seen`, so a write derived from fetched outside content is
recorded ``untrusted``.
"""

from __future__ import annotations

from memory_app.governance.trust import FETCHING_TOOLS, RECENT_MESSAGES
from sessions_app.models import Message, Role, Session


def recent_fetching_tools(session: Session) -> list[str]:
    """The fetching tools among the session's latest `RECENT_MESSAGES` messages, oldest first."""
    newest = Message.objects.filter(session=session).order_by("-seq").values_list("seq", flat=True)
    floor = next(iter(newest[RECENT_MESSAGES - 1 : RECENT_MESSAGES]), 0)
    names = (
        Message.objects.filter(
            session=session, role=Role.TOOL_RESULT, seq__gte=floor, tool_name__in=FETCHING_TOOLS
        )
        .order_by("seq")
        .values_list("tool_name", flat=True)
    )
    return list(dict.fromkeys(names))
