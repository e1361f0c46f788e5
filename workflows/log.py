"""Log lines that say which invocation and node run they belong to.

- `ContextFilter` gives every record `invocation_id` and `node_path` attributes ("-" when
  unknown), so a formatter can print `%(invocation_id)s %(node_path)s`. Add it to your
  handlers (docs/deployment.md shows the LOGGING dict); a Celery worker's own handlers get
  it automatically.
- While `workflows.tasks.run_invocation` runs, the invocation id is known to every log
  call: the task sets it for its body (in a worker, or called in process), and Celery's
  task signals for Celery's own lines around it (connected in WorkflowsConfig.ready()).
- Inside a node, `node_logger(ctx)` is a logger whose records carry that node's path.
- `log_context(invocation_id=..., node_path=...)` sets them for a block of your own code.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

from .dispatch import RUN_INVOCATION
from .engine.context import current_node_path

UNKNOWN = "-"

invocation_id_var: ContextVar[str] = ContextVar("hitl_invocation_id", default=UNKNOWN)
node_path_var: ContextVar[str] = ContextVar("hitl_node_path", default=UNKNOWN)


class ContextFilter(logging.Filter):
    """Adds `invocation_id` and `node_path` to each record (keeps values already set)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "invocation_id"):
            record.invocation_id = invocation_id_var.get()
        if not hasattr(record, "node_path"):
            path = node_path_var.get()
            record.node_path = current_node_path.get() or UNKNOWN if path == UNKNOWN else path
        return True


@contextmanager
def log_context(*, invocation_id: Any = None, node_path: str | None = None) -> Iterator[None]:
    """Log records made inside the block carry these values."""
    tokens = []
    if invocation_id is not None:
        tokens.append((invocation_id_var, invocation_id_var.set(str(invocation_id))))
    if node_path is not None:
        tokens.append((node_path_var, node_path_var.set(node_path)))
    try:
        yield
    finally:
        for var, token in reversed(tokens):
            var.reset(token)


class NodeLoggerAdapter(logging.LoggerAdapter):
    """A logger for code inside a node: its records carry the node's invocation and path."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def node_logger(ctx: Any, name: str = "workflows.nodes") -> NodeLoggerAdapter:
    """`log = node_logger(ctx); log.info("charged %s", amount)` inside a node."""
    return NodeLoggerAdapter(
        logging.getLogger(name), {"invocation_id": ctx.invocation_id, "node_path": ctx.path}
    )


# The token of each running run task, to restore what the caller had (eager mode runs
# the task inside the caller's own context).
_task_tokens: dict[str, Token[str]] = {}


def on_task_prerun(
    sender: Any = None, task_id: str = "", args: Any = None, kwargs: Any = None, **signal: Any
) -> None:
    if getattr(sender, "name", None) != RUN_INVOCATION:
        return
    invocation_id = args[0] if args else (kwargs or {}).get("invocation_id")
    if invocation_id is not None:
        _task_tokens[task_id] = invocation_id_var.set(str(invocation_id))


def on_task_postrun(sender: Any = None, task_id: str = "", **kwargs: Any) -> None:
    token = _task_tokens.pop(task_id, None)
    if token is not None:
        invocation_id_var.reset(token)


def on_celery_logging_set_up(logger: logging.Logger | None = None, **kwargs: Any) -> None:
    """Celery replaces the handlers of a worker's loggers: give the new ones the filter, so
    CELERY_WORKER_LOG_FORMAT may use %(invocation_id)s and %(node_path)s."""
    for handler in getattr(logger, "handlers", []):
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())


def connect() -> None:
    from celery import signals

    signals.task_prerun.connect(on_task_prerun, dispatch_uid="hitl-log-prerun")
    signals.task_postrun.connect(on_task_postrun, dispatch_uid="hitl-log-postrun")
    signals.after_setup_logger.connect(on_celery_logging_set_up, dispatch_uid="hitl-log-setup")
    signals.after_setup_task_logger.connect(
        on_celery_logging_set_up, dispatch_uid="hitl-log-task-setup"
    )
