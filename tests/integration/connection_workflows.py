"""The workflow of tests/integration/test_worker_connections.py, registered in the test
process (the test module imports it) and in its worker processes (connection_settings.py):
one node that reports the PostgreSQL server process its database connection is served by."""

from django.db import connection

from workflows.engine import Workflow, node
from workflows.registry import register


@node
def backend_pid(node_input: dict) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return {"pid": cursor.fetchone()[0]}


@register
def report_backend() -> Workflow:
    return Workflow(name="report_backend", edges=[("START", backend_pid)])
