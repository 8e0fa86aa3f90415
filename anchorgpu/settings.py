"""AnchorGPU settings: one module, configured only by the environment.

Every variable is documented in docs/configuration.md. A missing or malformed value stops start-up
with a message that names the variable, instead of failing later in a request.
"""

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import unquote

import environ
from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured

from anchorgpu import queues

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()


def _read(name, cast, **kwargs):
    try:
        return getattr(env, cast)(name, **kwargs)
    except ImproperlyConfigured as exc:
        raise ImproperlyConfigured(f"{name} is not set. {_HINTS.get(name, '')}".strip()) from exc
    except (ValueError, TypeError) as exc:
        raise ImproperlyConfigured(f"{name} has a bad value ({exc}); expected {cast}.") from exc


_HINTS = {
    "DATABASE_URL": "Use `make run` / `make test` (embedded PostgreSQL) or set "
    "postgres://user:password@host:5432/name.",
    "REDIS_URL": "Use `make run` / `make test` (embedded Redis) or set redis://host:6379/0.",
    "DJANGO_SECRET_KEY": "Set a long random string (50+ characters in production).",
}

DEBUG = _read("DJANGO_DEBUG", "bool", default=False)
SECRET_KEY = _read("DJANGO_SECRET_KEY", "str")
SECRET_KEY_FALLBACKS = _read("DJANGO_SECRET_KEY_FALLBACKS", "list", default=[])
ALLOWED_HOSTS = _read("DJANGO_ALLOWED_HOSTS", "list", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = _read("DJANGO_CSRF_TRUSTED_ORIGINS", "list", default=[])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.postgres",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "core",
    "allauth",
    "allauth.account",
    "allauth.mfa",
    "accounts",
    "anchorgpu",
    "catalog",
    "telemetry",
    "rentals",
    # The staff's read side: the fleet report (above rentals and telemetry).
    "reports",
    "glossary",
    "sizing",
    "webhooks",
    "invoices",
    # Getting paid: cards through the processor, the cash ledger, bank statements.
    "payments",
    # The audit log: django-pghistory's event tables, written by pgtrigger's
    # triggers. audit sits at the top of the layers.
    "pgtrigger",
    "pghistory",
    "audit",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "core.middleware.RefuseControlCharacters",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "accounts.middleware.PreferredLanguage",
    "audit.context.AuditContextMiddleware",
    "core.middleware.RefusalPage",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
]

ROOT_URLCONF = "anchorgpu.urls"
WSGI_APPLICATION = "anchorgpu.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.teams",
                "rentals.context_processors.notices",
                "invoices.context_processors.held_invoices",
            ],
        },
    },
]

_database_url = _read("DATABASE_URL", "str", default="")
if not _database_url:
    raise ImproperlyConfigured(f"DATABASE_URL is not set. {_HINTS['DATABASE_URL']}")
_db = env.db_url_config(_database_url)
if not _db.get("ENGINE", "").endswith("postgresql"):
    raise ImproperlyConfigured(
        "DATABASE_URL must point at PostgreSQL (the only supported database)."
    )
# A Unix-socket directory arrives percent-encoded in the URL's host part.
_db["HOST"] = unquote(_db["HOST"])
_db["CONN_MAX_AGE"] = _read("DATABASE_CONN_MAX_AGE", "int", default=60)
_db["CONN_HEALTH_CHECKS"] = True


def _without_jit(config: dict) -> dict:
    """PostgreSQL's JIT compiles any statement whose cost estimate passes jit_above_cost:
    the dashboard's range sums and the availability calendar at scale. Their compiling took
    10-25 ms a statement (up to 950 ms) and saved less; every statement here runs in
    milliseconds without it. Off for our connections, whatever the server's default."""
    options = config.setdefault("OPTIONS", {})
    options["options"] = f"{options.get('options', '')} -c jit=off".strip()
    return config


DATABASES = {"default": _without_jit(_db)}
# A replica for the staff dashboards' reads (core.db.reporting_reads); tests mirror it.
_reporting_url = _read("REPORTING_DATABASE_URL", "str", default="")
if _reporting_url:
    DATABASES["reporting"] = {
        **_without_jit(env.db_url_config(_reporting_url)),
        "CONN_MAX_AGE": _db["CONN_MAX_AGE"],
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"MIRROR": "default"},
    }
