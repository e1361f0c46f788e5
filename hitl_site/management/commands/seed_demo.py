"""Create the demo login and a few invocations waiting for approval."""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from workflows import services
from workflows.models import Interrupt, Invocation

EXPENSES = [
    {"employee": "Ada", "amount": 420.0, "purpose": "conference travel"},
    {"employee": "Grace", "amount": 89.5, "purpose": "books"},
    {"employee": "Linus", "amount": 1250.0, "purpose": "laptop"},
]


class Command(BaseCommand):
    help = "Create the demo staff login (demo/demo) and seed demo invocations."

    def handle(self, *args: Any, **options: Any) -> None:
        user_model = get_user_model()
        user, created = user_model.objects.get_or_create(
            username="demo", defaults={"is_staff": True, "is_superuser": True}
        )
        if created:
            user.set_password("demo")
            user.save()
            self.stdout.write("Created the staff login demo / demo.")
        if Invocation.objects.exists():
            self.stdout.write("Demo invocations exist already; nothing seeded.")
            return
        for expense in EXPENSES:
            services.start("expense_approval", expense, user=user)
        services.start("document_signoff", {"title": "Supplier contract"}, user=user)
        # One finished example, answered through the same path as the admin and the API.
        finished = services.start(
            "expense_approval", {"employee": "Ken", "amount": 42.0}, user=user
        )
        question = Interrupt.objects.get(invocation=finished)
        services.submit_function_responses(
            [{"id": question.id, "name": "manager_approval", "response": {"approved": True}}],
            actor=user,
        )
        waiting = Interrupt.objects.filter(status="pending").count()
        self.stdout.write(
            self.style.SUCCESS(f"Seeded 5 invocations; {waiting} questions wait for an answer.")
        )
