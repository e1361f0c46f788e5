"""What the audit trail costs: the answer path with its entries and without, and the time
`verify` takes over many entries.

Run from the repository root:

    python bench/audit_cost.py                     # both databases, 400 answers each way
    python bench/audit_cost.py --backend sqlite    # sqlite | postgres | postgres-prepared | all
    python bench/audit_cost.py --answers 100 --verify-entries 10000   # a quick run

1. `services.submit_function_responses` (one machine answer: one `answer.accepted` entry)
   and `services.decide` (a person's decision that answers: `decision.recorded` then
   `answer.accepted`), timed from call to return, the transaction committed. The run the
   answer enqueues is not started (it is engine work, the same either way). "without"
   replaces `workflows.audit.trail.record` by a function that does nothing; the two
   alternate call by call, so drift in the machine's load falls on both alike.
   Target: at most +0.3 ms per answer (median).
2. `verify` over N entries (default 100,000: 10,000 invocations of 10 entries, each bound
   to its question), written straight into the table as a valid trail; the time printed.

`postgres-prepared` runs the PostgreSQL part with HITL["POSTGRES_PREPARED_STATEMENTS"] on
(the entry's statement is then planned once per connection). PostgreSQL at
$HITL_BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/h6; its
workflow tables are emptied at the start). SQLite on a temporary file with the project's
settings. Each backend runs in a subprocess (`--child`) with DJANGO_SETTINGS_MODULE=
hitl_site.settings and DEBUG=false.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.common import machine, percentile  # noqa: E402  (after the path is set)

DATABASE_URL = os.environ.get("HITL_BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h6")
TARGET_MS = 0.3
WORKFLOW = "bench_audit_question"


# --- in the child: Django is set up --------------------------------------------------------


def setup() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from workflows.engine import RequestInput, Workflow, node
    from workflows.registry import registry

    @node(name="question")
    def question(node_input: Any) -> RequestInput:
        return RequestInput(
            message=f"Approve expense {node_input['n']}?",
            payload=node_input,
            response_schema={
                "type": "object",
                "properties": {"approved": {"type": "boolean"}},
                "required": ["approved"],
            },
        )

    registry.register(Workflow(name=WORKFLOW, edges=[("START", question)]))


def empty_tables() -> None:
    from django.db import connection

    from workflows.models import AuditChainHead, AuditEntry, Invocation, Session

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            tables = [m._meta.db_table for m in (AuditEntry, AuditChainHead, Invocation, Session)]
            cursor.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
        else:
            for model in (AuditEntry, AuditChainHead):
                cursor.execute(f"DELETE FROM {model._meta.db_table}")
            Invocation.objects.all().delete()
            Session.objects.all().delete()


def waiting_questions(count: int) -> list[Any]:
    from workflows import services
    from workflows.models import Interrupt

    invocations = [services.start(WORKFLOW, {"n": n}) for n in range(count)]
    return list(Interrupt.objects.filter(invocation__in=invocations).order_by("created_at"))


def round_trip() -> float:
    """One `SELECT 1` on the same connection, in ms: how busy the machine is meanwhile."""
    from django.db import connection

    begin = time.perf_counter_ns()
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return (time.perf_counter_ns() - begin) / 1e6


def time_answers(answers: int) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    from workflows import services
    from workflows.audit import trail

    users = get_user_model()
    approver = users.objects.filter(username="bench-approver").first()
    approver = approver or users.objects.create_superuser("bench-approver", password="x")
    real_record = trail.record
    recording: list[float] = []  # ms inside trail.record, per audited call

    def timed_record(*args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter_ns()
        entry = real_record(*args, **kwargs)
        recording[-1] += (time.perf_counter_ns() - begin) / 1e6
        return entry

    def no_record(*args: Any, **kwargs: Any) -> None:
        return None

    def machine(question: Any) -> None:
        services.submit_function_responses(
            [{"id": question.pk, "name": "question", "response": {"approved": True}}]
        )

    def person(question: Any) -> None:
        services.decide(question.pk, {"approved": True}, actor=approver)

    enqueue_run = services.enqueue_run
    results: dict[str, Any] = {}
    for name, answer in (("submit_function_responses", machine), ("decide", person)):
        services.enqueue_run = enqueue_run
        questions = waiting_questions(2 * answers + 20)
        services.enqueue_run = lambda invocation_id: None  # no engine run after the answer
        labels = ("with", "without", "with cpu", "without cpu", "round trip", "in record")
        samples: dict[str, list[float]] = {label: [] for label in labels}
        recording.clear()
        for index, question in enumerate(questions):
            audited = index % 2 == 0
            trail.record = timed_record if audited else no_record
            recording.append(0.0)
            begin, cpu = time.perf_counter_ns(), time.thread_time_ns()
            answer(question)
            cpu, elapsed = time.thread_time_ns() - cpu, time.perf_counter_ns() - begin
            if index >= 20:  # the first ones warm the connection and the caches
                label = "with" if audited else "without"
                samples[label].append(elapsed / 1e6)
                samples[f"{label} cpu"].append(cpu / 1e6)
                samples["round trip"].append(round_trip())
                if audited:
                    samples["in record"].append(recording[-1])
        trail.record, services.enqueue_run = real_record, enqueue_run
        results[name] = {
            label: {"median": statistics.median(s), "p99": percentile(s, 99), "n": len(s)}
            for label, s in samples.items()
        }
    return results


def write_trail(entries: int, per_chain: int = 10) -> None:
    """A valid trail of `entries`, `per_chain` per invocation, straight into the tables."""
    from django.db import transaction
    from django.utils import timezone

    from workflows.audit.canonical import GENESIS, entry_text, sha256_hex, subject_hash
    from workflows.audit.entries import entry_content
    from workflows.models import AuditEntry, Interrupt, Invocation, Session

    null_hash = sha256_hex(b"null")  # the input_hash of an invocation without input
    chains = entries // per_chain
    for start in range(0, chains, 1000):
        with transaction.atomic():
            batch = range(start, min(start + 1000, chains))
            sessions = Session.objects.bulk_create([Session() for _ in batch])
            invocations = Invocation.objects.bulk_create(
                [
                    Invocation(session=s, workflow_name=WORKFLOW, workflow_version="1")
                    for s in sessions
                ]
            )
            questions = Interrupt.objects.bulk_create(
                [
                    Interrupt(
                        id=f"bench-{start + i}",
                        invocation=invocation,
                        workflow_name=WORKFLOW,
                        path="question@1",
                        run_id=1,
                        message=f"Approve expense {start + i}?",
                        payload={"n": start + i},
                    )
                    for i, invocation in enumerate(invocations)
                ]
            )
            rows, heads = [], []
            now = timezone.now()
            for invocation, question in zip(invocations, questions, strict=True):
                subject = subject_hash(question.message, question.payload, None)
                head = GENESIS
                started = {"workflow": WORKFLOW, "version": "1", "input_hash": null_hash}
                for n in range(per_chain):
                    entry = AuditEntry(
                        invocation_id=invocation.pk,
                        interrupt_id=question.pk if n else None,
                        action="interrupt.claimed" if n else "invocation.started",
                        data={"n": n} if n else started,
                        subject_hash=subject if n else "",
                        prev_hash=head,
                        created_at=now,
                    )
                    entry.canonical_text = entry_text(entry_content(entry))
                    entry.entry_hash = head = sha256_hex(entry.canonical_text.encode())
                    rows.append(entry)
                invocation.audit_head = head
                heads.append(invocation)
            AuditEntry.objects.bulk_create(rows)
            Invocation.objects.bulk_update(heads, ["audit_head"])


def child(args: argparse.Namespace) -> None:
    setup()
    if args.prepared:
        from django.conf import settings

        from workflows.conf import hitl_settings

        settings.HITL = {**settings.HITL, "POSTGRES_PREPARED_STATEMENTS": True}
        hitl_settings.reload()
    from django.db import connection

    from workflows.audit.verify import verify

    empty_tables()
    results: dict[str, Any] = {"vendor": connection.vendor}
    results["answers"] = time_answers(args.answers)
    empty_tables()
    write_trail(args.verify_entries)
    begin = time.perf_counter()
    report = verify()
    results["verify"] = {
        "entries": report.entries,
        "chains": report.chains,
        "seconds": time.perf_counter() - begin,
        "ok": report.ok,
    }
    empty_tables()
    Path(args.child).write_text(json.dumps(results))


# --- the parent: one child per backend, then the table --------------------------------------


def run_child(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any] | None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="hitl_site.settings", DEBUG="false", LOG_LEVEL="WARNING")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    if kind == "sqlite":
        env["SQLITE_PATH"] = str(workdir / "bench.sqlite3")
    else:
        env["DATABASE_URL"] = DATABASE_URL
    out = workdir / f"{kind}.json"
    command = [sys.executable, __file__, "--child", str(out)]
    command += ["--answers", str(args.answers), "--verify-entries", str(args.verify_entries)]
    if kind == "postgres-prepared":
        command.append("--prepared")
    if subprocess.run(command, cwd=ROOT, env=env, check=False).returncode != 0:
        print(f"!! {kind} child failed", file=sys.stderr)
        return None
    return json.loads(out.read_text())


def report(kind: str, results: dict[str, Any]) -> bool:
    met = True
    print(f"\n{kind}: the answer path, ms per call: wall (median, p99) and this thread's CPU")
    print(f"{'call':26} {'without audit':>22} {'with audit':>22} {'added':>15}  target")
    for name, timing in results["answers"].items():
        trip = timing["round trip"]
        without, audited = timing["without"], timing["with"]
        cpu_without, cpu_with = timing["without cpu"], timing["with cpu"]
        added = audited["median"] - without["median"]
        added_cpu = cpu_with["median"] - cpu_without["median"]
        ok = added <= TARGET_MS
        met &= ok
        print(
            f"{name:26} {without['median']:7.3f} {without['p99']:7.3f} {cpu_without['median']:6.3f}"
            f" {audited['median']:7.3f} {audited['p99']:7.3f} {cpu_with['median']:6.3f}"
            f" {added:+7.3f} {added_cpu:+7.3f}  {'met' if ok else 'MISSED'} (wall, "
            f"<= +{TARGET_MS} ms; n={audited['n']}; SELECT 1 meanwhile: median "
            f"{trip['median']:.3f}, p99 {trip['p99']:.3f})"
        )
        inside = timing["in record"]
        print(
            f"{'':26} of which inside trail.record (the entries' statements, before commit): "
            f"median {inside['median']:.3f}, p99 {inside['p99']:.3f}"
        )
    check = results["verify"]
    print(
        f"verify: {check['entries']:,} entries in {check['chains']:,} chains, "
        f"{check['seconds']:.2f} s ({'ok' if check['ok'] else 'PROBLEMS FOUND'})"
    )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend",
        choices=["sqlite", "postgres", "postgres-prepared", "all"],
        default="all",
        help='postgres-prepared: with HITL["POSTGRES_PREPARED_STATEMENTS"] (all: the three)',
    )
    parser.add_argument("--answers", type=int, default=400, help="answers timed each way")
    parser.add_argument("--verify-entries", type=int, default=100_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--prepared", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    kinds = ["sqlite", "postgres", "postgres-prepared"] if args.backend == "all" else [args.backend]
    met = True
    print(machine())
    with tempfile.TemporaryDirectory() as workdir:
        for kind in kinds:
            results = run_child(kind, args, Path(workdir))
            met &= results is not None and report(kind, results)
    print("\nevery target met" if met else "\nsome target missed")


if __name__ == "__main__":
    main()
