"""Signed, expiring approve/reject links for the notifiers (django.core.signing).

A link names one interrupt, one user and one decision; a link for a shared channel
names no user (whoever opens it logs in, and must be allowed to answer). It expires after
HITL["EMAIL_LINK_MAX_AGE"] seconds; it is single-use because a person decides once
(the Decision's uniqueness) and an answered interrupt is no longer pending. Opening it
(GET) only shows a confirmation page; the POST from that page decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.admin.utils import quote
from django.core import signing
from django.urls import reverse

from workflows.conf import hitl_settings
from workflows.models import Interrupt

from .forms import ApprovalForm, is_approval

SALT = "approvals.email-decision"
DECISIONS = ("approve", "reject")


@dataclass(frozen=True)
class DecisionLink:
    interrupt_id: str
    # The user's primary key (in a token always as text: a UUID is no JSON); None: anyone
    # allowed to answer (a link posted to a shared channel).
    user_id: Any
    decision: str  # "approve" or "reject"

    def is_for(self, user: Any) -> bool:
        """Whether the link was made for `user`, whatever the type of the primary key."""
        return self.user_id is None or str(user.pk) == str(self.user_id)


def make_token(link: DecisionLink) -> str:
    user = None if link.user_id is None else str(link.user_id)
    payload = {"i": link.interrupt_id, "u": user, "d": link.decision}
    return signing.TimestampSigner(salt=SALT).sign_object(payload, compress=True)


def read_token(token: str) -> DecisionLink:
    """The link a token stands for; signing.SignatureExpired or signing.BadSignature
    when it is too old or was not made here."""
    payload = signing.TimestampSigner(salt=SALT).unsign_object(
        token, max_age=hitl_settings.EMAIL_LINK_MAX_AGE
    )
    if not isinstance(payload, dict) or payload.get("d") not in DECISIONS:
        raise signing.BadSignature("not a decision link")
    return DecisionLink(payload["i"], payload.get("u"), payload["d"])


def absolute_url(link: DecisionLink) -> str:
    path = reverse("approvals:email-decision", args=[make_token(link)])
    return hitl_settings.EMAIL_BASE_URL.rstrip("/") + path


def page_url(interrupt: Interrupt) -> str:
    """The question's page in the approvals inbox, where it is answered in full."""
    path = reverse("admin:approvals_pendingapproval_change", args=[quote(interrupt.pk)])
    return hitl_settings.EMAIL_BASE_URL.rstrip("/") + path


def answerable_by_link(interrupt: Interrupt) -> bool:
    """A yes/no question whose form asks nothing else that is required, and no passkey's
    signature (given on the question's own page)."""
    if interrupt.require_signature or not is_approval(interrupt.response_schema):
        return False
    form = ApprovalForm(interrupt.response_schema)
    return not any(f.required for name, f in form.fields.items() if name != "decision")


def decision_urls(interrupt: Interrupt, user_id: Any) -> dict[str, str]:
    """The approve and reject links of the question for `user_id` (None: for anyone who
    may answer), by decision; none when the question needs more than a yes or a no."""
    if not answerable_by_link(interrupt):
        return {}
    return {d: absolute_url(DecisionLink(interrupt.pk, user_id, d)) for d in DECISIONS}
