# Run by .ci/wheel-check through `manage.py shell -c` in the project docs/embedding.md
# builds: one approval to completion through the public services, eager or with a worker;
# on the way, the admin pages the installed wheel's templates draw.
import time

from django.contrib.admin.utils import quote
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from django.urls import reverse

from workflows import services
from workflows.models import Interrupt, Invocation


def wait_for(invocation, status, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        current = Invocation.objects.get(pk=invocation.pk)
        if current.status == status:
            return current
        if time.monotonic() > deadline:
            raise SystemExit(
                f"invocation {invocation.pk} is {current.status} after {timeout:.0f} s, not "
                f"{status}; error: {current.error or '-'}"
            )
        time.sleep(0.05)


approver, _ = get_user_model().objects.get_or_create(
    username="approver", is_staff=True, is_superuser=True
)
invocation = services.start("expense_approval", {"employee": "ana", "amount": 120}, user=approver)
wait_for(invocation, "WAITING")
question = Interrupt.objects.get(invocation=invocation, status="pending")

setup_test_environment()  # the test client's host name is allowed
browser = Client()
browser.force_login(approver)
# Each page, and what it must show: the inbox count comes from approvals' admin/index.html.
pages = {
    reverse("admin:index"): "Pending approvals: 1",
    reverse("admin:approvals_pendingapproval_changelist"): question.message,
    reverse("admin:approvals_pendingapproval_change", args=[quote(question.id)]): question.message,
    reverse("admin:workflows_invocation_change", args=[invocation.pk]): question.message,
}
for url, expected in pages.items():
    page = browser.get(url)
    assert page.status_code == 200, f"{url} answered {page.status_code}"
    assert expected in page.content.decode(), f"{url} does not show {expected!r}"
services.submit_function_responses(
    [{"id": question.id, "name": "ask_manager", "response": {"approved": True}}],
    actor=approver,
)
finished = wait_for(invocation, "COMPLETED")
assert finished.output == {"employee": "ana", "amount": 120, "status": "paid"}, finished.output
question.refresh_from_db()
assert question.resolved_by == approver, question.resolved_by
print(f"wheel-check: invocation {invocation.pk} COMPLETED: {finished.output}")
