"""One compared system in a long-lived process: reads one JSON command per line on stdin,
answers one JSON line. Started by bench/compare/run.py as

    python -m bench.compare.worker '{"system": "hitl", "backend": "sqlite", "options": {}}'

Everything the system itself prints goes to stderr (the runner keeps it in a log file)."""

from __future__ import annotations

import gc
import json
import os
import sys
import traceback
from typing import Any


def main() -> None:
    config = json.loads(sys.argv[1])
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the systems' own output must not mix with the answers
    sys.stdout = sys.stderr
    from bench.compare.systems import make

    system = make(config["system"], config["backend"], config.get("options", {}))
    for line in sys.stdin:
        command = json.loads(line)
        try:
            answers.write(json.dumps({"ok": run(system, command)}) + "\n")
        except Exception:
            answers.write(json.dumps({"error": traceback.format_exc()}) + "\n")


def run(system: Any, command: dict[str, Any]) -> Any:
    op = command["op"]
    if op == "warm_up":
        for _ in range(command.get("cycles", 5)):
            system.chain_interrupt()
        system.chain(10)
        system.verify = False
        return None
    if op == "profile":  # a report of its own, not a timed block (bench/compare/profile.py)
        from bench.compare.profile import profile

        return profile(system)
    # Each block starts with a collection, so one system's garbage is not another's pause.
    gc.collect()
    before = system.commits()
    if op == "chain_interrupt":
        result: Any = [system.chain_interrupt() for _ in range(command["cycles"])]
    elif op == "chain":
        result = [system.chain(command["size"]) for _ in range(command["cycles"])]
    elif op == "fanout":
        result = system.fanout(command["width"])
    elif op == "history":
        result = system.history(command["size"], command["points"])
        result = {str(k): v for k, v in result.items()}
    elif op == "bare_commit":
        result = system.bare_commit(command["count"])
    else:
        raise ValueError(f"unknown op {op!r}")
    after = system.commits()
    return {"result": result, "commits": None if before is None else after - before}


if __name__ == "__main__":
    main()
