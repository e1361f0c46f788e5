"""Invocation monitor: each invocation with a picture of its graph coloured by status, its
node runs, its questions and its event timeline; a page per registered workflow with its
graph; the webhook endpoints and their delivery log; the audit trail; the grants
(remembered approvals of approval gates), with a revoke action; the notification attempts;
the delegations (out of office), with each staff user's own "Out of office" page.

Every page here only shows ("View", never "Change"), webhook endpoints aside (they are
configuration). The admin actions are the only way to change anything, each behind its own
permission, and each goes through workflows.services.

The modules below hold only admin classes; importing them registers them. What the pages
show is built in `display` (links and formatting) and `monitor` (the invocation page).
"""

from . import audit, delegations, grants, interrupts, invocations, notifications, webhooks

__all__ = [
    "audit",
    "delegations",
    "grants",
    "interrupts",
    "invocations",
    "notifications",
    "webhooks",
]