REPORTING_DATABASE = "reporting" if _reporting_url else "default"
DATABASE_ROUTERS = ["core.db.ReportingRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = _read("REDIS_URL", "str", default="")
if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
    raise ImproperlyConfigured(f"REDIS_URL is not set or not a redis:// URL. {_HINTS['REDIS_URL']}")
# Redis answers in well under a millisecond here; one that hangs must not hold a request
# for redis-py's default 5 s (core/cache.py then fails open for reads, closed for sign-in).
REDIS_TIMEOUTS = {
    "socket_connect_timeout": 0.5,
    "socket_timeout": 1.0,
    "health_check_interval": 30,
}
CACHES = {
    "default": {
        "BACKEND": "core.cache.RedisCache",  # keeps its client, fails open (core/cache.py)
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "anchorgpu",
        "TIMEOUT": 300,
        "OPTIONS": REDIS_TIMEOUTS,
    }
}
SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {
        "NAME": "django.contrib.auth.password_validation.MinimumLengthValidator",
        "OPTIONS": {"min_length": 12},
    },
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "account_login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "home"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]

# --- Accounts (django-allauth) ------------------------------------------------------------
# Sign-in by username or e-mail; sign-up open, or only with a team invitation.
ACCOUNT_ADAPTER = "accounts.adapter.AccountAdapter"
ACCOUNT_FORMS = {"signup": "accounts.forms.InvitedSignupForm"}
MFA_ADAPTER = "accounts.adapter.MfaAdapter"
ACCOUNT_LOGIN_METHODS = {"username", "email"}
ACCOUNT_SIGNUP_FIELDS = ["email*", "username*", "password1*", "password2*"]
ACCOUNT_UNIQUE_EMAIL = True
# The address is confirmed before the first sign-in. With enumeration prevention (allauth's
# default) a sign-up with a registered address answers as a new one does ("we sent you a
# link") and mails the address's owner instead; that needs mandatory verification.
ACCOUNT_EMAIL_VERIFICATION = "mandatory"
ACCOUNT_PREVENT_ENUMERATION = True
ACCOUNT_CONFIRM_EMAIL_ON_GET = False
ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION = True
ACCOUNT_LOGOUT_ON_GET = False
# Who the product is to people (mails, account pages) and where they write to; the
# confirmation mail said "Hello from 127.0.0.1:18800" with no name set.
SITE_NAME = _read("SITE_NAME", "str", default="AnchorGPU")
SUPPORT_EMAIL = _read("SUPPORT_EMAIL", "str", default="support@anchorgpu.example")
ACCOUNT_EMAIL_SUBJECT_PREFIX = f"[{SITE_NAME}] "
# Failed sign-ins are counted by accounts.signin (one lockout for the form and the API);
# allauth's own limits stay on for sign-up, password reset and confirmation mails.
ACCOUNT_RATE_LIMITS = {"login_failed": False}
MFA_SUPPORTED_TYPES = ["totp", "recovery_codes"]
# Second-factor codes are counted by accounts.signin (allauth's own MFA limit rides on
# login_failed, which is off above).
MFA_FORMS = {
    "authenticate": "accounts.forms.SecondFactorForm",
    "reauthenticate": "accounts.forms.SecondFactorReauthenticateForm",
    "activate_totp": "accounts.forms.TotpActivateForm",
}
MFA_TOTP_ISSUER = SITE_NAME
SIGNUP_MODE = _read("ANCHORGPU_SIGNUP", "str", default="open")
if SIGNUP_MODE not in ("open", "invite"):
    raise ImproperlyConfigured("ANCHORGPU_SIGNUP must be open or invite.")

LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("pl", "Polski")]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}
WHITENOISE_USE_FINDERS = DEBUG

