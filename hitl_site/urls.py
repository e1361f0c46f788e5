"""URLs of the demo/dev project."""

from importlib.util import find_spec

from django.contrib import admin
from django.http import HttpResponse
from django.urls import include, path
from django.views.generic import RedirectView


def _module_exists(name: str) -> bool:
    try:
        return find_spec(name) is not None
    except ModuleNotFoundError:
        return False


urlpatterns = [
    # The demo's front door is the staff inbox (the login page first, when logged out).
    path("", RedirectView.as_view(pattern_name="admin:approvals_pendingapproval_changelist")),
    path("admin/", admin.site.urls),
    # The approvals app's pages outside admin (e-mailed decision links).
    path("approvals/", include("approvals.urls")),
    # Browsers ask every page for one; the demo has none: "no content", not a 404 logged in
    # the browser's console on every page.
    path("favicon.ico", lambda request: HttpResponse(status=204)),
]

# The DRF API is optional: mounted only when DRF and the api package are both installed.
if _module_exists("rest_framework") and _module_exists("workflows.api.urls"):
    from hitl_site.chat import chat

    urlpatterns.append(path("api/", include("workflows.api.urls")))
    # An agent chat on the API's AG-UI endpoint, as an example (docs/agents.md).
    urlpatterns.append(path("chat/", chat, name="chat"))
