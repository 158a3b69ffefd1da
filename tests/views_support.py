"""Helpers shared by the dashboard view tests: a signed-in client, signing in through the form, and
how to tell an htmx partial."""

from __future__ import annotations

from typing import Any

from django.test import Client

HX = {"HTTP_HX_REQUEST": "true"}  # the header htmx sends with its requests


def signed_in(user: Any) -> Client:
    """Return a test client with ``user`` signed in."""
    client = Client()
    client.force_login(user)
    return client


def signs_in(client: Client, username: str, password: str) -> bool:
    """Sign ``client`` in through the form (django-axes counts sign-ins per request); tell whether
    it was accepted."""
    response = client.post("/accounts/login/", {"username": username, "password": password})
    return response.status_code == 302


def is_full_page(response: Any) -> bool:
    """Tell a full page from an htmx partial."""
    return b"<html" in response.content
