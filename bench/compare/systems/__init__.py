"""One adapter per compared system. Each runs the same workloads on one backend and is
used from its own long-lived process (bench/compare/worker.py):

- `chain_interrupt()`: a chain of 10 function nodes, then a node that asks for input;
  returns (seconds from start to the interrupt, seconds from the answer to completion,
  which runs one more node).
- `chain(n)`: a chain of n function nodes, start to finish; seconds.
- `fanout(width)`: `width` parallel branches that each ask for input, answered one at a
  time; returns (seconds to start, [seconds of each answer until the next wait/finish]).
- `history(size, points)`: `size` invocations in one fresh session (thread), each started
  and answered; returns {point: resume seconds} for the 1-based invocations in `points`.
- `commits()`: transactions the database has committed for this system so far (counted
  by the database; None in memory).
"""

from __future__ import annotations

from typing import Any


def make(system: str, backend: str, options: dict[str, Any]) -> Any:
    if system == "hitl":
        from .hitl import HitlSystem

        return HitlSystem(backend, options)
    if system == "langgraph":
        from .langgraph_system import LangGraphSystem

        return LangGraphSystem(backend, options)
    if system == "adk":
        from .adk_system import AdkSystem

        return AdkSystem(backend, options)
    raise ValueError(f"unknown system {system!r}")
