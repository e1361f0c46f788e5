"""Demo data for `make demo`: five logins and invocations of the demo workflows, some
waiting for an answer, some answered, some escalated, so the inbox and the monitor
have something to show. Ada is away until Friday; approver2 stands in for her (out of
office), so approver2 finds the review handed to Ada in their inbox, answered "for Ada".

A command of the demo project, not of the reusable app: it creates users with known
passwords, which no real project should get by installing `workflows`.
"""

from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from hitl_site.decision_history import seed_decision_history
from hitl_site.workflows import DIRECTORS, EDITORS, FINANCE, MANAGERS, MODERATORS, SUPPORT
from workflows import services
from workflows.models import Interrupt, Invocation
from workflows.services import grants

# username, password, superuser. Two staff approvers, so a quorum of two can be tried with
# two logins (in two browsers, or one of them in a private window).
LOGINS = [
    ("approver", "approver", False),
    ("approver2", "approver2", False),
    ("ada", "ada", False),  # away, with approver2 standing in
    ("admin", "admin", True),
    ("director", "director", False),
]
FRIDAY = 4  # date.weekday()
GROUPS = [name.removeprefix("group:") for name in (MANAGERS, FINANCE, MODERATORS, EDITORS, SUPPORT)]
# The directors answer a manager's question once its ladder hands it over: the director
# login only, and admin (in every group).
LOGIN_GROUPS = {
    "director": [DIRECTORS.removeprefix("group:")],
    "admin": [*GROUPS, DIRECTORS.removeprefix("group:")],
}
# Managers' questions made as if asked earlier (a demo has no past), so that their ladders
# have steps due: Ada's reminded, Margaret's reminded and then handed to the directors.
ASKED_EARLIER = {"Ada": timedelta(hours=5), "Margaret": timedelta(hours=25)}
# What a staff approver needs besides its groups: the inbox, the monitor (read-only), and
# changing an answer already given (DESIGN 3.8) where they may answer the question.
APPROVER_PERMISSIONS = [
    "workflows.answer_interrupt",
    "workflows.rewind_interrupt",
    "workflows.view_invocation",
    "workflows.view_interrupt",
    "workflows.view_decision",
]

EXPENSES = [
    {"employee": "Ada", "amount": 420.0, "purpose": "conference travel"},
    {"employee": "Grace", "amount": 89.5, "purpose": "books"},  # approved without asking
    {"employee": "Linus", "amount": 2500.0, "purpose": "laptop"},  # manager and finance
    {"employee": "Margaret", "amount": 640.0, "purpose": "team dinner"},
    {"employee": "Katherine", "amount": 1800.0, "purpose": "conference abroad"},  # no vote yet
]
REJECTED_EXPENSE = {"employee": "Alan", "amount": 300.0, "purpose": "taxi"}
# Rejected, then the answer changed (DESIGN 3.8): its monitor shows the history.
REWOUND_EXPENSE = {"employee": "Barbara", "amount": 260.0, "purpose": "train tickets"}
POSTS = [
    "Our new office opens on Monday!",
    "BUY CHEAP WATCHES http://spam.example",
    "Photos from the team offsite",
    "Does anyone have the slides from Friday?",
]
# Support tickets the agent works: a refund over the standing grant's limit (rejected once,
# with a reason, so its revised proposal waits), a small refund that passes on the grant
# (its e-mail to the customer waits, editable), an account closure (two approvers).
TICKETS = [
    {
        "id": "T-101",
        "issue": "damaged",
        "customer": "Ada",
        "email": "ada@example.com",
        "order": "A-17",
        "amount": 80,
    },
    {
        "id": "T-102",
        "issue": "damaged",
        "customer": "Grace",
        "email": "grace@example.com",
        "order": "G-3",
        "amount": 30,
    },
    {"id": "T-103", "issue": "close_account", "customer": "Linus", "email": "linus@example.com"},
]
REFUND_PIN = {"properties": {"amount": {"maximum": 50}}}  # refunds up to 50 pass
DOCUMENTS = [
    {"title": "Supplier contract", "brief": "terms for the new supplier"},
    {"title": "Holiday policy", "brief": "how leave is requested and approved"},
    # Its review is answered only with a passkey's signature (require_signature).
    {"title": "Data processing agreement", "brief": "what may be done with data", "signed": True},
]


def permission(dotted: str) -> Permission:
    app_label, codename = dotted.split(".")
    try:
        return Permission.objects.get(content_type__app_label=app_label, codename=codename)
    except Permission.DoesNotExist:
        raise CommandError(f"permission {dotted} does not exist: run migrate first") from None


