"""What runs inside `celery worker`: the engine executed under an invocation's lease, and
the poison guard (`execution`), the database connections kept across tasks
(`connections`) and the heartbeat `manage.py hitl_status` reads (`heartbeat`). It imports
nothing of `workflows.services`, which re-exports `execute` and `fail`."""

from .execution import execute, fail

__all__ = ["execute", "fail"]
