"""URLconf for error-shape tests: the real routes plus views that fail on purpose under /api/."""

from __future__ import annotations

from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from config.urls import urlpatterns as real_urlpatterns


class BrokenApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        raise RuntimeError("a bug")


def broken_plain_view(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("another bug")


def _deadlock() -> None:
    """Have PostgreSQL end the statement as it ends a deadlock's victim (SQLSTATE 40P01)."""
    with connection.cursor() as cursor:
        cursor.execute("DO $$ BEGIN RAISE EXCEPTION 'deadlock detected' USING ERRCODE = '40P01'; END $$")


class DeadlockApi(APIView):
    permission_classes = [AllowAny]

    def get(self, request: Request) -> Response:
        _deadlock()
        return Response({})


def deadlock_page(request: HttpRequest) -> HttpResponse:
    _deadlock()
    return HttpResponse("unreachable")


def plain_500(request: HttpRequest) -> HttpResponse:
    return HttpResponse("<h1>oops</h1>", status=502)


urlpatterns = [
    path("api/v1/test/broken-drf/", BrokenApi.as_view()),
    path("api/v1/test/broken-plain/", broken_plain_view),
    path("api/v1/test/bad-gateway/", plain_500),
    path("api/v1/test/deadlock/", DeadlockApi.as_view()),
    path("test/deadlock-page/", deadlock_page),
    *real_urlpatterns,
]
