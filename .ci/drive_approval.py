# Run by .ci/wheel-check through `manage.py shell -c` in the project docs/embedding.md
# builds: one approval to completion through the public services, eager or with a worker.
import time

from django.contrib.auth import get_user_model

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


approver, _ = get_user_model().objects.get_or_create(username="approver", is_superuser=True)
invocation = services.start("expense_approval", {"employee": "ana", "amount": 120}, user=approver)
wait_for(invocation, "WAITING")
question = Interrupt.objects.get(invocation=invocation, status="pending")
services.submit_function_responses(
    [{"id": question.id, "name": "ask_manager", "response": {"approved": True}}],
    actor=approver,
)
finished = wait_for(invocation, "COMPLETED")
assert finished.output == {"employee": "ana", "amount": 120, "status": "paid"}, finished.output
question.refresh_from_db()
assert question.resolved_by == approver, question.resolved_by
print(f"wheel-check: invocation {invocation.pk} COMPLETED: {finished.output}")
