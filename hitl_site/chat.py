"""The demo's example agent chat (`/chat/`): a page that drives `expense_approval` through
the AG-UI endpoint (`POST api/agui/expense_approval/`) as a chat UI would, pausing on the
manager's question and going on with the answer typed there (docs/agents.md)."""

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

WORKFLOW = "expense_approval"


@staff_member_required
def chat(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),  # the admin's header and sidebar around it
        "title": "Agent chat (AG-UI)",
        "endpoint": reverse("workflows-api:agui-run", args=[WORKFLOW]),
        "workflow": WORKFLOW,
        "may_start": request.user.has_perm("workflows.add_invocation"),
    }
    return render(request, "hitl_site/chat.html", context)
