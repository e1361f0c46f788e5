"""Signed, expiring approve/reject links for e-mail (django.core.signing).

A link names one interrupt, one user and one decision. It expires after
HITL["EMAIL_LINK_MAX_AGE"] seconds; it is single-use because a person decides once
(the Decision's uniqueness) and an answered interrupt is no longer pending. Opening it
(GET) only shows a confirmation page; the POST from that page decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core import signing
from django.urls import reverse

from workflows.conf import hitl_settings

SALT = "approvals.email-decision"
DECISIONS = ("approve", "reject")


@dataclass(frozen=True)
class DecisionLink:
    interrupt_id: str
    user_id: Any  # the user's primary key; in a token always as text (a UUID is no JSON)
    decision: str  # "approve" or "reject"

    def is_for(self, user: Any) -> bool:
        """Whether the link was made for `user`, whatever the type of the primary key."""
        return str(user.pk) == str(self.user_id)


def make_token(link: DecisionLink) -> str:
    payload = {"i": link.interrupt_id, "u": str(link.user_id), "d": link.decision}
    return signing.TimestampSigner(salt=SALT).sign_object(payload, compress=True)


def read_token(token: str) -> DecisionLink:
    """The link a token stands for; signing.SignatureExpired or signing.BadSignature
    when it is too old or was not made here."""
    payload = signing.TimestampSigner(salt=SALT).unsign_object(
        token, max_age=hitl_settings.EMAIL_LINK_MAX_AGE
    )
    if not isinstance(payload, dict) or payload.get("d") not in DECISIONS:
        raise signing.BadSignature("not a decision link")
    return DecisionLink(payload["i"], payload["u"], payload["d"])


def absolute_url(link: DecisionLink) -> str:
    path = reverse("approvals:email-decision", args=[make_token(link)])
    return hitl_settings.EMAIL_BASE_URL.rstrip("/") + path
