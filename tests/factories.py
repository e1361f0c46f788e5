"""factory_boy factories for the models tests create directly."""

import factory
from django.contrib.auth import get_user_model


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw")


class StaffFactory(UserFactory):
    is_staff = True
    is_superuser = True


def grant_answer(user, *codenames: str):
    """Give `user` the workflows permissions named (default: answer_interrupt)."""
    from django.contrib.auth.models import Permission

    for codename in codenames or ("answer_interrupt",):
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label="workflows", codename=codename)
        )
    return type(user).objects.get(pk=user.pk)  # a fresh object: no stale permission cache


class ApproverFactory(UserFactory):
    """A staff user who may answer interrupts (not a superuser)."""

    is_staff = True

    @factory.post_generation
    def answer_permission(self, create, extracted, **kwargs):
        if create:
            grant_answer(self)


class _BackdatedFactory(factory.django.DjangoModelFactory):
    """`created_at=...` sets the row's time (auto_now_add would overwrite it on save)."""

    class Meta:
        abstract = True

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        created_at = kwargs.pop("created_at", None)
        row = super()._create(model_class, *args, **kwargs)
        if created_at is not None:
            model_class.objects.filter(pk=row.pk).update(created_at=created_at)
            row.created_at = created_at
        return row


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "workflows.Session"


class InvocationFactory(_BackdatedFactory):
    """An invocation row of `workflow_name`, waiting (no engine run behind it)."""

    class Meta:
        model = "workflows.Invocation"

    session = factory.SubFactory(SessionFactory)
    workflow_name = "expense_approval"
    workflow_version = "1"
    status = "WAITING"


class InterruptFactory(_BackdatedFactory):
    """A question row (pending unless told) of its own invocation of the same workflow."""

    class Meta:
        model = "workflows.Interrupt"

    id = factory.Sequence(lambda n: f"call-{n}")
    invocation = factory.SubFactory(
        InvocationFactory, workflow_name=factory.SelfAttribute("..workflow_name")
    )
    workflow_name = "expense_approval"
    path = "expense_approval@1/approve@1"
    run_id = 1
    message = "Approve?"


class DecisionFactory(_BackdatedFactory):
    """A person's decision row on `interrupt` (approving unless `response` says otherwise)."""

    class Meta:
        model = "workflows.Decision"

    interrupt = factory.SubFactory(InterruptFactory, status="resolved")
    actor = factory.SubFactory(UserFactory)
    response = factory.LazyFunction(lambda: {"approved": True})