# Production transport security, on when served over HTTPS (DJANGO_SECURE=true).
SECURE = _read("DJANGO_SECURE", "bool", default=False)
SECURE_SSL_REDIRECT = SECURE
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_HSTS_SECONDS = 31_536_000 if SECURE else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE
SECURE_HSTS_PRELOAD = SECURE
if _read("DJANGO_BEHIND_PROXY", "bool", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_HTTPONLY = True

# Headers on every response, HTTPS or not.
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],  # no inline script: behaviour lives in static/js
        "style-src": [SELF, UNSAFE_INLINE],  # style attributes draw the timeline and heatmap
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}
# Getting paid (the payments app): the official `stripe` library against STRIPE_API_BASE.
# With no key set, `make run` and `make test` start localstripe on loopback and set these
# (anchorgpu/launcher.py); with Stripe's keys set, the same code talks to Stripe.
PAYMENTS = {
    "API_KEY": _read("STRIPE_API_KEY", "str", default=""),
    "PUBLISHABLE_KEY": _read("STRIPE_PUBLISHABLE_KEY", "str", default=""),
    "WEBHOOK_SECRET": _read("STRIPE_WEBHOOK_SECRET", "str", default=""),
    "API_BASE": _read("STRIPE_API_BASE", "str", default="https://api.stripe.com").rstrip("/"),
    # Stripe.js: js.stripe.com in production, localstripe's copy in the demo and tests.
    "JS_URL": _read("STRIPE_JS_URL", "str", default="https://js.stripe.com/v3/"),
    "TIMEOUT": _read("STRIPE_TIMEOUT_SECONDS", "float", default=10.0),
    # A capture that fails after the booking committed is retried this often, then staff see it.
    "CAPTURE_ATTEMPTS": _read("STRIPE_CAPTURE_ATTEMPTS", "int", default=8),
    # Reminders: days before the due date, and after it.
    "REMIND_BEFORE_DAYS": _read("PAYMENT_REMIND_BEFORE_DAYS", "int", default=3),
}


def _origin(url: str) -> str:
    parts = url.split("/")
    return "/".join(parts[:3])


_PROCESSOR_JS = _origin(PAYMENTS["JS_URL"])
_PROCESSOR_API = _origin(PAYMENTS["API_BASE"])
# Stripe.js runs from the processor's base and calls its API (and frames 3-D Secure pages
# from it): exactly those origins, nothing else.
CONTENT_SECURITY_POLICY["DIRECTIVES"]["script-src"] = [SELF, _PROCESSOR_JS]
CONTENT_SECURITY_POLICY["DIRECTIVES"]["connect-src"] = sorted({SELF, _PROCESSOR_API})
CONTENT_SECURITY_POLICY["DIRECTIVES"]["frame-src"] = sorted(
    {_PROCESSOR_JS, *(["https://hooks.stripe.com"] if "stripe.com" in _PROCESSOR_JS else [])}
)

# Production serving (anchorgpu.wsgi) refuses DEBUG, a short key or plain HTTP unless this
# is set: `make run` sets it for its local, non-public server.
ALLOW_INSECURE = _read("DJANGO_ALLOW_INSECURE", "bool", default=False)

EMAIL_BACKEND = _read(
    "EMAIL_BACKEND", "str", default="django.core.mail.backends.console.EmailBackend"
)
DEFAULT_FROM_EMAIL = _read("DEFAULT_FROM_EMAIL", "str", default="AnchorGPU <noreply@localhost>")
# A mail server that hangs must not hold a worker: the send fails and its task retries.
EMAIL_TIMEOUT = _read("EMAIL_TIMEOUT_SECONDS", "int", default=10)

# --- REST API -------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.auth.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "core.pagination.BoundedLimitOffsetPagination",
    # JSON in, JSON (or problem details) out: no forms, no browsable HTML.
    "DEFAULT_PARSER_CLASSES": ["core.parsers.JSONParser"],
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "core.negotiation.LenientNegotiation",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "core.renderers.ProblemJSONRenderer",
    ],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "core.problems.problem_exception_handler",
    # Which X-Forwarded-For entry names the client: 0 trusts none (REMOTE_ADDR).
    "NUM_PROXIES": _read("DJANGO_TRUSTED_PROXIES", "int", default=0),
    "DEFAULT_THROTTLE_RATES": {
        "auth": _read("AUTH_THROTTLE_RATE", "str", default="10/min"),
        "purchase": _read("PURCHASE_THROTTLE_RATE", "str", default="120/min"),
        "quote": _read("QUOTE_THROTTLE_RATE", "str", default="120/min"),
        "sizing": _read("SIZING_THROTTLE_RATE", "str", default="60/min"),
    },
}
SPECTACULAR_SETTINGS = {
    "TITLE": "AnchorGPU API",
    "DESCRIPTION": "Rent GPUs for fixed paid periods. Errors are RFC 9457 problem details.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # operationIds and tags without the version: `bookings_create`, `allocations_stop_create`.
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "ENUM_NAME_OVERRIDES": {
        "AllocationStateEnum": "rentals.models.AllocationState",
        "NodeStateEnum": "catalog.models.NodeState",
        "LedgerKindEnum": "rentals.models.LedgerKind",
        "DiffusionDtypeEnum": "sizing.diffusion.DTYPES",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "anchorgpu.schema.add_problem_responses",
    ],
}

