"""Template tags of the review queue: what the main navigation shows of it."""

from __future__ import annotations

from django import template

from memory_app.selectors import open_proposal_count
from openclaw_site.models import Team

register = template.Library()


@register.simple_tag
def open_proposals(team: Team | None) -> int:
    """``{% open_proposals request.web.team as waiting %}``: the team's open proposals (0: no team)."""
    return open_proposal_count(team=team) if team is not None else 0
