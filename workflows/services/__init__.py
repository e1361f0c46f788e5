"""THE write path: every state change from the outside (API, admin, protocols, Celery,
management commands) goes through a name re-exported here, the only import path callers
use. One module per concept; each change is one transaction (`workflows.transactions`),
Celery work is enqueued on commit (`workflows.dispatch`), bad input raises a named error
and changes nothing, and who may do it is asked of `workflows.policy`."""

from ..dispatch import enqueue_run
from ..sessions import open_session
from ..transactions import store
from ..worker import execute, fail
from . import grants, passkeys
from .claims import claim, reassign, release
from .decisions import decide, signing_challenge
from .delegations import announce_delegations, delegate, end_delegation
from .grants import create_grant, revoke_grant
from .invocations import cancel, retry, start, submit_function_responses
from .passkeys import PasskeyError, SignatureRefused, issue_challenge, register, remove
from .rewinds import plan_rewind, reopen, rewind
from .sweeps import escalate_interrupts, expire_overdue_interrupts, recover_stalled

__all__ = [
    "PasskeyError",
    "SignatureRefused",
    "announce_delegations",
    "cancel",
    "claim",
    "create_grant",
    "decide",
    "delegate",
    "end_delegation",
    "enqueue_run",
    "escalate_interrupts",
    "execute",
    "expire_overdue_interrupts",
    "fail",
    "grants",
    "issue_challenge",
    "open_session",
    "passkeys",
    "plan_rewind",
    "reassign",
    "recover_stalled",
    "register",
    "release",
    "remove",
    "reopen",
    "retry",
    "revoke_grant",
    "rewind",
    "signing_challenge",
    "start",
    "store",
    "submit_function_responses",
]
