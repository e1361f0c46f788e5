"""Real Celery workers for integration tests.

- `celery_worker(broker_url, queue)`: a context manager running `celery -A tests.project worker`
  in a subprocess against the test database pytest-django created (so the test must use
  `transactional_db`: the worker only sees committed rows).
- `use_broker(broker_url, queue)`: points the in-process Celery app (`tests.project.celery.app`)
  at a real broker with `task_always_eager=False`, on a queue of its own, and restores the
  eager in-process configuration of tests/project/settings.py afterwards.
- The `celery_broker` fixture (exported through tests/integration/conftest.py) does the
  latter for one test; parametrize it indirectly with "redis" or "amqp".
- `broker_down(broker_url)`: inside the block the in-process app's broker refuses
  connections (its host on a closed port); `broker_hung(broker_url)`: it accepts
  connections and never answers.
- `wait_for(condition)`: poll the database (or anything) until a condition holds.

The tests use a queue of their own (`QUEUE`, purged before each test and deleted after), so
a worker consuming the broker's default queue elsewhere cannot take their tasks.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import kombu.pools
import pytest
from django.db import connection
from kombu import Connection

from tests.project.celery import app as celery_app

PROJECT_ROOT = Path(__file__).resolve().parents[2]
QUEUE = "hitl-integration-tests"
READY_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0

# Broker under test -> where its URL comes from. Redis is the CI broker (CELERY_BROKER_URL);
# RabbitMQ comes from HITL_TEST_AMQP_URL.
BROKER_SCHEMES = {"redis": ("redis", "rediss"), "amqp": ("amqp", "amqps", "pyamqp")}


def broker_url_for(kind: str) -> str | None:
    """The URL of the broker of this kind the environment configures, if any."""
    schemes = BROKER_SCHEMES[kind]
    candidates = [os.environ.get(f"HITL_TEST_{kind.upper()}_URL", "")]
    candidates.append(os.environ.get("CELERY_BROKER_URL", ""))
    for url in candidates:
        url = url.strip()
        if url and urlsplit(url).scheme in schemes:
            return url
    return None


def broker_unreachable(url: str, timeout: float = 3.0) -> str | None:
    """Why the broker at `url` cannot be used, or None when it answers."""
    try:
        with Connection(url, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as exc:  # any failure means: not usable here
        return f"{type(exc).__name__}: {exc}"
    return None


def is_postgres() -> bool:
    return connection.vendor == "postgresql"


def require_postgres(why: str) -> None:
    """Skip (with `why` PostgreSQL is needed) unless the default database is PostgreSQL."""
    if not is_postgres():
        pytest.skip(
            f"needs PostgreSQL ({why}): set DATABASE_URL=postgres://...; the default "
            f"database is {connection.vendor}"
        )


def test_database_url() -> str:
    """A postgres:// URL of the test database pytest-django created."""
    settings = connection.settings_dict
    user = quote(settings.get("USER") or "", safe="")
    password = settings.get("PASSWORD") or ""
    credentials = f"{user}:{quote(password, safe='')}" if password else user
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    at = f"{credentials}@" if credentials else ""
    return f"postgres://{at}{host}:{port}/{quote(settings['NAME'], safe='')}"


test_database_url.__test__ = False  # type: ignore[attr-defined]  # not a test


# --- the in-process app -------------------------------------------------------------------

SWITCHED_SETTINGS = ("broker_url", "task_always_eager", "task_default_queue")


def _drop_connections(app: Any) -> None:
    """Close the app's broker connections and forget its cached broker objects, so the next
    use follows app.conf again."""
    kombu.pools.reset()  # this process's connection and producer pools
    app._pool = None
    app.__dict__.pop("amqp", None)  # queues, router and producer pool are cached there


def purge(app: Any = celery_app) -> int:
    """Discard every message waiting in the app's current default queue."""
    return app.control.purge()


