"""LangGraph: a StateGraph of function nodes on InMemorySaver, SqliteSaver (WAL,
synchronous=NORMAL, as this project's SQLite settings) or PostgresSaver (psycopg 3 as its
`from_conn_string` opens it: autocommit, prepared statements). `durability` is passed to
every invoke: "sync" writes each step's checkpoint before the next step starts; LangGraph's
default "async" writes it in the background while the next step runs."""

from __future__ import annotations

import operator
import os
import sqlite3
import tempfile
import time
import uuid
from typing import Annotated, Any, TypedDict

from .counting import PostgresCommits, SqliteCommits


class State(TypedDict, total=False):
    value: int
    answer: Any
    answers: Annotated[list, operator.add]


def _step(state: State) -> State:
    return {"value": state.get("value", 0) + 1}


def _ask(state: State) -> State:
    from langgraph.types import interrupt

    return {"answer": interrupt({"value": state.get("value")})}


def _after(state: State) -> State:
    return {"value": state.get("value", 0)}


def _branch(index: int) -> Any:
    def body(state: State) -> State:
        from langgraph.types import interrupt

        return {"answers": [interrupt({"branch": index})]}

    return body


def _join(state: State) -> State:
    return {"value": len(state.get("answers", []))}


class LangGraphSystem:
    verify = True  # outcomes are asserted on every cycle (they come back with the call)

    def __init__(self, backend: str, options: dict[str, Any]) -> None:
        from langgraph.graph import END, START, StateGraph

        self.backend = backend
        self.durability = options.get("durability", "sync")
        self._commits: Any = None
        self._flush: list[Any] = []
        if backend == "memory":
            from langgraph.checkpoint.memory import InMemorySaver

            saver: Any = InMemorySaver()
        elif backend == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            path = os.path.join(tempfile.mkdtemp(prefix="lg-bench-"), "lg.sqlite3")
            connection = sqlite3.connect(path, check_same_thread=False)
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            saver = SqliteSaver(connection)
            saver.setup()
            self._commits = SqliteCommits()
            self._commits.attach(connection)
        else:
            from langgraph.checkpoint.postgres import PostgresSaver

            self._context = PostgresSaver.from_conn_string(options["url"])
            saver = self._context.__enter__()
            saver.setup()
            with saver.conn.cursor() as cursor:
                cursor.execute("TRUNCATE checkpoints, checkpoint_blobs, checkpoint_writes")
            self._commits = PostgresCommits(options["url"])
            self._flush = [lambda sql: saver.conn.execute(sql)]
        self.saver = saver

        def compile_chain(names: list[str], tail: list[tuple[str, Any]]) -> Any:
            graph = StateGraph(State)
            previous = START
            for name in names:
                graph.add_node(name, _step)
                graph.add_edge(previous, name)
                previous = name
            for name, body in tail:
                graph.add_node(name, body)
                graph.add_edge(previous, name)
                previous = name
            graph.add_edge(previous, END)
            return graph.compile(checkpointer=saver)

        self.graphs = {
            "chain_interrupt": compile_chain(
                [f"c{i}" for i in range(1, 11)], [("ask", _ask), ("after", _after)]
            )
        }
        for size in (10, 100, 1000):
            self.graphs[f"chain{size}"] = compile_chain([f"n{i}" for i in range(1, size + 1)], [])
        fan = StateGraph(State)
        fan.add_node("join", _join)
        for index in range(1, 101):
            fan.add_node(f"b{index}", _branch(index))
            fan.add_edge(START, f"b{index}")
        fan.add_edge([f"b{i}" for i in range(1, 101)], "join")
        fan.add_edge("join", END)
        self.graphs["fanout100"] = fan.compile(checkpointer=saver)
        self.thread = self._new_thread()

    def _new_thread(self) -> dict[str, Any]:
        limit = 10_000  # a 1,000-node chain is 1,000 steps
        return {"configurable": {"thread_id": str(uuid.uuid4())}, "recursion_limit": limit}

    def _invoke(self, name: str, value: Any, config: dict[str, Any]) -> dict[str, Any]:
        return self.graphs[name].invoke(value, config, durability=self.durability)

    def _resume(self, name: str, answer: Any, config: dict[str, Any]) -> dict[str, Any]:
        from langgraph.types import Command

        return self.graphs[name].invoke(Command(resume=answer), config, durability=self.durability)

    def chain_interrupt(self) -> tuple[float, float]:
        begin = time.perf_counter()
        result = self._invoke("chain_interrupt", {"value": 0}, self.thread)
        started = time.perf_counter() - begin
        assert len(result["__interrupt__"]) == 1
        begin = time.perf_counter()
        result = self._resume("chain_interrupt", {"ok": True}, self.thread)
        resumed = time.perf_counter() - begin
        assert "__interrupt__" not in result and result["answer"] == {"ok": True}
        return started, resumed

    def chain(self, size: int) -> float:
        begin = time.perf_counter()
        result = self._invoke(f"chain{size}", {"value": 0}, self._new_thread())
        elapsed = time.perf_counter() - begin
        assert result["value"] == size
        return elapsed

    def fanout(self, width: int) -> tuple[float, list[float]]:
        config = self._new_thread()
        begin = time.perf_counter()
        result = self._invoke(f"fanout{width}", {"value": 0}, config)
        started = time.perf_counter() - begin
        pending = sorted(i.id for i in result["__interrupt__"])
        assert len(pending) == width
        samples = []
        for interrupt_id in pending:
            begin = time.perf_counter()
            result = self._resume(f"fanout{width}", {interrupt_id: {"ok": True}}, config)
            samples.append(time.perf_counter() - begin)
        assert result["value"] == width, result.get("value")
        return started, samples

    def history(self, size: int, points: list[int]) -> dict[int, float]:
        config = self._new_thread()
        found = {}
        for index in range(1, size + 1):
            self._invoke("chain_interrupt", {"value": 0}, config)
            begin = time.perf_counter()
            self._resume("chain_interrupt", {"ok": True}, config)
            if index in points:
                found[index] = time.perf_counter() - begin
        return found

    def commits(self) -> int | None:
        if self._commits is None:
            return None
        if isinstance(self._commits, SqliteCommits):
            return self._commits.count
        return self._commits.read(self._flush)
