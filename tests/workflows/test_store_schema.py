"""The store's SQL against the models: its raw SQL is a second copy of the schema, and
`makemigrations --check` guards only the models against the migrations.

- every column the SQL the store runs names exists on a table it names;
- every INSERT covers every concrete column of its table, save the ones the store leaves
  to defaults on purpose (workflows/store/rows.py: LEFT_TO_DEFAULTS), so a new field is a
  decision made in the store;
- the store's JSON columns are the models' JSONFields, on reads and on writes.
"""

import json
import re
import uuid
from typing import Any

import pytest
from django.conf import settings
from django.db import connections, models
from django.utils import timezone

from workflows.engine.events import Event, FunctionCall, FunctionResponse, RequestInput
from workflows.engine.state import (
    InterruptRecord,
    InvocationRecord,
    NodeRunState,
    Resolution,
    WriteBatch,
)
from workflows.engine.status import InterruptStatus, NodeStatus
from workflows.models import Interrupt, Invocation, NodeRun, SessionEvent
from workflows.store import DjangoStore, functions, rows

MODELS = {model._meta.db_table: model for model in (Invocation, NodeRun, SessionEvent, Interrupt)}
# Words of the store's SQL that are not columns: keywords, functions, the parts of type
# names (after AS, the first word of a type is not taken for a column anyway).
SQL_WORDS = {
    *("select", "from", "where", "and", "or", "in", "not", "is", "null", "as", "cast", "case"),
    *("when", "then", "else", "end", "order", "by", "limit", "insert", "into", "values", "on"),
    *("conflict", "do", "update", "set", "excluded", "nothing", "returning", "with", "exists"),
    *("coalesce", "count", "true", "false", "for", "no", "key", "interval", "clock_timestamp"),
    *("time", "zone", "precision", "unnest", "any", "nullif", "jsonb_array_elements"),
    "jsonb_array_elements_text",
}


def columns(table: str) -> set[str]:
    return {field.column for field in MODELS[table]._meta.concrete_fields}


def json_fields(table: str) -> set[str]:
    fields = MODELS[table]._meta.concrete_fields
    return {field.column for field in fields if isinstance(field, models.JSONField)}


def unknown_columns(sql: str) -> set[str]:
    """The identifiers of `sql` that are neither a column of a table it names, nor an SQL
    word, a table, a CTE name or an alias (`AS name`)."""
    text = re.sub(r"'[^']*'", "''", sql).replace("%s", "?")
    names = {word.lower() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text)}
    tables = names & MODELS.keys()
    assert tables, f"names no table of the store: {sql}"
    known = set().union(*map(columns, tables))
    ctes = {name.lower() for name in re.findall(r"(\w+) AS \(", text)}
    aliases = {name.lower() for name in re.findall(r"\bAS (\w+)", text)}
    parameters = {name for name in names if name.startswith(("p_", "r_", "e_"))}
    return names - known - tables - ctes - aliases - parameters - SQL_WORDS


def as_run(store: DjangoStore, sql: str) -> list[str]:
    """The statements `sql` runs: a call of the store's function (PostgreSQL) runs the
    statements of its body, whose `p_`, `r_` and `e_` names are its parameters."""
    if vendor(store.using) == "postgresql" and sql == functions.call(store.using):
        return functions.statements(store.using)
    return [sql]


def record_statements(store: DjangoStore) -> list[str]:
    """The SQL of every statement `store` runs from now on, on its own cursors and in its
    pipelines."""
    recorded: list[str] = []
    dialect, cursor = store.dialect, store.dialect.cursor

    class Recording:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def execute(self, sql: str, params: Any = None) -> None:
            recorded.extend(as_run(store, sql))
            self._inner.execute(sql, params)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    class RecordingCursor:
        def __enter__(self) -> Recording:
            self._context = cursor()
            return Recording(self._context.__enter__())

        def __exit__(self, *exc: Any) -> Any:
            return self._context.__exit__(*exc)

    dialect.cursor = RecordingCursor
    if hasattr(dialect, "pipeline"):
        pipeline = dialect.pipeline

        def recording_pipeline(statements: list[tuple[str, Any]]) -> Any:
            recorded.extend(s for sql, _ in statements for s in as_run(store, sql))
            return pipeline(statements)

        dialect.pipeline = recording_pipeline
    return recorded


