"""A producer and a worker for drizzle-jobs on PostgreSQL in Python, with psycopg 3 and plain SQL only.

It follows the tables and the protocol of docs/postgres.md ("The protocol in
plain SQL"), which is all another language needs:

  add       adds jobs in one transaction (an id the queue holds adds
            nothing), and wakes the workers with one pg_notify. An item's
            trace_context is the carrier OpenTelemetry's propagate.inject
            fills ({"traceparent": ..., "tracestate": ...}), stored as JSON
            text: the job's runs continue that trace
  claim     claims the first runnable job in claim order (priority, run_at,
            seq) with FOR UPDATE SKIP LOCKED, counts its attempt, names the
            worker as its owner and renews the worker's lease (its
            jobs_lease row, with its host and pid), in one transaction; a
            queue with limits is claimed under a lock on its jobs_queue row:
            a paused queue, a queue at its concurrency and a group at its
            per-group cap are skipped. It answers the job's trace context as
            a carrier for propagate.extract (or null)
  step      keeps a step's answer, fenced by the run (job, owner, attempt)
  complete  ends the job done and clears its owner, fenced by the run; only
            then drops the job's steps, and tells the workers

Times are the server's (timestamptz, now()); values, results and answers are
jsonb. Each command prints one JSON line.

Usage:
  python3 jobs_pg.py add <url> <queue> <items json: [{id, value, group?, priority?, delay_ms?, max_attempts?, trace_context?}]>
  python3 jobs_pg.py claim <url> <queue> <owner> <lease ms>
  python3 jobs_pg.py step <url> <seq> <owner> <attempt> <name> <answer json>
  python3 jobs_pg.py complete <url> <seq> <owner> <attempt> <result json>
"""

import json
import os
import socket
import sys

import psycopg

CHANNEL = "drizzle_jobs"
RUNNABLE = "state in ('waiting', 'scheduled')"
# The fence (docs/postgres.md): the job running this attempt for this owner, its row locked, so that a wait for
# another transaction re-checks it as it now is.
FENCED = """with fenced as (select seq from jobs_job
                             where seq = %(seq)s and state = 'running' and owner = %(owner)s and attempts = %(attempt)s
                             for no key update)"""


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


def notify(connection, kind, queue):
    # Delivered when the transaction commits, and folded with the same notice of the same transaction.
    connection.execute("select pg_notify(%s, %s)", (CHANNEL, f"{kind}:{queue}"))


def add(url, queue, items):
    with psycopg.connect(url, autocommit=True) as connection, connection.transaction():
        answers = []
        for item in items:
            delay_ms = item.get("delay_ms", 0)
            cursor = connection.execute(
                """insert into jobs_job (queue, id, grp, value, state, priority, max_attempts, run_at, trace_context)
                   values (%(queue)s, %(id)s, %(grp)s, %(value)s::jsonb, %(state)s, %(priority)s, %(max_attempts)s,
                           now() + %(delay_ms)s * interval '1 millisecond', %(trace_context)s)
                   on conflict (queue, id) do nothing""",
                {
                    "queue": queue,
                    "id": item["id"],
                    "grp": item.get("group"),
                    "value": to_json(item["value"]),
                    "state": "scheduled" if delay_ms > 0 else "waiting",
                    "priority": item.get("priority", 0),
                    "max_attempts": item.get("max_attempts", 10),
                    "delay_ms": delay_ms,
                    "trace_context": trace_context_text(item.get("trace_context")),
                },
            )
            answers.append({"id": item["id"], "added": cursor.rowcount == 1})
        notify(connection, "added", queue)
        return answers


