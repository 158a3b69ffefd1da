"""Operations commands: set a server up without a browser."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import CommandError, call_command
from django.test import RequestFactory

from openclaw_site.models import ApiKey, Membership, Team, hash_secret
from tests.api_support import API, assert_error
from tests.conftest import bearer_client

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_team():
    out, _ = run("create_team", "initech", "--name", "Initech")
    assert Team.objects.get(slug="initech").name == "Initech" and "initech" in out
    with pytest.raises(CommandError, match="already exists"):
        run("create_team", "initech")
    with pytest.raises(CommandError, match="not a valid slug"):
        run("create_team", "bad slug")


def test_create_user_with_a_role_who_can_then_sign_in():
    run("create_team", "initech")
    run("create_user", "peter", "--team", "initech", "--role", "viewer", "--password", "a-long-password-1")
    # django-axes checks sign-ins per request (address and username), so authenticate gets one.
    user = authenticate(
        RequestFactory().post("/accounts/login/"), username="peter", password="a-long-password-1"
    )
    assert user is not None
    assert Membership.objects.get(user=user, team__slug="initech").role == "viewer"
    run("create_user", "peter", "--team", "initech", "--role", "admin")
    assert Membership.objects.get(user=user).role == "admin"
    with pytest.raises(CommandError, match="--role"):
        run("create_user", "milton", "--team", "initech", "--role", "boss")
    with pytest.raises(CommandError, match="No team"):
        run("create_user", "milton", "--team", "nowhere")
    assert not get_user_model().objects.filter(username="milton").exists()


def test_create_api_key_prints_only_the_secret_and_the_key_works(world):
    out, err = run(
        "create_api_key", "--team", "acme", "--name", "deploy", "--scopes", "sessions:read", "memory:read"
    )
    lines = out.splitlines()
    assert len(lines) == 1
    secret = lines[0]
    key = ApiKey.objects.get(name="deploy")
    assert key.secret_hash == hash_secret(secret) and sorted(key.scopes) == ["memory:read", "sessions:read"]
    assert secret not in err and "deploy" in err
    client = bearer_client(secret)
    assert client.get(f"{API}/assistants/helper/sessions/").status_code == 200
    assert_error(
        client.post(f"{API}/assistants/", {"slug": "x", "name": "x"}, format="json"),
        403,
        "insufficient_scope",
    )


def test_create_api_key_accepts_comma_separated_scopes_and_expiry(world):
    out, _ = run(
        "create_api_key",
        "--team",
        "acme",
        "--name",
        "ci",
        "--scopes",
        "admin,memory:write",
        "--expires-days",
        "30",
    )
    key = ApiKey.objects.get(name="ci")
    assert sorted(key.scopes) == ["admin", "memory:write"] and key.expires_at is not None
    assert bearer_client(out.strip()).get(f"{API}/api-keys/").status_code == 200


def test_create_api_key_refuses_bad_input(world):
    with pytest.raises(CommandError, match="Unknown scope"):
        run("create_api_key", "--team", "acme", "--name", "x", "--scopes", "root")
    with pytest.raises(CommandError, match="No team"):
        run("create_api_key", "--team", "nowhere", "--name", "x", "--scopes", "admin")
    assert not ApiKey.objects.filter(name="x").exists()