def run_every_statement(store: DjangoStore) -> None:
    """One invocation through every read and write of the store: created by an engine
    Runner's first write with a question, answered, run under a lease (the node-run steps,
    the answer consumed, another deferred), released, and read back."""
    invocation_id = str(uuid.uuid4())
    running = InvocationRecord(id=invocation_id, workflow_name="wf", status=NodeStatus.RUNNING)
    ask = RequestInput(interrupt_id="schema-q", message="ok?", payload={"n": 1})
    question = InterruptRecord("schema-q", invocation_id, "wf", "ask", 1, ask)
    later = InterruptRecord("schema-later", invocation_id, "wf", "later", 1, RequestInput())

    def event(path: str, **fields: Any) -> Event:
        return Event(invocation_id=invocation_id, author=path, path=path, run_id=1, **fields)

    waiting = NodeRunState(NodeStatus.WAITING, 1, name="ask", interrupt_ids={"schema-q"})
    store.commit_sync(
        WriteBatch(
            invocation_id,
            invocation=running,
            node_runs={"ask": waiting, "later": NodeRunState(NodeStatus.WAITING, 1)},
            events=[event("ask", long_running_tool_ids=["schema-q"])],
            new_interrupts=[question, later],
        )
    )
    store.lock_for_answers_sync(["schema-q"])
    store.lock_invocation_sync(invocation_id)
    answers = [
        Resolution(q, InterruptStatus.RESOLVED, {"ok": True}, at=timezone.now())
        for q in ("schema-q", "schema-later")
    ]
    reply = FunctionResponse("schema-q", "ask", {"ok": True})
    store.commit_sync(
        WriteBatch(
            invocation_id, resolutions=answers, events=[event("user", function_responses=[reply])]
        )
    )
    assert store.read_for_execution_sync(invocation_id) is not None
    assert store.acquire_lease_sync(invocation_id, "worker", 60) is not None
    assert store.renew_lease_sync(invocation_id, "worker", 60)
    done = NodeRunState(NodeStatus.COMPLETED, 1, output={"ok": True}, name="ask")
    call = FunctionCall("schema-call", "tool", {"a": 1})
    store.commit_sync(
        WriteBatch(
            invocation_id,
            lease_owner="worker",
            node_runs={"ask": done},
            events=[event("ask", function_calls=[call], output={"ok": True})],
            consumed={"schema-q"},
            deferred={"schema-later"},
        )
    )
    assert store.load_outputs_sync(invocation_id, "") == {"ask": {"ok": True}}
    waiting_record = InvocationRecord(invocation_id, "wf", NodeStatus.WAITING)
    store.commit_sync(
        WriteBatch(
            invocation_id, invocation=waiting_record, lease_owner="worker", release_lease=True
        )
    )
    store.release_lease_sync(invocation_id, "worker")
    assert store.load_checkpoint_sync(invocation_id, lock=True) is not None
    assert set(store.load_interrupts_sync(["schema-q", "schema-later"], lock=True)) == {
        "schema-q",
        "schema-later",
    }
    assert len(store.load_events_sync(invocation_id)) == 3


def vendor(alias: str) -> str:
    return connections[alias].vendor


@pytest.fixture(params=settings.STORE_DATABASES, ids=vendor)
def store_sql(request: pytest.FixtureRequest) -> list[str]:
    """The SQL of every statement the store runs, on each store database."""
    store = DjangoStore(using=request.param)
    recorded = record_statements(store)
    run_every_statement(store)
    return recorded


@pytest.mark.django_db(databases=settings.STORE_DATABASES)
def test_every_column_the_stores_sql_names_exists(store_sql):
    named = {re.search(r"\b(?:FROM|INTO|UPDATE) (\w+)", sql).group(1) for sql in store_sql}
    assert named == set(MODELS), "the scenario runs SQL on every table of the store"
    unknown = {sql: found for sql in store_sql if (found := unknown_columns(sql))}
    assert not unknown, f"columns missing from the models: {unknown}"


@pytest.mark.django_db(databases=settings.STORE_DATABASES)
def test_every_insert_covers_every_column_of_its_table(store_sql):
    inserts = re.findall(r"INSERT INTO (\w+) \(([^)]*)\)", "\n".join(store_sql))
    assert {table for table, _ in inserts} == {rows.NODE_RUNS, rows.EVENTS, rows.INTERRUPTS}
    for table, listed in inserts:
        written = {column.strip() for column in listed.split(",")}
        assert written <= columns(table)
        missing = columns(table) - written - rows.LEFT_TO_DEFAULTS[table]
        assert not missing, (
            f"{table}: the store neither writes {sorted(missing)} nor leaves them to their "
            "defaults: add them to its INSERT or to LEFT_TO_DEFAULTS in workflows/store/rows.py"
        )


def test_a_new_interrupt_row_is_given_every_column_not_left_to_defaults():
    """New interrupt rows are built as model instances: the columns the store gives them,
    with the ones it leaves to the model's defaults, are all of the table's."""
    record = InterruptRecord("q", str(uuid.uuid4()), "wf", "ask", 1, RequestInput())
    given, left = set(rows.interrupt_fields(record)), rows.LEFT_TO_DEFAULTS[rows.INTERRUPTS]
    assert not given & left
    assert given | left == columns(rows.INTERRUPTS)


@pytest.mark.parametrize("table", sorted(MODELS))
def test_the_stores_json_columns_are_the_models_json_fields(table):
    assert rows.JSON_COLUMNS[table] == json_fields(table)


def _json_texts(columns: list[str], values: list[Any]) -> set[str]:
    """The columns whose value is JSON text of a list or an object."""

    def is_json(value: Any) -> bool:
        try:
            return isinstance(value, str) and isinstance(json.loads(value), list | dict)
        except ValueError:
            return False

    return {column for column, value in zip(columns, values, strict=True) if is_json(value)}


def test_the_store_writes_json_columns_as_json_and_only_those():
    state = NodeRunState(
        NodeStatus.WAITING,
        1,
        output=["out"],
        interrupt_ids={"q"},
        name="n",
        parent_path="p",
        input={"in": 1},
        route="r",
        resume_inputs={"q": 1},
        error="e",
        gate={"decision": "approve", "by": None},
        triggered_by={"before": "p/before@1"},  # a join's: an object
    )
    values = rows.node_run_values("pk", [("p/n", state)], "stamp")
    assert _json_texts(rows.NODE_RUN_COLUMNS, values) == json_fields(rows.NODE_RUNS)
    event = Event(
        output={"out": 1},
        function_calls=[FunctionCall("c", "tool")],
        long_running_tool_ids=["q"],
        function_responses=[FunctionResponse("q", "n", 1)],
        error="e",
        author="n",
        path="p/n",
        run_id=1,
        status=NodeStatus.COMPLETED,
        route="r",
    )
    values = rows.event_values("pk", [event])
    assert _json_texts(rows.EVENT_COLUMNS, values) == json_fields(rows.EVENTS)
