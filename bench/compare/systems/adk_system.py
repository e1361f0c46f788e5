"""Google ADK's Workflow (2.x) run by its Runner on InMemorySessionService ("memory") or
DatabaseSessionService on SQLite (SQLAlchemy + aiosqlite). ADK appends each node's events
to the session as it runs and rebuilds a paused workflow's state from the session's
events on resume."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from typing import Any

from .counting import SqliteCommits

APP = "bench"
USER = "bench"


def _workflows() -> dict[str, Any]:
    # ADK checks a graph for cycles recursively, a frame per node: the chain of 1,000 is
    # as deep as Python's default limit, and fails or not by how deep the caller is.
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 5000))
    from google.adk.events.request_input import RequestInput
    from google.adk.workflow import START, JoinNode, Workflow, node

    def step(name: str) -> Any:
        def body(node_input: Any) -> int:
            return (node_input if isinstance(node_input, int) else 0) + 1

        return node(name=name)(body)

    def ask(node_input: Any) -> RequestInput:
        return RequestInput(message="approve?", payload={"value": node_input})

    def after(node_input: Any) -> Any:
        return node_input

    def branch(index: int) -> Any:
        def body(node_input: Any) -> RequestInput:
            return RequestInput(message=f"branch {index}?", payload={"branch": index})

        return node(name=f"b{index}")(body)

    join = JoinNode(name="join")
    built = {
        "chain_interrupt": Workflow(
            name="bench_resume",
            edges=[
                (
                    START,
                    *[step(f"c{i}") for i in range(1, 11)],
                    node(name="ask")(ask),
                    node(name="after")(after),
                )
            ],
        ),
        "fanout100": Workflow(
            name="bench_fanout100",
            edges=[(START, branch(i), join) for i in range(1, 101)],
        ),
    }
    for size in (10, 100, 1000):
        nodes = [step(f"n{i}") for i in range(1, size + 1)]
        built[f"chain{size}"] = Workflow(name=f"bench_chain{size}", edges=[(START, *nodes)])
    return built


class AdkSystem:
    verify = True

    def __init__(self, backend: str, options: dict[str, Any]) -> None:
        from google.adk.runners import Runner

        self.loop = asyncio.new_event_loop()
        self._commits: SqliteCommits | None = None
        if backend == "memory":
            from google.adk.sessions import InMemorySessionService

            self.service: Any = InMemorySessionService()
        else:
            from google.adk.sessions import DatabaseSessionService
            from sqlalchemy import event
            from sqlalchemy.util.concurrency import await_

            path = os.path.join(tempfile.mkdtemp(prefix="adk-bench-"), "adk.sqlite3")
            self.service = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
            self._commits = SqliteCommits()
            counter = self._commits

            @event.listens_for(self.service.db_engine.sync_engine, "connect")
            def _trace(dbapi_connection: Any, record: Any) -> None:
                # aiosqlite runs the sqlite3 connection in its own thread: hook it there.
                inner = dbapi_connection.driver_connection
                await_(inner._execute(counter.attach, inner._conn))

        self.runners = {
            name: Runner(node=workflow, app_name=APP, session_service=self.service)
            for name, workflow in _workflows().items()
        }
        self.session = self._session()

    def _session(self) -> str:
        session = self.loop.run_until_complete(
            self.service.create_session(app_name=APP, user_id=USER, session_id=str(uuid.uuid4()))
        )
        return session.id

    def _run(self, name: str, session: str, message: Any) -> list[Any]:
        async def collect() -> list[Any]:
            runner = self.runners[name]
            return [
                e
                async for e in runner.run_async(
                    user_id=USER, session_id=session, new_message=message
                )
            ]

        return self.loop.run_until_complete(collect())

    @staticmethod
    def _text(text: str) -> Any:
        from google.genai import types

        return types.Content(role="user", parts=[types.Part(text=text)])

    @staticmethod
    def _answer(call: Any, value: Any) -> Any:
        from google.genai import types

        response = types.FunctionResponse(id=call.id, name=call.name, response=value)
        return types.Content(role="user", parts=[types.Part(function_response=response)])

    @staticmethod
    def _calls(events: list[Any]) -> list[Any]:
        return [
            c
            for e in events
            for c in (e.get_function_calls() or [])
            if c.id in (e.long_running_tool_ids or ())
        ]

    def chain_interrupt(self) -> tuple[float, float]:
        begin = time.perf_counter()
        events = self._run("chain_interrupt", self.session, self._text("go"))
        started = time.perf_counter() - begin
        (call,) = self._calls(events)
        begin = time.perf_counter()
        self._run("chain_interrupt", self.session, self._answer(call, {"ok": True}))
        return started, time.perf_counter() - begin

    def chain(self, size: int) -> float:
        session = self._session()
        begin = time.perf_counter()
        events = self._run(f"chain{size}", session, self._text("go"))
        elapsed = time.perf_counter() - begin
        assert any(getattr(e, "output", None) == size for e in events)
        return elapsed

    def fanout(self, width: int) -> tuple[float, list[float]]:
        session = self._session()
        begin = time.perf_counter()
        events = self._run(f"fanout{width}", session, self._text("go"))
        started = time.perf_counter() - begin
        calls = sorted(self._calls(events), key=lambda c: c.id)
        assert len(calls) == width, len(calls)
        samples = []
        for call in calls:
            begin = time.perf_counter()
            self._run(f"fanout{width}", session, self._answer(call, {"ok": True}))
            samples.append(time.perf_counter() - begin)
        return started, samples

    def history(self, size: int, points: list[int]) -> dict[int, float]:
        session = self._session()
        found = {}
        for index in range(1, size + 1):
            events = self._run("chain_interrupt", session, self._text("go"))
            (call,) = self._calls(events)
            begin = time.perf_counter()
            self._run("chain_interrupt", session, self._answer(call, {"ok": True}))
            if index in points:
                found[index] = time.perf_counter() - begin
        return found

    def commits(self) -> int | None:
        return None if self._commits is None else self._commits.count
