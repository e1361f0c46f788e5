"""Fixtures of the gate tests: the browser of the approvals tests."""

from tests.approvals.test_inbox_browser import chromium

__all__ = ["chromium"]
