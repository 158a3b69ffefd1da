"""The review queue: an assistant's consolidation proposals, to approve (as is or edited) or reject.

docs/design.md, Provenance, consolidation and forgetting. Viewers read the queue; members and
admins decide, one at a time or several at once, through the same `memory_app.governance.consolidation`
functions as the REST API, attributed to the signed-in person.
"""

from __future__ import annotations

from django.contrib import messages
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from memory_app.documents import Provenance
from memory_app.governance.consolidation import (
    ProposalChanged,
    ProposalDecided,
    ProposalStale,
    approve_proposal,
    reject_proposal,
)
from memory_app.models import Author, Proposal
from memory_app.selectors import proposal_list, team_proposal_list
from openclaw_site.jobs.tasks import TaskOwner, enqueue
from openclaw_site.models import Role
from openclaw_site.selectors import assistant_get
from openclaw_site.web.base import WebRequest, render_page, team_view

STATES = [(state.value, state.label) for state in Proposal.State]


@require_GET
@team_view
def memory_review(request: WebRequest, slug: str) -> HttpResponse:
    """The proposals of one state (open by default), most confident first, with diff and sources."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    state = request.GET.get("state", Proposal.State.OPEN)
    if state not in Proposal.State.values:
        state = Proposal.State.OPEN
    return render_page(
        request,
        "memory/review.html",
        {
            "assistant": assistant,
            "proposals": list(proposal_list(assistant=assistant, state=state)[:200]),
            "state": state,
            "states": STATES,
            "tab": "memory",
        },
        partial="queue",
    )


@require_POST
@team_view
def memory_consolidate(request: WebRequest, slug: str) -> HttpResponse:
    """Queue the consolidation pass (the same task as ``POST /api/v1/assistants/{slug}/consolidate/``)."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    request.web.require(Role.MEMBER)
    enqueue(
        "memory_app.tasks.consolidate_assistant",
        assistant.pk,
        owner=TaskOwner.for_assistant(assistant),
        kind="consolidate",
    )
    messages.success(request, f"Consolidation of {assistant.name} queued; new proposals appear here.")
    return redirect(reverse("memory-review", args=[assistant.slug]))


def _chosen(request: WebRequest) -> tuple[str, list[int]]:
    """One proposal's own button (``decide=approve:<id>``), or the bulk buttons and checkboxes."""
    one = request.POST.get("decide", "")
    if ":" in one:
        action, _, raw = one.partition(":")
        return action, [int(raw)] if raw.isdigit() else []
    return request.POST.get("action", ""), [int(raw) for raw in request.POST.getlist("ids") if raw.isdigit()]


@require_POST
@team_view
def memory_review_decide(request: WebRequest, slug: str) -> HttpResponse:
    """Approve or reject the chosen proposals of one assistant."""
    assistant = assistant_get(team=request.web.team, slug=slug)
    request.web.require(Role.MEMBER)
    _decide(request, Proposal.objects.filter(assistant=assistant))
    return redirect(reverse("memory-review", args=[assistant.slug]))


@require_GET
@team_view
def team_review(request: WebRequest) -> HttpResponse:
    """Every assistant's proposals of one state (open by default): the team's review queue."""
    state = request.GET.get("state", Proposal.State.OPEN)
    if state not in Proposal.State.values:
        state = Proposal.State.OPEN
    return render_page(
        request,
        "memory/team_review.html",
        {
            "proposals": list(team_proposal_list(team=request.web.team, state=state)[:200]),
            "state": state,
            "states": STATES,
        },
        partial="queue",
    )


@require_POST
@team_view
def team_review_decide(request: WebRequest) -> HttpResponse:
    """Approve or reject the chosen proposals of any of the team's assistants."""
    request.web.require(Role.MEMBER)
    _decide(request, team_proposal_list(team=request.web.team, state=Proposal.State.OPEN))
    return redirect(reverse("team-review"))


def _decide(request: WebRequest, allowed: QuerySet[Proposal]) -> None:
    """Approve or reject the chosen proposals among ``allowed``; an approval takes its edited text."""
    action, ids = _chosen(request)
    proposals = allowed.filter(pk__in=ids).select_related("assistant").order_by("pk")
    provenance = Provenance(author=Author.USER, user=request.user, note="review queue")
    done = 0
    for proposal in proposals:
        try:
            if action == "approve":
                edited = request.POST.get(f"new_text-{proposal.pk}")
                new_text = edited.replace("\r\n", "\n") if edited and edited.strip() else None
                approve_proposal(proposal, provenance=provenance, new_text=new_text)
            elif action == "reject":
                reject_proposal(proposal, provenance=provenance)
            else:
                messages.error(request, "Choose approve or reject.")
                break
            done += 1
        except (ProposalDecided, ProposalChanged):
            messages.error(request, f"Proposal {proposal.pk} was decided or changed meanwhile.")
        except ProposalStale as error:
            messages.error(request, f"Proposal {proposal.pk}: {error.reason}; run consolidation again.")
    if done:
        verb = "Approved" if action == "approve" else "Rejected"
        messages.success(request, f"{verb} {done} proposal{'s' if done != 1 else ''}.")
    elif not ids:
        messages.error(request, "Select at least one proposal.")
