"""Settings of the demo/dev project, driven by environment variables.

Embedded default (no services): SQLite file and Celery in eager mode.
Production: set DATABASE_URL (postgres://...) and CELERY_BROKER_URL (redis://... or amqp://...).
"""

import os
from importlib.util import find_spec
from pathlib import Path

import dj_database_url

from hitl_site.signing_key import demo_signing_key
from workflows.schedule import beat_schedule

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def installed(module: str) -> bool:
    return find_spec(module) is not None


# --- Core -------------------------------------------------------------------------------------

SECRET_KEY = os.environ.get(
    "SECRET_KEY", "django-insecure-dev-only-change-me-hitl-workflows-0123456789abcdef"
)
DEBUG = env_bool("DEBUG", True)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])

INSTALLED_APPS = [
    # Before django.contrib.admin: its admin/index.html adds the pending-approvals count.
    "approvals",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]
# The API stack is optional (the `api` extra).
INSTALLED_APPS += [
    app
    for app in (
        "rest_framework",
        "rest_framework.authtoken",
        "django_filters",
        "drf_spectacular",
        "drf_spectacular_sidecar",
    )
    if installed(app)
]
INSTALLED_APPS += [
    "workflows",
    # The decision form's JSON editor for schemas no plain field covers (static JS, no CDN).
    "django_jsonform",
    # The trigger that keeps the audit trail append-only on PostgreSQL.
    "pgtrigger",
    # The demo project itself: its workflows.py is autodiscovered, its seed_demo command found.
    "hitl_site",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "hitl_site.urls"
WSGI_APPLICATION = "hitl_site.wsgi.application"
ASGI_APPLICATION = "hitl_site.asgi.application"

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
    },
]

# --- Database ---------------------------------------------------------------------------------

DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
if DATABASE_URL:
    _db = dj_database_url.parse(DATABASE_URL)
    if _db["ENGINE"] == "django.db.backends.postgresql":
        # Web and worker processes keep a connection for a minute, pinged before reuse (a
        # worker would do both by itself: HITL["WORKER_CONN_MAX_AGE"], docs/deployment.md).
        _db["CONN_MAX_AGE"] = 60
        _db["CONN_HEALTH_CHECKS"] = True
    DATABASES = {"default": _db}
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("SQLITE_PATH") or BASE_DIR / "db.sqlite3",
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
            },
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------------------------

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# The answer rule: user.has_perm("workflows.answer_interrupt", interrupt).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "workflows.backends.AnswerPermissionBackend",
]

# --- Internationalization ---------------------------------------------------------------------

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Static files -----------------------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")

# --- Celery -----------------------------------------------------------------------------------

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "").strip()
if CELERY_BROKER_URL:
    CELERY_TASK_ALWAYS_EAGER = False
else:
    # Embedded default: tasks run in-process (after commit), no broker needed.
    CELERY_BROKER_URL = "memory://localhost/"
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True

# The queue tasks go to unless routed elsewhere (work a worker enqueues, webhook deliveries
# among it, goes there too).
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
# Publishing a run is bounded in time: a broker that is down or hung (reachable, never
# answering) costs a request a few seconds, not forever. What the request stored is safe
# either way: recover_stalled enqueues the run later. (Redis reads the socket_* keys,
# RabbitMQ the *_timeout ones; each ignores the others.)
CELERY_BROKER_CONNECTION_TIMEOUT = 3
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "socket_connect_timeout": 3,
    "socket_timeout": 3,
    "read_timeout": 3,
    "write_timeout": 3,
}
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A worker's log lines name the invocation and node path they belong to (workflows.log).
CELERY_WORKER_LOG_FORMAT = (
    "[%(asctime)s: %(levelname)s/%(processName)s] [%(invocation_id)s %(node_path)s] %(message)s"
)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_BACKEND = None
# Every periodic job of the app at its period (workflows/schedule.py says which and why).
CELERY_BEAT_SCHEDULE = beat_schedule()

# --- HITL -------------------------------------------------------------------------------------

# One settings dict for the app; every key is optional (defaults live in workflows/conf.py).
# The demo shows what the app does: receipts signed (HITL_AUDIT_SIGNING_KEY, or a key made
# on first run into AUDIT_SIGNING_KEY_FILE, ignored by git) and e-mail notifications on.
HITL = {
    "AUDIT_SIGNING_KEY": os.environ.get("HITL_AUDIT_SIGNING_KEY")
    or demo_signing_key(
        Path(os.environ.get("AUDIT_SIGNING_KEY_FILE") or BASE_DIR / "audit-signing.pem")
    ),
    "EMAIL_NOTIFICATIONS": env_bool("EMAIL_NOTIFICATIONS", True),
    # Where the e-mailed links point: the demo's server (passkeys need the name localhost).
    "EMAIL_BASE_URL": os.environ.get("EMAIL_BASE_URL")
    or f"http://localhost:{os.environ.get('PORT', '8000')}",
}

# --- E-mail -----------------------------------------------------------------------------------

# The demo prints its e-mails where it runs (make demo's terminal); set EMAIL_BACKEND (and
# Django's EMAIL_HOST etc.) to send them.
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "approvals@localhost")

# --- REST framework ---------------------------------------------------------------------------

# Token first: an unauthenticated request then gets 401 with a WWW-Authenticate header.
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": [
        "rest_framework.throttling.AnonRateThrottle",
        "rest_framework.throttling.UserRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "anon": os.environ.get("API_THROTTLE_ANON", "60/minute"),
        "user": os.environ.get("API_THROTTLE_USER", "6000/minute"),
    },
    # Proxies in front of the site that append the client's address to X-Forwarded-For;
    # 0: the client address is REMOTE_ADDR (docs/deployment.md, "Behind a proxy").
    "NUM_PROXIES": int(os.environ.get("API_NUM_PROXIES", "0")),
}

SPECTACULAR_SETTINGS = {
    "TITLE": "HITL workflows API",
    "DESCRIPTION": "Start workflows, find the questions they wait on, answer and decide.",
    "VERSION": "1",
    # Swagger UI and Redoc assets come from drf-spectacular-sidecar (no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "workflows.models.STATUS_CHOICES",
        "InterruptStatusEnum": "workflows.models.INTERRUPT_STATUS_CHOICES",
    },
}

# --- Logging ----------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Each line names its invocation and node path ("-" outside of one): workflows.log.
    "filters": {"hitl": {"()": "workflows.log.ContextFilter"}},
    "formatters": {
        "simple": {
            "format": "%(asctime)s %(levelname)s %(name)s [%(invocation_id)s %(node_path)s]: "
            "%(message)s"
        },
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "simple", "filters": ["hitl"]},
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django": {
            "handlers": ["console"],
            "level": os.environ.get("DJANGO_LOG_LEVEL", "INFO"),
            "propagate": False,
        },
    },
}
