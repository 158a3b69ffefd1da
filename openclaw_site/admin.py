"""Django admin for teams, members, assistants, API keys and background tasks."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from openclaw_site.models import (
    API_KEY_PREFIX,
    ApiKey,
    Assistant,
    Membership,
    ModelPrice,
    Scope,
    TaskRecord,
    Team,
    UsageRecord,
)
from openclaw_site.teams import services
from openclaw_site.teams.assistant_settings import SettingsError, validate_settings
from openclaw_site.teams.settings_document import SettingsDocument


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the application only: admins may look, never add, change or delete."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "team", "role", "created_at"]
    list_filter = ["role", "team"]
    search_fields = ["user__username", "user__email", "team__slug"]
    autocomplete_fields = ["user", "team"]


class AssistantAdminForm(forms.ModelForm):
    class Meta:
        model = Assistant
        fields = [
            "team",
            "slug",
            "name",
            "model",
            "context_window",
            "system_prompt",
            "timezone",
            "workspace_access",
            "settings",
        ]

    def clean_settings(self) -> SettingsDocument:
        """Validate like the API does: unknown keys, wrong types and ranges name their path."""
        try:
            return validate_settings(self.cleaned_data.get("settings"))
        except SettingsError as error:
            raise forms.ValidationError(f"{error.path}: {error.message}") from None


@admin.register(Assistant)
class AssistantAdmin(admin.ModelAdmin):
    form = AssistantAdminForm
    list_display = ["slug", "team", "name", "model", "context_window", "workspace_access", "updated_at"]
    list_filter = ["team", "workspace_access"]
    search_fields = ["slug", "name", "team__slug"]


class ApiKeyAdminForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple)

    class Meta:
        model = ApiKey
        fields = ["team", "name", "scopes", "expires_at"]

    def clean_scopes(self) -> list[str]:
        return sorted(set(self.cleaned_data["scopes"]))


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """A new key's secret is rendered once, in the response to the add form, and never stored."""

    form = ApiKeyAdminForm
    list_display = [
        "name",
        "team",
        "key_prefix",
        "scopes",
        "active",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["team", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix", "team__slug"]
    actions = ["revoke_keys"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiKey | None = None) -> list[str]:
        if obj is None:
            return []
        return ["team", "key_prefix", "created_by", "created_at", "last_used_at", "revoked_at"]

    @admin.display(description="prefix")
    def key_prefix(self, key: ApiKey) -> str:
        return f"{API_KEY_PREFIX}{key.prefix}…"

    @admin.display(boolean=True)
    def active(self, key: ApiKey) -> bool:
        return key.is_active

    def save_model(self, request: HttpRequest, obj: ApiKey, form: forms.ModelForm, change: bool) -> None:
        if not change:
            if not request.user.is_authenticated:  # the admin site lets only signed-in staff this far
                raise PermissionDenied("Sign in to create an API key.")
            generated, secret = ApiKey.generate()
            obj.prefix, obj.secret_hash = generated.prefix, generated.secret_hash
            obj.created_by = request.user
            # Kept on the request only: response_add renders it once; it never reaches the database,
            # the session or a message cookie.
            request._api_key_secret = secret  # type: ignore[attr-defined]
        super().save_model(request, obj, form, change)

    def response_add(
        self, request: HttpRequest, obj: ApiKey, post_url_continue: str | None = None
    ) -> HttpResponse:
        secret = getattr(request, "_api_key_secret", None)
        if secret is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": "API key created",
            "key": obj,
            "secret": secret,
            "opts": self.model._meta,
        }
        response = TemplateResponse(request, "admin/openclaw_site/apikey/secret.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        revoked = 0
        for key in queryset.filter(revoked_at__isnull=True):
            services.api_key_revoke(key=key)
            revoked += 1
        self.message_user(request, f"Revoked {revoked} API key(s).", messages.SUCCESS)


@admin.register(TaskRecord)
class TaskRecordAdmin(ReadOnlyAdmin):
    list_display = ["task_id", "team", "kind", "state", "progress", "created_at", "finished_at"]
    list_filter = ["state", "kind", "team"]
    search_fields = ["task_id", "q_task_id", "kind"]


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Prices per million tokens; a change applies to calls from then on (openclaw_site.usage.ledger)."""

    list_display = [
        "model",
        "input_per_mtok",
        "output_per_mtok",
        "cache_read_per_mtok",
        "cache_write_per_mtok",
        "updated_at",
    ]
    search_fields = ["model"]


@admin.register(UsageRecord)
class UsageRecordAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "team",
        "assistant",
        "purpose",
        "model",
        "input_tokens",
        "output_tokens",
        "cost",
    ]
    list_filter = ["purpose", "team"]
    search_fields = ["model", "assistant__slug"]
