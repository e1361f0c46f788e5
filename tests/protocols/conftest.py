"""Fixtures of the protocol tests: a real broker for the tests that run a worker."""

from tests.integration.worker import celery_broker

__all__ = ["celery_broker"]
