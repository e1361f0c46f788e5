"""Fixtures of the integration tests (real worker processes, brokers, threads)."""

from .worker import celery_broker

__all__ = ["celery_broker"]