# --- Celery -----------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SOFT_TIME_LIMIT = _read("CELERY_TASK_SOFT_TIME_LIMIT", "int", default=60)
CELERY_TASK_TIME_LIMIT = _read("CELERY_TASK_TIME_LIMIT", "int", default=90)
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": 3600, **REDIS_TIMEOUTS, "socket_timeout": 2.0,
}  # fmt: skip
# Publishing happens after a commit, in a request: it fails fast rather than retrying
# while the person waits, and the beat sweeps send what was not queued (notices, webhook
# deliveries).
CELERY_BROKER_CONNECTION_TIMEOUT = 1.0
CELERY_TASK_PUBLISH_RETRY = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
# The queues are named in anchorgpu/queues.py; `make run` starts a worker for each.
CELERY_TASK_DEFAULT_QUEUE = queues.DEFAULT
CELERY_TASK_ROUTES = {
    f"telemetry.tasks.{name}": {"queue": queues.POLL}
    for name in (
        "nodes_poll_task", "nodes_poll_shard_task", "nodes_remote_poll_shard_task",
        "telemetry_ingest_task", "telemetry_ingest_shard_task",
    )
} | {
    f"telemetry.tasks.{name}": {"queue": queues.ROLLUP}
    for name in ("telemetry_rollup_shard_task", "fleet_rollups_refresh_task")
}  # fmt: skip
WORKER_QUEUES = list(queues.ALL)
CELERY_TASK_ALWAYS_EAGER = False

# --- The product ------------------------------------------------------------------------
telemetry_source = _read("TELEMETRY_SOURCE", "str", default="embedded")
# Raw samples kept: hours where set, else days. With the operator's engine as the source the
# engine keeps the raw history, and PostgreSQL needs raw samples only until the open hour is
# rolled up and its holdings' edges written: that hour and one more by default. (The prune
# never drops a sample the rollup has not read, however short this is.)
if env.str("TELEMETRY_RAW_RETENTION_HOURS", default=""):
    raw_retention = timedelta(hours=_read("TELEMETRY_RAW_RETENTION_HOURS", "float"))
elif telemetry_source == "prometheus" and not env.str("TELEMETRY_RAW_RETENTION_DAYS", default=""):
    raw_retention = timedelta(hours=2)
else:
    raw_retention = timedelta(days=_read("TELEMETRY_RAW_RETENTION_DAYS", "int", default=7))
