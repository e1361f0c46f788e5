"""The decision page's live feed (DESIGN 4.5, "Live stream"): one question's state as
Server-Sent Events, so a page left open learns that the question was answered by someone
else, cancelled, expired or handed over, and disables its form.

An approver usually may not see the invocation, so the feed is the question's own,
authorized as the decision page is (`policy.may_open_question`; anyone else gets the page's 404). It
sends `event: question` once on connecting and again whenever the state (status, who
answered, the number of decisions, the assignees) changes, with `id:` a digest of that
state: `Last-Event-ID` resumes without repeating an unchanged state. It ends once the
question is no longer pending or no longer this person's to open. The loop, keep-alive,
capacity and PostgreSQL wake-up (the question's invocation's channel) are
workflows.protocols.stream's.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.contrib.admin.utils import unquote
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.utils import timezone
from django.utils.formats import date_format

from workflows.engine.status import InterruptStatus
from workflows.engine.values import is_possible_id
from workflows.models import Interrupt
from workflows.policy import answer_policy, may_open_question
from workflows.protocols import stream

from . import display
from .loading import readable_row

STATE_FIELDS = ["status", "assignees", "resolved_by_id", "invocation_id"]


@dataclass
class QuestionRead:
    """One read of the question: its state's digest (the position), and whether the
    person may still open it (known only when the state changed)."""

    position: str
    interrupt: Interrupt
    decisions: int
    more: bool = False
    open: bool = True


class QuestionReader:
    """Reads the question's row (a few columns) and counts its decisions; the full row
    and the answer policy only when that state changed."""

    def __init__(self, interrupt: Interrupt, user: Any) -> None:
        self.interrupt_id = interrupt.pk
        self.invocation_id = str(interrupt.invocation_id)
        self.user = user

    def read(self, after: str) -> QuestionRead:
        row = Interrupt.objects.only(*STATE_FIELDS).get(pk=self.interrupt_id)
        decisions = row.decisions.count()
        state = [row.status, row.assignees, row.resolved_by_id, decisions]
        digest = hashlib.sha256(json.dumps(state, default=str).encode()).hexdigest()[:16]
        read = QuestionRead(digest, row, decisions)
        if digest != after:
            chosen = Interrupt.objects.select_related("invocation", "resolved_by")
            read.interrupt = readable_row(chosen.filter(pk=self.interrupt_id)) or row
            read.open = may_open_question(self.user, read.interrupt)
        return read


def question_data(read: QuestionRead, user: Any) -> dict[str, Any]:
    """What the page shows: the state, whether `user` may still answer, and why not."""
    interrupt = read.interrupt
    pending = interrupt.status == InterruptStatus.PENDING
    answerable = pending and read.open and answer_policy().can_answer(user, interrupt)
    return {
        "status": interrupt.status,
        "resolved_by": interrupt.resolved_by and interrupt.resolved_by.get_username(),
        "resolved_at": interrupt.resolved_at,
        "decisions": read.decisions,
        "quorum": interrupt.quorum,
        "assignees": interrupt.assignees,
        "answerable": answerable,
        "message": "" if answerable else _why_not(interrupt),
    }


def _why_not(interrupt: Interrupt) -> str:
    if interrupt.status == InterruptStatus.RESOLVED:
        who = interrupt.resolved_by.get_username() if interrupt.resolved_by else "the system"
        when = interrupt.resolved_at or timezone.now()
        at = date_format(timezone.localtime(when), "DATETIME_FORMAT")
        return f"Answered meanwhile by {who}, {at}: {display.one_line(interrupt.response)}."
    if interrupt.status == InterruptStatus.CANCELLED:
        return "Cancelled meanwhile: the invocation was cancelled."
    if interrupt.status == InterruptStatus.EXPIRED:
        return "Expired meanwhile: its timeout policy applied."
    names = ", ".join(interrupt.assignees) or "others"
    return f"Handed over meanwhile to {names}: no longer yours to answer."


def _ended(read: QuestionRead) -> bool:
    return read.interrupt.status != InterruptStatus.PENDING or not read.open


def question_events(request: HttpRequest, object_id: str) -> HttpResponseBase:
    """`GET <question>/events/` beside the decision page: its live feed."""
    interrupt_id = unquote(object_id)
    interrupt = None
    if is_possible_id(interrupt_id):
        chosen = Interrupt.objects.select_related("invocation").filter(pk=interrupt_id)
        interrupt = readable_row(chosen)
    if interrupt is None or not may_open_question(request.user, interrupt):
        raise Http404(f"no interrupt {interrupt_id!r}")
    after = (request.headers.get("Last-Event-ID") or "")[:64]
    try:
        slot = stream.capacity.take()
    except stream.StreamCapacityError as exc:
        return HttpResponse(str(exc), status=503, content_type="text/plain")
    reader = QuestionReader(interrupt, request.user)
    first = [f"retry: {stream.RETRY_MILLISECONDS}\n\n"]

    def render(read: QuestionRead, position: str) -> list[str]:
        sent = [*first]
        first.clear()
        if read.position != position:
            sent.append(stream.sse(question_data(read, request.user), "question", read.position))
        if _ended(read):
            sent.append(stream.sse({"status": read.interrupt.status}, "end"))
        return sent

    follow = stream.follow_async if isinstance(request, ASGIRequest) else stream.follow
    return stream.event_stream(follow(reader, after, slot, render, _ended), slot)
