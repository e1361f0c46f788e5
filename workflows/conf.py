"""The `HITL = {...}` settings dict, read through one object with defaults."""

from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.utils.module_loading import import_string

DEFAULTS: dict[str, Any] = {
    # Extra modules to import for workflow definitions (besides each app's workflows.py).
    "WORKFLOW_MODULES": [],
    # Seconds an execution lease lasts. A heartbeat renews it every third of that while a
    # node body runs, so a body may take longer; a dead worker's invocation is taken over
    # by another worker about this long after it died.
    "LEASE_SECONDS": 6,
    # Runs that never finish (they die holding the execution lease, which a later delivery
    # takes over once it expires) before the invocation is failed: a poison message that
    # kills its worker cannot loop forever.
    "MAX_DELIVERIES": 5,
    # PostgreSQL: run the store's own statements (each node transition, the lease, the
    # checkpoint reads) as prepared statements with server-side binding, so the server
    # parses and plans each once per connection. Off by default: PgBouncer in transaction
    # pooling mode supports prepared statements only from version 1.21 with
    # max_prepared_statements set, and a worker must restart after a migration changes
    # the tables. See docs/performance.md for what it saves.
    "POSTGRES_PREPARED_STATEMENTS": False,
    # When a node's transition is durable on PostgreSQL (docs/performance.md,
    # "Durability"): "sync", on disk before the next node's body starts; "async", a
    # transition in the middle of a pass commits without waiting for the disk (its
    # transaction's synchronous_commit off), and the next durable commit (an effect, a
    # question, an answer, the pass's end) flushes it with all before it. A server crash
    # may lose the transitions since then: those nodes run again, as after a worker crash.
    "DURABILITY": "sync",
    # Seconds a Celery worker keeps a database connection between tasks when the
    # database's CONN_MAX_AGE is Django's default 0 (a kept connection is pinged before
    # each task's first query; see workflows/worker/connections.py). 0: Celery's default,
    # a new connection for every task, several times slower on PostgreSQL.
    "WORKER_CONN_MAX_AGE": 60,
    # Seconds after which an unleased PENDING/RUNNING invocation counts as stalled.
    "STALLED_AFTER_SECONDS": 30,
    # Largest answer accepted, in bytes of its JSON (larger: PayloadTooLargeError).
    "MAX_RESPONSE_BYTES": 1_000_000,
    # Largest value stored, in bytes of its JSON: an invocation's input, a node's output,
    # an interrupt's payload. A node whose output is larger fails with a clear error.
    "MAX_VALUE_BYTES": 4_000_000,
    # Deepest nesting of lists and objects in such a value or an answer: deeper ones are
    # refused where they enter (a node producing one fails), before anything walks them.
    "MAX_VALUE_DEPTH": 64,
    # Seconds of silence after which `hitl_status` reports a Celery worker or the periodic
    # jobs as down; a worker records its heartbeat at most every quarter of this.
    "HEARTBEAT_STALE_SECONDS": 120,
    # Seconds the API keeps an `Idempotency-Key` and the response it answered: a repeat
    # within that time gets the stored response instead of doing the work again.
    "IDEMPOTENCY_KEY_TTL": 24 * 3600,
    # Requests per client address to the API's token endpoint (username and password in
    # exchange for a token), in DRF's rate format: what bounds password guessing.
    "TOKEN_THROTTLE_RATE": "10/min",
    # Webhook deliveries: attempts per message (the first one included), the delay before
    # the first retry (doubling after each failure, capped at WEBHOOK_MAX_BACKOFF), and how
    # long one attempt may take.
    "WEBHOOK_MAX_ATTEMPTS": 8,
    "WEBHOOK_BACKOFF_SECONDS": 10,
    "WEBHOOK_MAX_BACKOFF_SECONDS": 3600,
    "WEBHOOK_TIMEOUT_SECONDS": 10,
    # Seconds a process remembers that no webhook endpoint is active (no query per event
    # meanwhile); an endpoint added in another process gets events after at most this.
    "WEBHOOK_ENDPOINTS_CACHE_SECONDS": 5,
    # Who may answer an interrupt: dotted path of a policy class with
    # can_answer(user, interrupt) and answerable(user, queryset); see workflows/policy/answers.py.
    "ANSWER_POLICY": "workflows.policy.AssigneePolicy",
    # The inbox (DESIGN 4.3): a question is "due soon" when its due date is less than this
    # many seconds away; the counts on the admin index and the inbox's page count stop at
    # this many rows ("1,000+"), so they cost the same on a table of any size.
    "DUE_SOON_SECONDS": 4 * 3600,
    "INBOX_COUNT_LIMIT": 1000,
    # Who is told when a question opens, is reminded, escalated, delegated or decided:
    # dotted paths of notifier classes (see workflows/notifications.py), each
    # called from a Celery task after the commit, retried with a backoff.
    "NOTIFIERS": ["approvals.notifiers.email.EmailNotifier"],
    # Calls of one notifier for one event (the first included), and the delay before the
    # first retry (doubling after each failure).
    "NOTIFY_MAX_ATTEMPTS": 4,
    "NOTIFY_BACKOFF_SECONDS": 30,
    # The e-mail notifier: e-mail the assignees, with signed approve/reject links.
    "EMAIL_NOTIFICATIONS": False,
    # Scheme and host the links in those e-mails point to, e.g. "https://ops.example.com".
    "EMAIL_BASE_URL": "",
    # Seconds an e-mailed approve/reject link stays valid.
    "EMAIL_LINK_MAX_AGE": 3 * 24 * 3600,
    # The Slack notifier (approvals.notifiers.slack.SlackNotifier): {"TOKEN": the bot
    # token, "CHANNEL": where questions go whose assignees USERS does not map, "USERS":
    # {"user:ada": "U123", "group:finance": "C456"}, "BASE_URL": the Web API's root}.
    "SLACK": {},
    # The Ed25519 private key (PEM text, PKCS#8) that signs audit receipts and checkpoints.
    "AUDIT_SIGNING_KEY": None,
    # Where the periodic jobs write a signed checkpoint of the audit chains' heads (a file
    # path, strftime codes allowed: "/var/audit/checkpoint-%Y%m%dT%H%M%SZ.json"); None: off.
    "AUDIT_CHECKPOINT_PATH": None,
    # Seconds between those checkpoints when `hitl_periodic` runs the jobs (beat follows
    # its own schedule).
    "AUDIT_CHECKPOINT_SECONDS": 3600,
    # Passkeys that sign decisions (WebAuthn). The relying party's id (a domain: the
    # site's host or a parent of it), the origin pages sign on ("https://ops.example.com")
    # and the name authenticators show. Empty: the host and origin of the page a passkey
    # is registered on (its assertions are then checked against those), and the RP id.
    "WEBAUTHN_RP_ID": "",
    "WEBAUTHN_ORIGIN": "",
    "WEBAUTHN_RP_NAME": "",
    # Seconds a signing challenge's server nonce stays usable (once) by a decision.
    "PASSKEY_CHALLENGE_SECONDS": 300,
    # Adding a passkey: a login at most this many minutes old (else sign in again), and
    # at most PASSKEY_PASSWORD_ATTEMPTS wrong passwords per person in that many minutes.
    "PASSKEY_RECENT_LOGIN_MINUTES": 15,
    "PASSKEY_PASSWORD_ATTEMPTS": 5,
    # The approvals dashboard (docs/people.md, "Dashboard") reads at most this many of the
    # period's decisions, the latest first (the page says so when it stops there).
    "DASHBOARD_MAX_DECISIONS": 50_000,
    # The rubber-stamp flag: an approver who, over at least RUBBER_STAMP_MIN_DECISIONS
    # votes (approve or reject) in the period, approved at least RUBBER_STAMP_APPROVAL_RATE
    # of them (a fraction) with a median time to decide under RUBBER_STAMP_MEDIAN_SECONDS.
    "RUBBER_STAMP_MIN_DECISIONS": 20,
    "RUBBER_STAMP_APPROVAL_RATE": 0.95,
    "RUBBER_STAMP_MEDIAN_SECONDS": 10,
    # The most a grant may be given (docs/gates.md): seconds it stays live (ttl_seconds)
    # and dispatches it lets pass (uses_left). Larger ones are refused where they are
    # asked for: a decision's ResponseValidationError, the API's 400 (invalid_grant).
    "GRANT_MAX_TTL": 365 * 24 * 3600,
    "GRANT_MAX_USES": 10_000,
    # The live stream (docs/agents.md): open streams one process serves (the next is
    # refused with 503 before it takes a database connection), the keep-alive comment's
    # period (proxies close a silent connection), and how often a stream re-reads where
    # nothing wakes it (SQLite, a WSGI server).
    "STREAM_MAX_CLIENTS": 1000,
    "STREAM_KEEPALIVE_SECONDS": 15,
    "STREAM_POLL_SECONDS": 0.5,
}