@contextmanager
def _app_sends_to(broker_url: str, queue: str) -> Iterator[Any]:
    """Point `tests.project.celery.app` at `broker_url` (not eager) on `queue`; restore after."""
    app = celery_app
    saved = {key: app.conf[key] for key in SWITCHED_SETTINGS}
    # Celery prefers the CELERY_BROKER_URL environment variable to app.conf.broker_url.
    saved_env = os.environ.get("CELERY_BROKER_URL")
    _drop_connections(app)
    os.environ["CELERY_BROKER_URL"] = broker_url
    app.conf.update(broker_url=broker_url, task_always_eager=False, task_default_queue=queue)
    try:
        assert app.conf.broker_url == broker_url
        yield app
    finally:
        _drop_connections(app)
        if saved_env is None:
            os.environ.pop("CELERY_BROKER_URL", None)
        else:
            os.environ["CELERY_BROKER_URL"] = saved_env
        app.conf.update(saved)


@contextmanager
def use_broker(broker_url: str, queue: str = QUEUE) -> Iterator[Any]:
    """Point `tests.project.celery.app` at a real broker (not eager) on `queue`, purged before
    and deleted after."""
    with _app_sends_to(broker_url, queue) as app:
        purge(app)
        try:
            yield app
        finally:
            _delete_queue(app, queue)


