"""The actions an audit entry records (plain strings: receipts name them offline)."""

INVOCATION_STARTED = "invocation.started"
ANSWER_ACCEPTED = "answer.accepted"
DECISION_RECORDED = "decision.recorded"
INTERRUPT_CLAIMED = "interrupt.claimed"
INTERRUPT_RELEASED = "interrupt.released"
INTERRUPT_REASSIGNED = "interrupt.reassigned"
INTERRUPT_ESCALATED = "interrupt.escalated"
INTERRUPT_REMINDED = "interrupt.reminded"
INTERRUPT_EXPIRED = "interrupt.expired"
INVOCATION_CANCELLED = "invocation.cancelled"
INVOCATION_RETRIED = "invocation.retried"
ANSWER_REWOUND = "answer.rewound"
INTERRUPT_SUPERSEDED = "interrupt.superseded"
INTERRUPT_REOPENED = "interrupt.reopened"
GRANT_CREATED = "grant.created"
GRANT_USED = "grant.used"
GRANT_REVOKED = "grant.revoked"
DELEGATION_CREATED = "delegation.created"
DELEGATION_ENDED = "delegation.ended"

ACTIONS = (
    INVOCATION_STARTED,
    ANSWER_ACCEPTED,
    DECISION_RECORDED,
    INTERRUPT_CLAIMED,
    INTERRUPT_RELEASED,
    INTERRUPT_REASSIGNED,
    INTERRUPT_ESCALATED,
    INTERRUPT_REMINDED,
    INTERRUPT_EXPIRED,
    INVOCATION_CANCELLED,
    INVOCATION_RETRIED,
    ANSWER_REWOUND,
    INTERRUPT_SUPERSEDED,
    INTERRUPT_REOPENED,
    GRANT_CREATED,
    GRANT_USED,
    GRANT_REVOKED,
    DELEGATION_CREATED,
    DELEGATION_ENDED,
)