# The settings that take one of a few words.
CHOICES: dict[str, tuple[str, ...]] = {"DURABILITY": ("sync", "async")}

# The settings that name a class (or a list of classes) by dotted path: read as the
# class itself, imported on first use and kept until the settings change.
IMPORT_STRINGS = frozenset({"ANSWER_POLICY", "NOTIFIERS"})


def perform_import(value: Any, name: str) -> Any:
    """The object a dotted-path setting names, or the list of them a list names (a value
    that is not a string as it is); ImportError naming the setting when one cannot be
    imported."""
    if isinstance(value, list | tuple):
        return [perform_import(item, name) for item in value]
    if not isinstance(value, str):
        return value
    try:
        return import_string(value)
    except ImportError as exc:
        raise ImportError(f'HITL["{name}"] cannot be imported: {exc}') from exc


class HitlSettings:
    """Attribute access to HITL settings: `hitl_settings.LEASE_SECONDS`; the classes that
    IMPORT_STRINGS settings name, imported: `hitl_settings.ANSWER_POLICY`."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"unknown HITL setting {name!r}")
        value = getattr(settings, "HITL", {}).get(name, DEFAULTS[name])
        if name in IMPORT_STRINGS:
            value = perform_import(value, name)
        self.__dict__[name] = value
        return value

    def reload(self) -> None:
        self.__dict__.clear()


hitl_settings = HitlSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "HITL":
        hitl_settings.reload()


setting_changed.connect(_reload)