def _on_loopback_port(broker_url: str, port: int) -> str:
    """`broker_url` with its host replaced by 127.0.0.1:`port` (credentials kept)."""
    parts = urlsplit(broker_url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return parts._replace(netloc=netloc).geturl()


@contextmanager
def broker_down(broker_url: str) -> Iterator[Any]:
    """Inside the block the in-process app sends to the broker's host on a closed port:
    the broker is down (connections are refused) as far as this process can tell."""
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with _app_sends_to(_on_loopback_port(broker_url, port), QUEUE) as app:
        yield app


@contextmanager
def broker_hung(broker_url: str) -> Iterator[Any]:
    """Inside the block the in-process app sends to a hung broker: a TCP server on
    loopback that accepts connections and never answers. Leaving the block closes them,
    which releases anything still blocked on them."""
    accepted: list[socket.socket] = []
    stopped = threading.Event()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(64)
        server.settimeout(0.1)

        def accept_until_stopped() -> None:
            while not stopped.is_set():
                try:
                    accepted.append(server.accept()[0])
                except TimeoutError:
                    continue

        acceptor = threading.Thread(target=accept_until_stopped, daemon=True)
        acceptor.start()
        url = _on_loopback_port(broker_url, server.getsockname()[1])
        with _app_sends_to(url, QUEUE) as app:
            try:
                yield app
            finally:  # before the app lets go of its connections, which may wait on them
                stopped.set()
                acceptor.join()
                for peer in accepted:
                    peer.close()


def queue_length(app: Any = celery_app, queue: str = QUEUE) -> int:
    """How many messages wait in `queue` (not counting those a worker holds unacked)."""
    with app.connection_for_write() as conn:
        declared = app.amqp.queues[queue].bind(conn.default_channel).queue_declare()
    return declared.message_count


def _delete_queue(app: Any, queue: str) -> None:
    """Remove the test's queue (and whatever is left in it) from the broker."""
    with app.connection_for_write() as conn:
        app.amqp.queues[queue].bind(conn.default_channel).delete()


@pytest.fixture
def celery_broker(request: pytest.FixtureRequest) -> Iterator[str]:
    """The in-process app sends to a real broker for this test; yields the broker URL.

    Parametrize indirectly with "redis" (the default) or "amqp". Skips with the reason when
    the broker is not configured or does not answer (CI turns that skip into a failure).
    Start workers with `celery_worker(url)`: they consume the same queue.
    """
    kind = getattr(request, "param", "redis")
    url = broker_url_for(kind)
    if url is None:
        variable = "CELERY_BROKER_URL" if kind == "redis" else "HITL_TEST_AMQP_URL"
        pytest.skip(f"needs a {kind} broker: set {variable}")
    problem = broker_unreachable(url)
    if problem:
        pytest.skip(f"{kind} broker {url} is unreachable: {problem}")
    with use_broker(url):
        yield url


# --- the worker process ---------------------------------------------------------------------


class WorkerProcess:
    def __init__(
        self, process: subprocess.Popen[bytes], log_path: Path, name: str, broker_url: str
    ) -> None:
        self.process = process
        self.log_path = log_path
        self.name = name  # the node name, e.g. "hitl-integration-tests-1a2b3c4d@host"
        self.broker_url = broker_url
        self.saved_log: str | None = None  # kept when the temporary log file goes away

    def log(self) -> str:
        """The worker's log so far (all of it once the worker has stopped)."""
        if self.saved_log is not None:
            return self.saved_log
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if " ready." in self.log():
                return
            if not self.alive:
                raise RuntimeError(f"celery worker exited with {self.process.returncode}")
            time.sleep(0.05)
        raise TimeoutError(f"celery worker not ready within {timeout:.0f} s")

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM (warm shutdown), then SIGKILL if it does not exit in time.

        An idle worker on RabbitMQ without heartbeat or gossip has no timer that wakes its
        event loop, so it would notice the SIGTERM only after several seconds: a
        remote-control ping wakes it up at once.
        """
        if not self.alive:
            return
        self.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        nudged = False
        while self.alive and time.monotonic() < deadline:
            try:
                self.process.wait(0.2)
            except subprocess.TimeoutExpired:
                if not nudged:
                    nudged = True
                    self._wake()
        if self.alive:
            self.process.kill()
            self.process.wait(timeout)

    def _wake(self) -> None:
        try:
            with Connection(self.broker_url, connect_timeout=2) as conn:
                celery_app.control.ping([self.name], timeout=0.1, connection=conn)
        except Exception:  # best effort: SIGKILL follows anyway
            pass


@contextmanager
def celery_worker(
    broker_url: str,
    queue: str = QUEUE,
    *,
    timeout: float = READY_TIMEOUT,
    settings: str = "tests.project.worker_settings",
) -> Iterator[WorkerProcess]:
    """Run `celery -A tests.project worker -P solo` on the test database until the block ends.

    `settings` is the worker's DJANGO_SETTINGS_MODULE (a test project of its own can
    register test workflows there). Prints the worker's log when the block (or the start)
    fails.
    """
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "CELERY_BROKER_URL": broker_url,
        "DJANGO_SETTINGS_MODULE": settings,
        "PYTHONUNBUFFERED": "1",
    }
    name = f"{queue}-{uuid.uuid4().hex[:8]}@{socket.gethostname()}"
    with tempfile.TemporaryDirectory(prefix="hitl-worker-") as directory:
        log_path = Path(directory) / "worker.log"
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.project",
            "worker",
            "-P",
            "solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "--loglevel",
            "info",
            "--logfile",
            str(log_path),
            "-Q",
            queue,
            "-n",
            name,
        ]
        stderr_path = Path(directory) / "stderr.log"
        with open(stderr_path, "wb") as stderr:
            process = subprocess.Popen(
                command, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=stderr
            )
        worker = WorkerProcess(process, log_path, name, broker_url)
        try:
            worker.wait_ready(timeout)
            yield worker
        except BaseException:
            worker.stop()
            stderr_text = stderr_path.read_text(errors="replace")
            print(f"--- celery worker log ({log_path}) ---\n{worker.log()}")
            if stderr_text.strip():
                print(f"--- celery worker stderr ---\n{stderr_text}")
            raise
        finally:
            worker.stop()
            worker.saved_log = worker.log()


def wait_for(
    condition: Callable[[], Any], *, timeout: float = 20.0, interval: float = 0.05, what: str = ""
) -> Any:
    """Poll `condition` until it returns a truthy value (returned) or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what or condition}")
        time.sleep(interval)
