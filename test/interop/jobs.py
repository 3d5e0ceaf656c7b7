"""A producer and a worker for drizzle-jobs in Python, with nothing but the sqlite3 module.

It follows the table layout and the protocol of the README ("Tables"), which
is all another language needs:

  add       adds jobs in one transaction; an id the queue holds adds nothing.
            An item's trace_context is the carrier OpenTelemetry's
            propagate.inject fills ({"traceparent": ..., "tracestate": ...}),
            stored as JSON text: the job's runs continue that trace
  claim     claims the first runnable job in claim order (priority, run_at,
            seq), counting its attempt and naming the worker as its owner, and
            renews the worker's lease (its jobs_lease row, with its host and
            pid), under the limits
            the queue's row holds: a paused queue, a queue at its concurrency
            and a group at its per-group cap are skipped. It answers the job's
            trace context as a carrier for propagate.extract (or null)
  step      keeps a step's answer, fenced by the run (job, owner, attempt)
  complete  ends the job done and clears its owner, fenced by the run; only
            then drops the job's steps

The counters in jobs_queue are kept by the engine's triggers: nothing here
touches them. Times are integer milliseconds since the Unix epoch. Each
command prints one JSON line.

Usage:
  python3 jobs.py add <db> <queue> <items json: [{id, value, group?, priority?, delay_ms?, max_attempts?, trace_context?}]>
  python3 jobs.py claim <db> <queue> <owner> <lease ms>
  python3 jobs.py step <db> <seq> <owner> <attempt> <name> <answer json>
  python3 jobs.py complete <db> <seq> <owner> <attempt> <result json>
"""

import json
import os
import socket
import sqlite3
import sys
import time

RUNNABLE = "state in ('waiting', 'scheduled')"
# The fence (docs/tables.md): the job running this attempt for this owner.
FENCED = """exists (select 1 from jobs_job j
                 where j.seq = :seq and j.state = 'running' and j.owner = :owner and j.attempts = :attempt)"""


def to_json(value):
    """JSON text as JavaScript's JSON.stringify writes it: no spaces."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def trace_context_text(carrier):
    """A trace context carrier as the column stores it: JSON text of the object, or None for none."""
    return None if carrier is None else to_json(carrier)


def trace_context_carrier(text):
    """The carrier a job's stored trace context holds, or None where it is null or not a JSON object."""
    try:
        carrier = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return carrier if isinstance(carrier, dict) else None


def now_ms():
    return int(time.time() * 1000)


def connect(path):
    # Autocommit mode: every transaction below is an explicit BEGIN IMMEDIATE, so it takes the write
    # lock first and waits (up to the timeout) instead of failing when another process holds it.
    connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    connection.execute("pragma journal_mode = wal")
    return connection


def immediate(connection, work):
    connection.execute("begin immediate")
    try:
        result = work()
        connection.execute("commit")
        return result
    except BaseException:
        connection.execute("rollback")
        raise


def add(path, queue, items):
    connection = connect(path)

    def insert_all():
        now = now_ms()
        answers = []
        for item in items:
            run_at = now + item.get("delay_ms", 0)
            # run_at and created_at are given: the column defaults use unixepoch('subsec'), which SQLite
            # before 3.42 does not know.
            cursor = connection.execute(
                """insert into jobs_job (queue, id, grp, value, state, priority, max_attempts, run_at, created_at, trace_context)
                   values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                   on conflict (queue, id) do nothing""",
                (
                    queue,
                    item["id"],
                    item.get("group"),
                    to_json(item["value"]),
                    "scheduled" if run_at > now else "waiting",
                    item.get("priority", 0),
                    item.get("max_attempts", 10),
                    run_at,
                    now,
                    trace_context_text(item.get("trace_context")),
                ),
            )
            answers.append({"id": item["id"], "added": cursor.rowcount == 1})
        return answers

    return immediate(connection, insert_all)


def claim(path, queue, owner, lease_ms):
    connection = connect(path)

    def claim_one():
        now = now_ms()
        # The limits the Node worker started last stored; null is no limit. Read inside the transaction.
        row = connection.execute(
            "select paused, running, concurrency, concurrency_per_group from jobs_queue where name = ?", (queue,)
        ).fetchone()
        paused, running, total, per_group = row if row else (0, 0, None, None)
        if paused or (total is not None and running >= total):
            return None
        capped = ""
        params = {"queue": queue, "now": now, "per_group": per_group}
        if per_group is not None:
            capped = """and (grp is null or grp not in (select grp from jobs_job where queue = :queue and state = 'running'
                                                        and grp is not null group by grp having count(*) >= :per_group))"""
        candidate = connection.execute(
            f"""select seq from jobs_job where queue = :queue and {RUNNABLE} and run_at <= :now {capped}
                order by priority, run_at, seq limit 1""",
            params,
        ).fetchone()
        if candidate is None:
            return None
        row = connection.execute(
            f"""update jobs_job set state = 'running', attempts = attempts + 1, owner = ?
                where seq = ? and {RUNNABLE}
                returning seq, id, grp, value, attempts, max_attempts, trace_context""",
            (owner, candidate[0]),
        ).fetchone()
        seq, job_id, grp, value, attempt, max_attempts, trace_context = row
        # The worker's lease on every job it runs: one row, renewed as it claims (and, for long runs, every third of it).
        connection.execute(
            """insert into jobs_lease (owner, host, pid, expires_at) values (?, ?, ?, ?)
               on conflict (owner) do update set expires_at = excluded.expires_at""",
            (owner, socket.gethostname(), os.getpid(), now + lease_ms),
        )
        return {
            "seq": seq,
            "id": job_id,
            "group": grp,
            "value": json.loads(value),
            "attempt": attempt,
            "max_attempts": max_attempts,
            "trace_context": trace_context_carrier(trace_context),
        }

    return immediate(connection, claim_one)


def step(path, seq, owner, attempt, name, answer):
    connection = connect(path)

    def keep():
        cursor = connection.execute(
            f"""insert into jobs_step (job, name, answer) select :seq, :name, :answer where {FENCED}
                on conflict (job, name) do nothing""",
            {"seq": seq, "name": name, "answer": to_json(answer), "owner": owner, "attempt": attempt},
        )
        return {"written": cursor.rowcount == 1}

    return immediate(connection, keep)


def complete(path, seq, owner, attempt, result):
    connection = connect(path)

    def end():
        cursor = connection.execute(
            f"""update jobs_job set state = 'done', finished_at = :now, result = :result, error = null, owner = null
                where seq = :seq and {FENCED}""",
            {"seq": seq, "now": now_ms(), "result": to_json(result), "owner": owner, "attempt": attempt},
        )
        landed = cursor.rowcount == 1
        if landed:
            connection.execute("delete from jobs_step where job = ?", (seq,))
        return {"landed": landed}

    return immediate(connection, end)


def main(argv):
    command, path, *rest = argv
    if command == "add":
        queue, items = rest
        answer = add(path, queue, json.loads(items))
    elif command == "claim":
        queue, owner, lease_ms = rest
        answer = claim(path, queue, owner, int(lease_ms))
    elif command == "step":
        seq, owner, attempt, name, answer_json = rest
        answer = step(path, int(seq), owner, int(attempt), name, json.loads(answer_json))
    elif command == "complete":
        seq, owner, attempt, result = rest
        answer = complete(path, int(seq), owner, int(attempt), json.loads(result))
    else:
        raise SystemExit(f"unknown command {command}: expected add, claim, step or complete")
    print(to_json(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
