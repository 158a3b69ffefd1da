"""Team administration in the dashboard: teams, members, roles, the remembered team, the 404 that
offers to switch, and password change and reset through Django's auth views."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.core import mail

from openclaw_site.guards.auth import TEAM_SESSION_KEY
from openclaw_site.models import Membership, Team
from tests import factories
from tests.browser.conftest import PASSWORD
from tests.views_support import HX, is_full_page, signed_in, signs_in

pytestmark = pytest.mark.django_db


def test_members_page_full_and_htmx_and_read_only_for_members(world):
    page = signed_in(world.bob).get("/team/members/")
    assert page.status_code == 200 and is_full_page(page)
    content = page.content.decode()
    assert "alice" in content and "vera" in content and "charlie" not in content
    assert "Add member" not in content and 'name="role"' not in content
    partial = signed_in(world.alice).get("/team/members/", **HX)
    assert not is_full_page(partial) and 'id="member-panel"' in partial.content.decode()
    assert (
        signed_in(world.bob).post("/team/members/", {"identifier": "charlie", "role": "member"}).status_code
        == 403
    )


def test_admin_adds_an_existing_user_by_username_or_email(world):
    world.charlie.email = "charlie@globex.test"
    world.charlie.save()
    client = signed_in(world.alice)
    response = client.post("/team/members/", {"identifier": "Charlie@Globex.test", "role": "viewer"}, **HX)
    assert response.status_code == 200 and "Added charlie as viewer" in response.content.decode()
    assert Membership.objects.get(team=world.acme, user=world.charlie).role == "viewer"
    again = client.post("/team/members/", {"identifier": "charlie", "role": "member"}, **HX)
    assert again.status_code == 422 and "is in Acme already" in again.content.decode()
    unknown = client.post("/team/members/", {"identifier": "nobody", "role": "member"}, **HX)
    assert unknown.status_code == 422 and "Give an e-mail address" in unknown.content.decode()


def test_a_new_person_gets_an_account_and_a_set_password_link(world, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = signed_in(world.alice).post(
            "/team/members/", {"identifier": "dana@acme.test", "role": "member"}
        )
    dana = User.objects.get(email="dana@acme.test")
    assert dana.username == "dana" and not dana.has_usable_password()
    link = re.search(r'id="invite-link"[^>]*value="([^"]+)"', response.content.decode()).group(1)
    [message] = mail.outbox
    assert message.to == ["dana@acme.test"] and link in message.body
    client = signed_in(world.vera)
    client.logout()
    form = client.get(link, follow=True)
    assert "Choose a password" in form.content.decode()
    done = client.post(
        form.redirect_chain[-1][0],
        {"new_password1": "a-long-new-secret-9", "new_password2": "a-long-new-secret-9"},
    )
    assert done.status_code == 302
    assert signs_in(client, "dana", "a-long-new-secret-9")
    assert "Helper" in client.get("/").content.decode()


def test_roles_change_and_the_last_admin_stays(world):
    client = signed_in(world.alice)
    bob = Membership.objects.get(team=world.acme, user=world.bob)
    alice = Membership.objects.get(team=world.acme, user=world.alice)
    response = client.post(f"/team/members/{bob.pk}/role/", {"role": "admin"}, **HX)
    assert response.status_code == 200 and Membership.objects.get(pk=bob.pk).role == "admin"
    assert client.post(f"/team/members/{bob.pk}/role/", {"role": "viewer"}).status_code == 302
    refused = client.post(f"/team/members/{alice.pk}/role/", {"role": "member"}, **HX).content.decode()
    assert "needs an admin" in refused and Membership.objects.get(pk=alice.pk).role == "admin"
    assert "needs an admin" in client.post(f"/team/members/{alice.pk}/remove/", **HX).content.decode()
    assert Membership.objects.filter(pk=alice.pk).exists()
    removed = client.post(f"/team/members/{bob.pk}/remove/")  # without htmx: back to the page
    assert removed.status_code == 302 and removed["Location"] == "/team/members/"
    assert "Removed bob." in client.get("/team/members/").content.decode()
    assert not Membership.objects.filter(pk=bob.pk).exists() and User.objects.filter(pk=world.bob.pk).exists()
    theirs = Membership.objects.get(team=world.globex, user=world.charlie)
    assert client.post(f"/team/members/{theirs.pk}/remove/").status_code == 404


def test_creating_a_team_makes_its_creator_admin_and_works_in_it(world):
    lonely = factories.make_user("lonely")
    client = signed_in(lonely)
    assert "Create a team" in client.get("/").content.decode()
    form = client.get("/teams/new/")
    assert form.status_code == 200 and is_full_page(form)
    response = client.post("/teams/new/", {"name": "Initech", "slug": "initech"})
    assert response.status_code == 302 and response["Location"] == "/team/members/"
    team = Team.objects.get(slug="initech")
    assert Membership.objects.get(team=team, user=lonely).role == "admin"
    assert client.session[TEAM_SESSION_KEY] == team.pk
    taken = client.post("/teams/new/", {"name": "Acme again", "slug": "acme"})
    assert taken.status_code == 422 and "exists already" in taken.content.decode()
    derived = client.post("/teams/new/", {"name": "Acme Robotics", "slug": ""})
    assert derived.status_code == 302 and Team.objects.filter(slug="acme-robotics").exists()


def test_the_new_team_page_keeps_the_top_bar_of_a_user_with_a_team(world):
    page = signed_in(world.alice).get("/teams/new/").content.decode()
    assert 'aria-label="Main"' in page and "Acme · admin" in page
    assert re.search(r'<a href="/team/members/" aria-current="page">Team</a>', page)
    lonely = signed_in(factories.make_user("lonely")).get("/teams/new/")
    assert lonely.status_code == 200 and 'aria-label="Main"' not in lonely.content.decode()


def test_the_last_team_used_is_where_the_next_sign_in_lands(world):
    factories.make_user("multi", team=world.acme, role="member")
    multi = User.objects.get(username="multi")
    Membership.objects.create(user=multi, team=world.globex, role="member")
    client = signed_in(multi)
    assert "Helper" in client.get("/").content.decode()  # acme sorts first
    client.post("/team/", {"team": "globex"})
    fresh = signed_in(multi)  # a new session: no switcher choice in it
    home = fresh.get("/").content.decode()
    assert "Rival" in home and "Helper" not in home


def test_a_404_of_another_of_the_users_teams_offers_to_switch(world):
    factories.make_user("multi", team=world.acme, role="member")
    multi = User.objects.get(username="multi")
    Membership.objects.create(user=multi, team=world.globex, role="member")
    session = factories.make_session(world.other_assistant, title="Globex plan")
    client = signed_in(multi)
    missing = client.get(f"/sessions/{session.pk}/")
    assert missing.status_code == 404
    content = missing.content.decode()
    assert (
        "it is in your team <strong>globex" in content.lower()
        and f'value="/sessions/{session.pk}/"' in content
    )
    switched = client.post("/team/", {"team": "globex", "next": f"/sessions/{session.pk}/"})
    assert switched["Location"] == f"/sessions/{session.pk}/"
    assert client.get(f"/sessions/{session.pk}/").status_code == 200
    assert client.post("/team/", {"team": "acme", "next": "https://evil.test/"})["Location"] == "/"
    # Someone outside globex gets the plain 404, with no hint that it exists.
    plain = signed_in(world.bob).get(f"/sessions/{session.pk}/").content.decode()
    assert "Switch to" not in plain


def test_password_change_through_djangos_views(world):
    client = signed_in(world.bob)
    assert 'href="/accounts/password_change/"' in client.get("/").content.decode()
    page = client.get("/accounts/password_change/")
    assert page.status_code == 200 and "Change your password" in page.content.decode()
    done = client.post(
        "/accounts/password_change/",
        {
            "old_password": PASSWORD,
            "new_password1": "another-long-pw-42",
            "new_password2": "another-long-pw-42",
        },
        follow=True,
    )
    assert "Password changed" in done.content.decode()
    assert signs_in(client, "bob", "another-long-pw-42")


def test_password_reset_mails_a_link(world):
    world.bob.email = "bob@acme.test"
    world.bob.save()
    client = signed_in(world.bob)
    client.logout()
    assert "Forgot your password?" in client.get("/accounts/login/").content.decode()
    response = client.post("/accounts/password_reset/", {"email": "bob@acme.test"}, follow=True)
    assert "Check your mail" in response.content.decode()
    [message] = mail.outbox
    assert "/accounts/reset/" in message.body