ANCHORGPU = {
    "CURRENCY": _read("ANCHORGPU_CURRENCY", "str", default="USD"),
    "QUOTE_VALIDITY": timedelta(seconds=_read("QUOTE_VALIDITY_SECONDS", "int", default=900)),
    "MAX_PERIOD_COUNT": _read("MAX_PERIOD_COUNT", "int", default=52),
    "MAX_SCHEDULE_AHEAD": timedelta(days=_read("MAX_SCHEDULE_AHEAD_DAYS", "int", default=365)),
    # Getting paid (the payments app): new teams' billing mode.
    "NEW_TEAM_BILLING_MODE": _read("NEW_TEAM_BILLING_MODE", "str", default="card"),
    "IDEMPOTENCY_RETENTION": timedelta(
        hours=_read("IDEMPOTENCY_RETENTION_HOURS", "int", default=24)
    ),
    "ENFORCE_INTERVAL": _read("ENFORCE_INTERVAL_SECONDS", "float", default=60.0),
    "POLL_INTERVAL": _read("POLL_INTERVAL_SECONDS", "float", default=15.0),
    "POLL_CONNECT_TIMEOUT": _read("POLL_CONNECT_TIMEOUT_SECONDS", "float", default=2.0),
    "POLL_READ_TIMEOUT": _read("POLL_READ_TIMEOUT_SECONDS", "float", default=5.0),
    "POLL_MAX_BYTES": _read("POLL_MAX_BYTES", "int", default=4 * 1024 * 1024),
    # A whole answer per node, however slowly it trickles in; and the whole shard, kept
    # below the task's soft time limit so the task records what it got.
    "POLL_NODE_DEADLINE": _read("POLL_NODE_DEADLINE_SECONDS", "float", default=10.0),
    "POLL_SHARD_DEADLINE": _read(
        "POLL_SHARD_DEADLINE_SECONDS", "float", default=max(CELERY_TASK_SOFT_TIME_LIMIT - 15, 5)
    ),
    "POLL_SHARD_SIZE": _read("POLL_SHARD_SIZE", "int", default=250),
    "STALE_AFTER_POLLS": _read("STALE_AFTER_POLLS", "int", default=4),
    # A node agent that has not asked for its state this long gets a flag (it asks every 10 s).
    "AGENT_SILENT_SECONDS": _read("AGENT_SILENT_SECONDS", "int", default=60),
    "RAW_RETENTION": raw_retention,
    "PARTITIONS_AHEAD_DAYS": _read("TELEMETRY_PARTITIONS_AHEAD_DAYS", "int", default=3),
    # GPU ids per shard of the rollup: each shard's raw samples are read in one statement,
    # in its own transaction (GPU ids, not GPUs: ids a shard never had count too).
    "ROLLUP_SHARD_SIZE": _read("TELEMETRY_ROLLUP_SHARD_SIZE", "int", default=25000),
    # The most hours of a shard's backlog one pass reads (at least 1): after an outage the
    # shard catches up this many hours a pass, each pass well inside the task's soft time
    # limit, instead of reading the whole backlog, overrunning and rolling back every time.
    "ROLLUP_MAX_HOURS_PER_PASS": max(
        1, _read("TELEMETRY_ROLLUP_MAX_HOURS_PER_PASS", "int", default=2)
    ),
    "ROLLUP_RETENTION": timedelta(
        days=_read("TELEMETRY_ROLLUP_RETENTION_DAYS", "int", default=400)
    ),
    "HOT_TEMPERATURE_C": _read("HOT_TEMPERATURE_C", "float", default=85.0),
    "XID_QUIET_MINUTES": _read("XID_QUIET_MINUTES", "int", default=60),
    "SIMULATOR_STORY": _read("SIMULATOR_STORY", "bool", default=True),
    # A bearer secret for Prometheus at /metrics (staff API tokens work too); empty: none.
    "METRICS_TOKEN": _read("METRICS_TOKEN", "str", default=""),
    "ACTIVE_UTILISATION_PCT": _read("ACTIVE_UTILISATION_PCT", "float", default=5.0),
    # Where telemetry comes from: our own poller (`embedded`), or the operator's Prometheus,
    # VictoriaMetrics or Mimir (`prometheus`), read over its HTTP API (telemetry/remote.py).
    "TELEMETRY_SOURCE": telemetry_source,
    "PROMETHEUS": {
        # The API's base: http://prometheus:9090, http://vmselect:8481/select/0/prometheus,
        # http://mimir:8080/prometheus (…/api/v1/query is appended).
        "URL": _read("PROMETHEUS_URL", "str", default="").rstrip("/"),
        "BEARER_TOKEN": _read("PROMETHEUS_BEARER_TOKEN", "str", default=""),
        "USERNAME": _read("PROMETHEUS_USERNAME", "str", default=""),
        "PASSWORD": _read("PROMETHEUS_PASSWORD", "str", default=""),
        "TENANT": _read("PROMETHEUS_TENANT", "str", default=""),  # X-Scope-OrgID (Mimir)
        "TLS_VERIFY": _read("PROMETHEUS_TLS_VERIFY", "bool", default=True),
        "CA_FILE": _read("PROMETHEUS_CA_FILE", "str", default=""),
        "TIMEOUT": _read("PROMETHEUS_TIMEOUT_SECONDS", "float", default=10.0),
        # The target label that holds a node's hostname: our SD endpoint sets anchorgpu_node;
        # an operator who scrapes its nodes itself names its own label.
        "NODE_LABEL": _read("PROMETHEUS_NODE_LABEL", "str", default="anchorgpu_node"),
        # A high-availability pair's replica label (one replica's samples are kept per node).
        "REPLICA_LABEL": _read("PROMETHEUS_REPLICA_LABEL", "str", default=""),
        # How far behind now the engine's data is complete (VictoriaMetrics hides the newest
        # 30 s; remote write arrives late): minutes are ingested once this long past.
        "LAG": _read("PROMETHEUS_LAG_SECONDS", "float", default=45.0),
        "REPULL_MINUTES": _read("PROMETHEUS_REPULL_MINUTES", "int", default=3),
        "CATCHUP_MINUTES": _read("PROMETHEUS_CATCHUP_MINUTES", "int", default=30),
        # The live path reads the newest scrape within this window (≥ the scrape interval).
        "LIVE_WINDOW": _read("PROMETHEUS_LIVE_WINDOW_SECONDS", "float", default=30.0),
        # A bearer secret for the engine's http_sd_configs (staff API tokens work too).
        "SD_TOKEN": _read("PROMETHEUS_SD_TOKEN", "str", default=""),
    },
    "API_TOKEN_LIFETIME": timedelta(days=_read("API_TOKEN_DAYS", "int", default=90)),
    "API_TOKENS_MAX": _read("API_TOKENS_MAX", "int", default=20),
    # A statement with more rows than this (its range as filtered) is exported in the
    # background, not streamed from the page: the file is written into the database and
    # kept STATEMENT_EXPORT_DAYS for the team's owner and billing members.
    "STATEMENT_EXPORT_ROWS": _read("STATEMENT_EXPORT_ROWS", "int", default=500_000),
    "STATEMENT_EXPORT_DAYS": _read("STATEMENT_EXPORT_DAYS", "int", default=7),
    "NOTICE_STOPPED_HOURS": _read("NOTICE_STOPPED_HOURS", "float", default=24.0),
    "NOTICE_RETRY_SECONDS": _read("NOTICE_RETRY_SECONDS", "float", default=30.0),
    # When the provider fails: NVIDIA's XIDs that mean a GPU cannot work until it is
    # reset (48 double-bit ECC, 79 fallen off the bus, 94/95 ECC, 119/120 GSP); how long a
    # node may stay unreachable or stale before its allocations are impaired; whether an
    # impaired allocation is moved to a spare by itself; how far ahead a maintenance window
    # that moves or cancels bookings must be scheduled (their owners hear of it at once).
    "FATAL_XIDS": [
        int(x) for x in _read("FATAL_XIDS", "list", default=["48", "79", "94", "95", "119", "120"])
    ],  # fmt: skip
    "IMPAIRED_NODE_AFTER": timedelta(
        seconds=_read("IMPAIRED_NODE_AFTER_SECONDS", "float", default=120.0)
    ),
    # A span shorter than this is not impaired time (not credited, not counted): a blip.
    "IMPAIRED_MIN": timedelta(seconds=_read("IMPAIRED_MIN_SECONDS", "float", default=300.0)),
    "IMPAIRED_AUTO_REPLACE": _read("IMPAIRED_AUTO_REPLACE", "bool", default=False),
    "MAINTENANCE_NOTICE": timedelta(hours=_read("MAINTENANCE_NOTICE_HOURS", "float", default=24.0)),
    # Who issues the invoices. The defaults are a fictional demo seller; a real
    # one sets every SELLER_* variable. Catalog prices are net; VAT_STANDARD_RATE is the
    # seller country's standard rate (23 % in Poland).
    "SELLER": {
        "NAME": _read("SELLER_NAME", "str", default="AnchorGPU Demo sp. z o.o."),
        "ADDRESS": _read(
            "SELLER_ADDRESS", "str", default="ul. Przykładowa 1\n00-001 Warszawa"
        ).replace("\\n", "\n"),
        "COUNTRY": _read("SELLER_COUNTRY", "str", default="PL").upper(),
        "VAT_ID": _read("SELLER_VAT_ID", "str", default="PL5260250274"),
        "BANK_ACCOUNT": _read("SELLER_BANK_ACCOUNT", "str", default="PL61109010140000071219812874"),
        "INVOICE_SERIES": _read("INVOICE_SERIES", "str", default="AG"),
    },
    "VAT_RATE": Decimal(_read("VAT_STANDARD_RATE", "str", default="0.23")),
    "DEMO": _read("ANCHORGPU_DEMO", "bool", default=False),
    # The audit log keeps its rows this long; the hourly retention task deletes older ones.
    "AUDIT_RETENTION_DAYS": _read("AUDIT_RETENTION_DAYS", "int", default=400),
    # Webhooks: http and loopback/private receivers only where an operator allows them.
    "WEBHOOK_ALLOW_PRIVATE_URLS": _read("WEBHOOK_ALLOW_PRIVATE_URLS", "bool", default=False),
    "WEBHOOK_TIMEOUT": _read("WEBHOOK_TIMEOUT_SECONDS", "float", default=10.0),
    # Seconds after each failed attempt (Standard Webhooks' schedule: about 27 h in all).
    "WEBHOOK_RETRY_DELAYS": [
        float(s)
        for s in _read(
            "WEBHOOK_RETRY_DELAYS",
            "list",
            default=["5", "300", "1800", "7200", "18000", "36000", "36000"],
        )
    ],  # fmt: skip
    "WEBHOOK_DISABLE_AFTER": timedelta(
        hours=_read("WEBHOOK_DISABLE_AFTER_HOURS", "float", default=24.0)
    ),
}

