"""Job queue libraries run unchanged against darner: BullMQ (Lua scripts, streams;
tests/clients/node/bullmq.mjs) and rq (Python; tests/clients/python/rq_jobs.py). Their
dependencies are installed by scripts/test.sh. Every job must run exactly once, retries and
delayed jobs included, with keys on every shard."""

from __future__ import annotations

import json
import os

from test_client_libs import run

HERE = os.path.dirname(os.path.abspath(__file__))


def test_bullmq_workers_complete_every_job_exactly_once(darner_factory):
    srv = darner_factory(threads=4)
    d = os.path.join(HERE, "clients", "node")
    if not os.path.isdir(os.path.join(d, "node_modules", "bullmq")):
        run(["npm", "ci", "--no-audit", "--no-fund"], d)
    out = run(["node", "bullmq.mjs", str(srv.port), "400"], d, timeout=120)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["completed"] == 400 and summary["twice"] == 0, summary
    assert summary["retried"] > 0, summary  # the retry path ran
    assert summary["counts"]["completed"] == 400, summary


def test_rq_workers_run_every_job_exactly_once(darner_factory):
    """rq (Python): jobs enqueued, then three worker processes drain the queue in burst mode
    (rq's dequeue, heartbeats, job registries and pub/sub channels, all against darner)."""
    import subprocess
    import sys

    import rq

    srv = darner_factory(threads=4)
    r = srv.client()
    q = rq.Queue("darner", connection=r)
    sys.path.insert(0, os.path.join(HERE, "clients", "python"))
    try:
        import rq_jobs
    finally:
        sys.path.pop(0)
    jobs = [q.enqueue(rq_jobs.record, i) for i in range(150)]
    env = dict(os.environ, DARNER_TEST_PORT=str(srv.port),
               PYTHONPATH=os.path.join(HERE, "clients", "python"))
    url = "redis://127.0.0.1:%d" % srv.port
    workers = [subprocess.Popen([sys.executable, "-m", "rq.cli", "worker", "--burst",
                                 "--worker-class", "rq.SimpleWorker", "--url", url, "darner"],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
               for _ in range(3)]
    for w in workers:
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err.decode(errors="replace")[-2000:]
    runs = {int(k): int(v) for k, v in r.hgetall("rq-runs").items()}
    assert sorted(runs) == list(range(150)) and set(runs.values()) == {1}, runs
    assert all(j.get_status(refresh=True) == rq.job.JobStatus.FINISHED for j in jobs)
    assert [j.return_value() for j in jobs[:3]] == [0, 2, 4]
