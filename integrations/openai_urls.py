"""Routes of the OpenAI-compatible endpoint, included at /v1/ (an OpenAI client's `base_url`)."""

from __future__ import annotations

from django.urls import path

from integrations import openai_compat

urlpatterns = [
    path("chat/completions", openai_compat.chat_completions, name="openai-chat-completions"),
    path("models", openai_compat.models, name="openai-models"),
]
