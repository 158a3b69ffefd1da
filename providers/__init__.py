"""The provider layer below the apps: chat models and embedders behind one error and retry policy.

Not a Django app: no models. Backends are named by dotted path in settings (`CHAT_MODEL_BACKEND`,
`EMBEDDING_BACKEND`), as Django picks `EMAIL_BACKEND`. Only modules here import `openai` or
`sentence_transformers`; nothing here imports memory_app, sessions_app or openclaw_site.
"""
