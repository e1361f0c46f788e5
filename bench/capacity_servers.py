"""Servers for bench/capacity.py: a throwaway PostgreSQL cluster and Redis on loopback ports
of their own (so the server-wide counters count only the bench's work), and the CPU time
of server and worker processes, read from /proc."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _process_ticks(pid: int) -> tuple[int, int]:
    """(parent pid, CPU ticks of the process and of its children it has waited for)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    # After the name: state, ppid, ...; utime, stime, cutime, cstime are fields 14-17.
    return int(fields[1]), sum(int(f) for f in fields[11:15])


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


class ProcessCpu:
    """CPU milliseconds used so far by processes `roots` and their children: live children
    are read one by one, exited ones are in their parent's counters once it waited for
    them (as PostgreSQL's postmaster does for each backend)."""

    def __init__(self, roots: Iterable[int]) -> None:
        self.roots = list(roots)

    @classmethod
    def of_postgres(cls, url: str) -> ProcessCpu:
        """The postmaster of the server at `url`, if it runs on this machine and its data
        directory is readable; otherwise nothing (ms() is then NaN)."""
        import psycopg

        try:
            with psycopg.connect(f"{url}/postgres") as connection:
                data = connection.execute("SHOW data_directory").fetchone()[0]
            pid = int(Path(data, "postmaster.pid").read_text().split()[0])
            _process_ticks(pid)
        except (OSError, ValueError, psycopg.Error):
            return cls([])
        return cls([pid])

    def ms(self) -> float:
        if not self.roots:
            return float("nan")
        total = 0
        for pid in _all_pids():
            try:
                parent, ticks = _process_ticks(pid)
            except (OSError, ValueError, IndexError):
                continue  # exited meanwhile
            if pid in self.roots or parent in self.roots:
                total += ticks
        return total * 1000 / TICKS


def _postgres_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name) or name


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the postgres user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextmanager
def private_postgres() -> Iterator[tuple[str, ProcessCpu]]:
    """A new cluster with PostgreSQL's default settings on a free loopback port; its URL
    (without a database) and its CPU counter. Stopped and removed at the end."""
    directory = Path(tempfile.mkdtemp(prefix="hitl-capacity-pg-"))
    data = directory / "data"
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres", "postgres")
    port = _free_port()
    initdb = [_postgres_bin("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"]
    subprocess.run(_as_postgres(initdb), check=True, capture_output=True)
    options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={directory}"
    pg_ctl = [_postgres_bin("pg_ctl"), "-D", str(data), "-l", str(directory / "log")]
    subprocess.run(_as_postgres([*pg_ctl, "-o", options, "-w", "start"]), check=True)
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        yield f"postgres://postgres@127.0.0.1:{port}", ProcessCpu([pid])
    finally:
        subprocess.run(_as_postgres([*pg_ctl, "-m", "fast", "-w", "stop"]), check=False)
        shutil.rmtree(directory, ignore_errors=True)


@contextmanager
def private_redis() -> Iterator[str]:
    """A Redis server on a free loopback port, nothing persisted; its URL (db 0)."""
    import redis

    port = _free_port()
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
    server = subprocess.Popen(
        [*command, "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL
    )
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(10)


def redis_stats(url: str) -> dict[str, float]:
    """Commands the Redis server processed so far, in all and those that publish a
    message to a queue (kombu's LPUSH)."""
    import redis

    client = redis.Redis.from_url(url)
    commands = client.info("commandstats")
    return {
        "redis_commands": float(client.info("stats")["total_commands_processed"]),
        "broker_messages": float(commands.get("cmdstat_lpush", {}).get("calls", 0)),
    }


def redis_cpu_ms(url: str) -> float:
    import redis

    cpu = redis.Redis.from_url(url).info("cpu")
    return (float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"])) * 1000
