"""The demo project's tests run inside the library tests' project (tests/project) with what
of the demo they need: its app installed (the seed_demo command), its urls (the front door)
and its workflows registered, for each test only."""

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from tests.project.celery import app as project_celery_app
from workflows.registry import registry


@pytest.fixture(autouse=True)
def demo_project() -> Iterator[None]:
    # Importing the demo makes its Celery app current; the test project's stays current so
    # that what the other tests configure on it is what sends their tasks.
    from hitl_site import workflows as demo

    project_celery_app.set_current()
    factories = (
        demo.expense_approval,
        demo.content_moderation,
        demo.document_drafting,
        demo.support_agent,
    )
    with override_settings(
        INSTALLED_APPS=[*settings.INSTALLED_APPS, "hitl_site"], ROOT_URLCONF="hitl_site.urls"
    ):
        for factory in factories:
            registry.register(factory)
        yield
    for factory in factories:
        registry.unregister(factory().name)
