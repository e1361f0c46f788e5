"""This project: engine-level Runner on InMemoryStore ("memory"), and the Django services
on SQLite or PostgreSQL: `services.start` and `services.submit_function_responses`, Celery
in eager mode (the run executes in this process right after the commit, as the embedded
default does; a worker runs the same `services.execute`)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from typing import Any

from .counting import PostgresCommits, SqliteCommits

WORKFLOWS: dict[str, Any] = {}


def _build() -> None:
    from workflows.engine import START, Context, JoinNode, RequestInput, Workflow, node

    def step(name: str) -> Any:
        def body(node_input: int) -> int:
            return node_input + 1

        return node(name=name)(body)

    # Interrupt ids derived from the invocation id: the bench knows them without a query.
    @node(name="ask")
    def ask(ctx: Context, node_input: int) -> RequestInput:
        return RequestInput(
            interrupt_id=f"{ctx.invocation_id}:ask",
            message="approve?",
            payload={"value": node_input},
        )

    @node(name="after")
    def after(node_input: Any) -> Any:
        return node_input

    chain = [step(f"c{i}") for i in range(1, 11)]
    WORKFLOWS["chain_interrupt"] = Workflow(
        name="bench_resume", edges=[(START, *chain, ask, after)]
    )
    for size in (10, 100, 1000):
        nodes = [step(f"n{i}") for i in range(1, size + 1)]
        WORKFLOWS[f"chain{size}"] = Workflow(name=f"bench_chain{size}", edges=[(START, *nodes)])

    def branch(index: int) -> Any:
        def body(ctx: Context, node_input: Any) -> RequestInput:
            return RequestInput(
                interrupt_id=f"{ctx.invocation_id}:b{index:03d}",
                message=f"branch {index}?",
                payload={"branch": index},
            )

        return node(name=f"b{index}")(body)

    join = JoinNode("join")
    WORKFLOWS["fanout100"] = Workflow(
        name="bench_fanout100", edges=[(START, branch(i), join) for i in range(1, 101)]
    )


class HitlSystem:
    def __init__(self, backend: str, options: dict[str, Any]) -> None:
        self.backend = backend
        self.loop = asyncio.new_event_loop()
        self.counter: Any = None
        self.verify = True  # the worker turns it off after the warm-up
        if backend == "memory":
            from workflows.engine import InMemoryStore

            _build()
            self.store = InMemoryStore()
            return
        os.environ["DJANGO_SETTINGS_MODULE"] = "bench.compare.settings"
        os.environ["DEBUG"] = "false"
        os.environ.pop("CELERY_BROKER_URL", None)  # eager: runs execute in-process
        if backend == "postgres":
            os.environ["DATABASE_URL"] = options["url"]
        else:
            os.environ.pop("DATABASE_URL", None)
            self.tmp = tempfile.mkdtemp(prefix="hitl-bench-")
            os.environ["SQLITE_PATH"] = os.path.join(self.tmp, "db.sqlite3")
        import django
        from django.conf import settings

        django.setup()
        settings.HITL = {
            **getattr(settings, "HITL", {}),
            **options.get("hitl", {}),
        }
        from workflows.conf import hitl_settings

        hitl_settings.reload()
        from django.core.management import call_command
        from django.db import connection

        if backend == "postgres":
            # A scratch database: every run starts from an empty schema.
            with connection.cursor() as cursor:
                cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        call_command("migrate", verbosity=0, interactive=False, run_syncdb=True)
        from workflows.registry import registry

        _build()
        for workflow in WORKFLOWS.values():
            registry.register(workflow)
        connection.ensure_connection()
        if not options.get("store_function", True):
            from workflows.store import functions

            functions._installed[connection.alias] = False
        if backend == "sqlite":
            self.counter = SqliteCommits()
            self.counter.attach(connection.connection)
        else:
            self.counter = PostgresCommits(options["url"])
        from workflows.models import Session

        self.session = Session.objects.create()

    # -- the two levels ---------------------------------------------------------------
    def start(self, name: str, value: Any, session: Any = None) -> str:
        if self.backend == "memory":
            from workflows.engine import Runner

            runner = Runner(WORKFLOWS[name], self.store)
            result = self.loop.run_until_complete(runner.run(value, session_id=session))
            self._last = result
            return result.invocation_id
        from workflows import services

        return str(services.start(WORKFLOWS[name].name, value, session=session or self.session).pk)

    def pending(self, invocation_id: str, name: str) -> list[str]:
        if name == "chain_interrupt":
            return [f"{invocation_id}:ask"]
        return [f"{invocation_id}:b{i:03d}" for i in range(1, 101)]

    def _check(self, invocation_id: str, status: str = "COMPLETED") -> None:
        """Verify the outcome, in warm-up cycles only (the reads would count as commits)."""
        if not self.verify:
            return
        if self.backend == "memory":
            assert self._last.status == status, self._last.status
            return
        from workflows.models import Invocation

        found = Invocation.objects.get(pk=invocation_id).status
        assert found == status, found

    def answer(self, name: str, interrupt_id: str, value: Any) -> None:
        from workflows.engine import FunctionResponse

        responses = [FunctionResponse(interrupt_id, "ask", value)]
        if self.backend == "memory":
            from workflows.engine import Runner

            runner = Runner(WORKFLOWS[name], self.store)
            self._last = self.loop.run_until_complete(runner.resume(responses))
            return
        from workflows import services

        services.submit_function_responses(responses)

    # -- workloads --------------------------------------------------------------------
    def chain_interrupt(self) -> tuple[float, float]:
        begin = time.perf_counter()
        invocation_id = self.start("chain_interrupt", 0)
        started = time.perf_counter() - begin
        self._check(invocation_id, "WAITING")
        (interrupt_id,) = self.pending(invocation_id, "chain_interrupt")
        begin = time.perf_counter()
        self.answer("chain_interrupt", interrupt_id, {"ok": True})
        resumed = time.perf_counter() - begin
        self._check(invocation_id)
        return started, resumed

    def chain(self, size: int) -> float:
        begin = time.perf_counter()
        invocation_id = self.start(f"chain{size}", 0)
        elapsed = time.perf_counter() - begin
        self._check(invocation_id)
        return elapsed

    def fanout(self, width: int) -> tuple[float, list[float]]:
        begin = time.perf_counter()
        invocation_id = self.start(f"fanout{width}", 0)
        started = time.perf_counter() - begin
        self._check(invocation_id, "WAITING")
        pending = self.pending(invocation_id, f"fanout{width}")
        samples = []
        for interrupt_id in pending:
            begin = time.perf_counter()
            self.answer(f"fanout{width}", interrupt_id, {"ok": True})
            samples.append(time.perf_counter() - begin)
        self._check(invocation_id)
        return started, samples

    def history(self, size: int, points: list[int]) -> dict[int, float]:
        if self.backend == "memory":
            from workflows.engine.context import new_id

            session: Any = new_id()
        else:
            from workflows.models import Session

            session = Session.objects.create()
        found = {}
        for index in range(1, size + 1):
            invocation_id = self.start("chain_interrupt", 0, session=session)
            (interrupt_id,) = self.pending(invocation_id, "chain_interrupt")
            begin = time.perf_counter()
            self.answer("chain_interrupt", interrupt_id, {"ok": True})
            if index in points:
                found[index] = time.perf_counter() - begin
        return found

    def bare_commit(self, count: int) -> list[float]:
        """The floor under a node transition: `BEGIN; INSERT a small row; COMMIT` on this
        system's connection, as raw SQL; seconds each."""
        from django.db import connection

        sqlite = connection.vendor == "sqlite"
        begin = f"BEGIN {connection.transaction_mode or ''}" if sqlite else "BEGIN"
        key = "INTEGER PRIMARY KEY" if sqlite else "bigserial PRIMARY KEY"
        samples = []
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS hitl_bench_commit")
            cursor.execute(f"CREATE TABLE hitl_bench_commit (id {key}, note varchar(16))")
            for _ in range(count):
                begun = time.perf_counter()
                cursor.execute(begin)
                cursor.execute("INSERT INTO hitl_bench_commit (note) VALUES ('bench')")
                cursor.execute("COMMIT")
                samples.append(time.perf_counter() - begun)
            cursor.execute("DROP TABLE hitl_bench_commit")
        return samples

    def commits(self) -> int | None:
        if self.counter is None:
            return None
        if isinstance(self.counter, SqliteCommits):
            return self.counter.count
        from django.db import connection

        def run(sql: str) -> None:
            with connection.cursor() as cursor:
                cursor.execute(sql)

        return self.counter.read([run])
