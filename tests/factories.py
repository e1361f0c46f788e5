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
