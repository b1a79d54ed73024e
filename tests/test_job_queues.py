"""Job queues that ship Lua scripts and use streams, run unchanged against darner: BullMQ
(tests/clients/node/bullmq.mjs; its dependencies are installed by scripts/test.sh). Every job
must complete exactly once, retries and delayed jobs included, with keys on every shard."""

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
