"""Settings of the library tests' own project: the apps the library needs and its documented
settings, tasks run in-process on commit, the test workflows of tests/project/workflows.py.

The database comes from DATABASE_URL (SQLite without it). When that is PostgreSQL an extra
in-memory SQLite alias lets the store tests (tests/engine's `store_backend`) run on both
backends in one session (STORE_DATABASES lists the aliases they run on).
"""

import os
from importlib.util import find_spec

import dj_database_url

from workflows.schedule import beat_schedule

SECRET_KEY = "django-insecure-tests-only-0123456789abcdefghijklmnopqrstuvwxyz"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

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
# The API stack is the optional `api` extra.
INSTALLED_APPS += [
    app
    for app in (
        "rest_framework",
        "rest_framework.authtoken",
        "django_filters",
        "drf_spectacular",
        "drf_spectacular_sidecar",
    )
    if find_spec(app) is not None
]
# django_jsonform is a dependency of the app (the decision form's JSON editor); pgtrigger
# installs the trigger that keeps the audit trail append-only on PostgreSQL.
INSTALLED_APPS += ["workflows", "django_jsonform", "pgtrigger"]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "tests.project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
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
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["CONN_MAX_AGE"] = 60
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": ":memory:",
            # WAL and immediate transactions, as docs/embedding.md recommends.
            "OPTIONS": {
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
            },
        }
    }

POSTGRES_CONFIGURED = DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql"
if POSTGRES_CONFIGURED:
    DATABASES["sqlite"] = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}
    STORE_DATABASES = ["sqlite", "default"]
else:
    STORE_DATABASES = ["default"]

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Auth -------------------------------------------------------------------------------------

# The answer rule: user.has_perm("workflows.answer_interrupt", interrupt).
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "workflows.backends.AnswerPermissionBackend",
]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"

# --- Celery -----------------------------------------------------------------------------------

# Tasks run in-process right after the transaction that enqueued them commits; the tests
# that need a real broker switch the app over (tests/integration/worker.py), and the worker
# processes they start use tests/project/worker_settings.py.
CELERY_TASK_ALWAYS_EAGER = True
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_URL = "memory://localhost/"

# The rest as docs/embedding.md documents it.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
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

HITL = {"WORKFLOW_MODULES": ["tests.project.workflows"]}

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
    "DEFAULT_THROTTLE_RATES": {"anon": "60/minute", "user": "6000/minute"},
}

SPECTACULAR_SETTINGS = {
    "TITLE": "HITL workflows API",
    "DESCRIPTION": "Start workflows, find the questions they wait on, answer and decide.",
    "VERSION": "1",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "workflows.models.STATUS_CHOICES",
        "InterruptStatusEnum": "workflows.models.INTERRUPT_STATUS_CHOICES",
    },
}
