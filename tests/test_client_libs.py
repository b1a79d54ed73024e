"""Client-side caching with the client libraries the tracking issue names, against darner:
node-redis (`clientSideCache`, tests/clients/node/csc.mjs) and rueidis (`DoCache`,
tests/clients/go/main.go). Each shows a cache hit and a correct invalidation; redis-py's
cache is tested in test_tracking.py. scripts/test.sh installs their dependencies.
"""

from __future__ import annotations

import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, cwd, timeout=300):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, "%s failed:\nstdout:\n%s\nstderr:\n%s" % (cmd, p.stdout, p.stderr)
    return p.stdout


def test_node_redis_client_side_cache(darner):
    d = os.path.join(HERE, "clients", "node")
    if not os.path.isdir(os.path.join(d, "node_modules", "redis")):
        run(["npm", "ci", "--no-audit", "--no-fund"], d)
    out = run(["node", "csc.mjs", str(darner.port)], d, timeout=60)
    assert "hit and invalidation ok" in out


def test_rueidis_do_cache(darner):
    d = os.path.join(HERE, "clients", "go")
    out = run(["go", "run", ".", str(darner.port)], d)
    assert "hit and invalidation ok" in out