if ANCHORGPU["TELEMETRY_SOURCE"] not in ("embedded", "prometheus"):
    raise ImproperlyConfigured("TELEMETRY_SOURCE must be embedded or prometheus.")
if ANCHORGPU["TELEMETRY_SOURCE"] == "prometheus" and not ANCHORGPU["PROMETHEUS"]["URL"].startswith(
    ("http://", "https://")
):
    raise ImproperlyConfigured(
        "PROMETHEUS_URL is not set: TELEMETRY_SOURCE=prometheus reads the engine's HTTP API "
        "there (http://host:9090, …/select/0/prometheus, …/prometheus)."
    )

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": _read("LOG_LEVEL", "str", default="INFO")},
    "loggers": {"httpx": {"level": "WARNING"}},
}

# Invoices and credit notes (the invoices app). The seller's details are ANCHORGPU["SELLER"].
INVOICES = {
    # The day an invoice is issued on and the year its number counts in: the seller's zone.
    "TIME_ZONE": _read("INVOICE_TIME_ZONE", "str", default="Europe/Warsaw"),
    "CREDIT_NOTE_SERIES": _read("CREDIT_NOTE_SERIES", "str", default="AG-K"),
    # Sending FA(3) e-invoices to KSeF: a separate step, off unless KSEF_ENABLED is set.
    # Nothing in the tests or the demo reaches the real KSeF (its test stand-in is local).
    "KSEF_ENABLED": _read("KSEF_ENABLED", "bool", default=False),
    "KSEF_URL": _read("KSEF_URL", "str", default="").rstrip("/"),
    "KSEF_TOKEN": _read("KSEF_TOKEN", "str", default=""),
    "KSEF_TIMEOUT": _read("KSEF_TIMEOUT_SECONDS", "float", default=10.0),
}
if INVOICES["KSEF_ENABLED"] and not INVOICES["KSEF_URL"].startswith(("http://", "https://")):
    raise ImproperlyConfigured("KSEF_URL is not set: KSEF_ENABLED sends invoices there.")

# The audit log's time is the statement's (clock_timestamp()), not the transaction's start
# (now()): the changes one transaction makes are told apart and in their order.
PGHISTORY_CREATED_AT_FUNCTION = "clock_timestamp()"
if ANCHORGPU["AUDIT_RETENTION_DAYS"] < 1:
    raise ImproperlyConfigured("AUDIT_RETENTION_DAYS must be at least 1.")