def claim(url, queue, owner, lease_ms):
    with psycopg.connect(url, autocommit=True) as connection, connection.transaction():
        limits = connection.execute(
            "select paused, concurrency, concurrency_per_group from jobs_queue where name = %s", (queue,)
        ).fetchone()
        paused, total, per_group = limits if limits else (False, None, None)
        if total is not None or per_group is not None:
            # A limited queue's claims take turns on its row, so that its runs are counted after the claim
            # before this one committed: the limit holds across every claimer, in any language.
            paused, total, per_group = connection.execute(
                "select paused, concurrency, concurrency_per_group from jobs_queue where name = %s for update", (queue,)
            ).fetchone()
        (running,) = connection.execute(
            "select count(*) from jobs_job where queue = %s and state = 'running'", (queue,)
        ).fetchone()
        if paused or (total is not None and running >= total):
            return None
        capped = ""
        if per_group is not None:
            capped = """and (grp is null or grp not in (select grp from jobs_job where queue = %(queue)s and state = 'running'
                                                        and grp is not null group by grp having count(*) >= %(per_group)s))"""
        candidate = connection.execute(
            f"""select seq from jobs_job where queue = %(queue)s and {RUNNABLE} and run_at <= now() {capped}
                order by priority, run_at, seq limit 1
                for update skip locked""",
            {"queue": queue, "per_group": per_group},
        ).fetchone()
        if candidate is None:
            return None
        seq, job_id, grp, value, attempt, max_attempts, trace_context = connection.execute(
            f"""update jobs_job set state = 'running', attempts = attempts + 1, owner = %s
                where seq = %s and {RUNNABLE}
                returning seq, id, grp, value, attempts, max_attempts, trace_context""",
            (owner, candidate[0]),
        ).fetchone()
        # The worker's lease on every job it runs: one row, renewed as it claims (and, for long runs, every third of it).
        connection.execute(
            """insert into jobs_lease (owner, host, pid, expires_at)
               values (%s, %s, %s, now() + %s * interval '1 millisecond')
               on conflict (owner) do update set expires_at = excluded.expires_at""",
            (owner, socket.gethostname(), os.getpid(), lease_ms),
        )
        notify(connection, "claimed", queue)
        return {
            "seq": seq,
            "id": job_id,
            "group": grp,
            "value": value,
            "attempt": attempt,
            "max_attempts": max_attempts,
            "trace_context": trace_context_carrier(trace_context),
        }


def step(url, seq, owner, attempt, name, answer):
    with psycopg.connect(url, autocommit=True) as connection, connection.transaction():
        cursor = connection.execute(
            f"""{FENCED}
                insert into jobs_step (job, name, answer) select seq, %(name)s, %(answer)s::jsonb from fenced
                on conflict (job, name) do nothing""",
            {"seq": seq, "name": name, "answer": to_json(answer), "owner": owner, "attempt": attempt},
        )
        return {"written": cursor.rowcount == 1}


def complete(url, seq, owner, attempt, result):
    with psycopg.connect(url, autocommit=True) as connection, connection.transaction():
        ended = connection.execute(
            f"""{FENCED}
                update jobs_job set state = 'done', finished_at = now(), result = %(result)s::jsonb, error = null, owner = null
                where seq = (select seq from fenced)
                returning queue""",
            {"seq": seq, "result": to_json(result), "owner": owner, "attempt": attempt},
        ).fetchone()
        if ended is None:
            return {"landed": False}
        connection.execute("delete from jobs_step where job = %s", (seq,))
        notify(connection, "ended", ended[0])
        return {"landed": True}


def main(argv):
    command, url, *rest = argv
    if command == "add":
        queue, items = rest
        answer = add(url, queue, json.loads(items))
    elif command == "claim":
        queue, owner, lease_ms = rest
        answer = claim(url, queue, owner, int(lease_ms))
    elif command == "step":
        seq, owner, attempt, name, answer_json = rest
        answer = step(url, int(seq), owner, int(attempt), name, json.loads(answer_json))
    elif command == "complete":
        seq, owner, attempt, result = rest
        answer = complete(url, int(seq), owner, int(attempt), json.loads(result))
    else:
        raise SystemExit(f"unknown command {command}: expected add, claim, step or complete")
    print(to_json(answer))


if __name__ == "__main__":
    main(sys.argv[1:])