class Command(BaseCommand):
    help = (
        "Create the demo logins (approver/approver and approver2/approver2: staff, not "
        "superusers; ada/ada; director/director; admin/admin) and seed invocations of the "
        "demo workflows."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        users = self.logins()
        if Invocation.objects.exists():
            self.stdout.write("Demo invocations exist already; nothing seeded.")
        else:
            self.seed(users["admin"])
            seed_decision_history(users)  # for the approvals dashboard
        self.addresses(users)
        waiting = Interrupt.objects.filter(status="pending").count()
        self.stdout.write(
            self.style.SUCCESS(
                f"{Invocation.objects.count()} invocations; {waiting} questions wait for an "
                "answer.\nLogins:\n"
                "  approver / approver and approver2 / approver2: staff approvers, not "
                "superusers (groups managers, finance, moderators, editors, support)\n"
                "  ada / ada: away until Friday; approver2 stands in for her\n"
                "  director / director: group directors (escalated questions)\n"
                "  admin / admin: superuser"
            )
        )

    @staticmethod
    def addresses(users: dict[str, Any]) -> None:
        """Give each login an e-mail address, after the seed: its questions mailed nobody,
        what happens from now on is mailed (to the console, in the demo's settings)."""
        for username, user in users.items():
            if not user.email:
                user.email = f"{username}@example.com"
                user.save(update_fields=["email"])

    @transaction.atomic
    def logins(self) -> dict[str, Any]:
        names = {*GROUPS, *(name for listed in LOGIN_GROUPS.values() for name in listed)}
        groups = {name: Group.objects.get_or_create(name=name)[0] for name in names}
        granted = [permission(name) for name in APPROVER_PERMISSIONS]
        users = {}
        for username, password, superuser in LOGINS:
            user, created = get_user_model().objects.get_or_create(
                username=username,
                defaults={
                    "is_staff": True,
                    "is_superuser": superuser,
                    "first_name": username.capitalize() if username == "ada" else "",
                },
            )
            if created:
                user.set_password(password)
                user.save()
                self.stdout.write(f"Created the login {username} / {password}.")
            # Assignees bind superusers too: admin is in every demo group.
            user.groups.add(*(groups[name] for name in LOGIN_GROUPS.get(username, GROUPS)))
            if not superuser:
                user.user_permissions.add(*granted)
            users[username] = user
        return users

    def seed(self, admin: Any) -> None:
        """Everything through workflows.services, as the admin, the API and workers do."""
        for expense in EXPENSES:
            services.start("expense_approval", expense, user=admin)
        for employee, earlier in ASKED_EARLIER.items():
            self.asked_earlier(employee, earlier)
        services.escalate_interrupts()  # what beat would have applied by now
        large = Invocation.objects.get(input__employee="Linus")
        self.decide(large, "finance_approval", {"approved": True}, admin, "budgeted in Q3")

        rejected = services.start("expense_approval", REJECTED_EXPENSE, user=admin)
        self.decide(rejected, "manager_approval", {"approved": False}, admin, "no receipt")

        self.rewound(admin)

        moderation = services.start("content_moderation", {"posts": POSTS}, user=admin)
        first_post = moderation.interrupts.order_by("path").first()
        services.decide(first_post.id, {"decision": "publish"}, actor=admin)

        revised, *_ = [services.start("document_drafting", d, user=admin) for d in DOCUMENTS]
        self.decide(revised, "review", {"approved": False}, admin, "add the termination clause")

        grants.create_grant("support_agent", "refund", "always", actor=admin, pins=REFUND_PIN)
        tickets = [services.start("support_agent", ticket, user=admin) for ticket in TICKETS]
        refund = tickets[0].interrupts.get(status="pending")
        reason = "at most 70 without a photo of the damage"
        services.decide(refund.id, {"decision": "reject", "reason": reason}, actor=admin)
        self.away(admin)

    def rewound(self, admin: Any) -> None:
        """An expense rejected for a missing receipt, then the answer changed once the
        receipt turned up: the rejection's steps stay, greyed, and the reimbursement ran."""
        expense = services.start("expense_approval", REWOUND_EXPENSE, user=admin)
        self.decide(expense, "manager_approval", {"approved": False}, admin, "no receipt")
        question = expense.interrupts.get(path__contains="/manager_approval@")
        comment = "receipt found in the shared inbox"
        answer = {"approved": True, "comment": comment}
        services.rewind(question.id, answer, actor=admin, comment=comment)

    @staticmethod
    def away(admin: Any) -> None:
        """Ada is out of office until Friday evening, approver2 standing in; the holiday
        policy's review is handed to her, so approver2 answers it for her."""
        users = get_user_model().objects
        ada, approver2 = users.get(username="ada"), users.get(username="approver2")
        now = timezone.localtime()
        days = (FRIDAY - now.weekday()) % 7 or 7
        friday = (now + timedelta(days=days)).replace(hour=18, minute=0, second=0, microsecond=0)
        services.delegate(ada, approver2, now - timedelta(hours=1), friday, actor=admin)
        review = Interrupt.objects.get(status="pending", invocation__input__title="Holiday policy")
        services.reassign(review.id, ["user:ada"], actor=admin)

    @staticmethod
    def asked_earlier(employee: str, earlier: timedelta) -> None:
        """Move the times of the employee's pending manager question back by `earlier`."""
        Interrupt.objects.filter(
            invocation__input__employee=employee, status="pending", path__contains="/manager_"
        ).update(
            created_at=F("created_at") - earlier,
            deadline=F("deadline") - earlier,
            due_at=F("due_at") - earlier,
            next_escalation_at=F("next_escalation_at") - earlier,
        )

    @staticmethod
    def decide(invocation: Invocation, node: str, response: dict, actor: Any, comment: str) -> None:
        question = invocation.interrupts.get(status="pending", path__contains=f"/{node}@")
        services.decide(question.id, {**response, "comment": comment}, actor=actor, comment=comment)
