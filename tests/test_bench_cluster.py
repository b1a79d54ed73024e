"""darner-bench --cluster against a real Redis Cluster of three primaries (Debian's
redis-server, made with `redis-cli --cluster create`; test_proxy's fixture): every request must
reach its key's primary (no MOVED), pipelined and open loop, and the counts darner-bench reports
must agree with what the nodes counted.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import redis

import harness
from harness import Server
from keyslot import key_slot
from test_proxy import redis_cluster


def bench_bin() -> str:
    b = os.path.join(os.path.dirname(os.path.abspath(harness.darner_bin())), "darner-bench")
    if not os.access(b, os.X_OK):
        pytest.fail("darner-bench not found next to DARNER_BIN (%s)" % b, pytrace=False)
    return b


@pytest.fixture(scope="module")
def cluster():
    with redis_cluster() as nodes:
        yield nodes


def bench(port, *args, check=True):
    out = subprocess.run([bench_bin(), "--port", str(port), "--cluster", "--json", *args],
                         capture_output=True, text=True, timeout=60)
    if not check:
        return out
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def clients(cluster):
    return [n.client() for n in cluster]


def reset(cluster):
    for c in clients(cluster):
        c.flushall()
        c.config_resetstat()


def slot_ranges(cluster):
    """port -> the slot ranges its node serves, as node 0 sees them."""
    ranges = {}
    for start, end, primary, *_ in cluster[0].client().execute_command("CLUSTER", "SLOTS"):
        ranges.setdefault(primary[1], []).append((start, end))
    return ranges


def calls(c, cmd):
    return c.info("commandstats").get("cmdstat_%s" % cmd, {}).get("calls", 0)


def test_sets_land_on_their_keys_primaries_and_the_counts_agree(cluster):
    reset(cluster)
    conns, pipeline, threads = 4, 8, 2
    r = bench(cluster[1].port, "--command", "set", "--key-pattern", "sequential",
              "--key-maximum", "3000", "--threads", str(threads), "--connections", str(conns),
              "--pipeline", str(pipeline), "--test-time", "1.5")
    assert r["errors"] == 0, r
    assert r["sets"] > 0
    ranges = slot_ranges(cluster)
    total = 0
    for node, c in zip(cluster, clients(cluster)):
        keys = list(c.scan_iter(count=1000))
        assert keys, "node %d got no key" % node.port
        for k in keys:
            s = key_slot(k)
            assert any(a <= s <= b for a, b in ranges[node.port]), (k, node.port)
        assert c.dbsize() == len(keys)
        total += len(keys)
        # A request sent to the wrong node would have been answered with MOVED. (Other
        # errors there are redis-py's: its CLIENT SETINFO on connecting, unknown to 7.0.)
        errors = c.info("errorstats")
        assert "errorstat_MOVED" not in errors and "errorstat_ASK" not in errors, errors
    # The cluster as a client sees it holds exactly the keys the nodes hold.
    rc = redis.RedisCluster(host="127.0.0.1", port=cluster[0].port)
    try:
        present = sum(rc.exists("key:%d" % i) for i in range(3000))
    finally:
        rc.close()
    assert present == total
    # Every SET the nodes executed was darner-bench's: those it counted, plus at most the
    # requests in flight when the run ended (answered after the deadline, not counted).
    executed = sum(calls(c, "set") for c in clients(cluster))
    assert r["sets"] <= executed <= r["sets"] + threads * conns * pipeline, (r["sets"], executed)
    assert total <= r["sets"]


def test_zipf_read_mostly_mix_open_and_closed_loop(cluster):
    reset(cluster)
    # Closed loop, pipelined: a 1:9 SET:GET cycle over Zipf keys.
    r = bench(cluster[2].port, "--ratio", "1:9", "--key-pattern", "zipf", "--key-maximum",
              "1000", "--connections", "5", "--pipeline", "16", "--test-time", "1")
    assert r["errors"] == 0, r
    assert r["gets"] > 0 and r["sets"] > 0
    assert r["hits"] > 0  # GETs of keys the SETs wrote, found on the same primary
    gets = sum(calls(c, "get") for c in clients(cluster))
    assert r["gets"] <= gets <= r["gets"] + 5 * 16
    for c in clients(cluster):
        assert calls(c, "get") > 0  # Zipf's popular keys are not all on one node
    # Open loop: the rate is what was asked, within what a loaded machine allows.
    r = bench(cluster[0].port, "--ratio", "1:9", "--key-pattern", "zipf", "--key-maximum",
              "1000", "--connections", "4", "--threads", "2", "--rate", "2000",
              "--test-time", "1")
    assert r["mode"] == "open"
    assert r["errors"] == 0, r
    assert 1000 <= r["ops"] <= 2100, r


def test_multi_key_commands_and_ycsb_are_refused_and_a_plain_server_too(cluster):
    for args in (["--command", "mget:2"], ["--command", "mset:10"], ["--ycsb", "a"]):
        out = bench(cluster[0].port, *args, check=False)
        assert out.returncode == 2
        assert "single-key commands only" in out.stderr
    binary = harness.redis_server_bin()
    plain = Server(binary, [], is_redis=True, name="plain-redis").start()
    try:
        out = bench(plain.port, "--test-time", "0.2", check=False)
    finally:
        plain.stop()
    assert out.returncode == 1
    assert "cluster support disabled" in out.stderr, out.stderr
