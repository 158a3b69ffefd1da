"""URL routes of the dashboard's shell: home, teams, API keys, jobs, usage, assistants (the apps add theirs, config.urls)."""

from __future__ import annotations

from django.urls import path

from openclaw_site.web import teams, usage
from openclaw_site.web import views as site

urlpatterns = [
    path("", site.home, name="home"),
    path("team/", teams.switch_team, name="switch-team"),
    path("team/members/", teams.team_members, name="team"),
    path("team/members/<int:pk>/role/", teams.member_role, name="member-role"),
    path("team/members/<int:pk>/remove/", teams.member_remove, name="member-remove"),
    path("teams/new/", teams.team_new, name="team-new"),
    path("keys/", site.api_keys, name="api-keys"),
    path("keys/<int:pk>/revoke/", site.api_key_revoke, name="api-key-revoke"),
    path("jobs/", site.jobs_page, name="jobs"),
    path("usage/", usage.usage_page, name="usage"),
    path("usage/export.csv", usage.usage_csv, name="usage-csv"),
    path("assistants/new/", site.assistant_create, name="assistant-new"),
    path("assistants/<slug:slug>/", site.assistant_detail, name="assistant"),
    path("assistants/<slug:slug>/rename/", site.assistant_rename, name="assistant-rename"),
    path("assistants/<slug:slug>/archive/", site.assistant_archive, name="assistant-archive"),
    path("assistants/<slug:slug>/delete/", site.assistant_delete, name="assistant-delete"),
    path("assistants/<slug:slug>/settings/", site.assistant_settings, name="assistant-settings"),
]
