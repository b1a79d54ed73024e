"""Redis Sentinel (Debian's redis-sentinel 7.0) monitoring darner servers (issue 15, item 4).

Three sentinels watch a darner primary with two darner replicas, each server started from a
config file of its own (Sentinel sends CONFIG REWRITE inside its MULTI blocks). The
sentinels must discover both replicas (from INFO's slaveN lines) and each other (through
PUBLISH / SUBSCRIBE on `__sentinel__:hello`); after the primary is killed they promote a
replica (`MULTI; REPLICAOF NO ONE; CONFIG REWRITE; CLIENT KILL TYPE normal; CLIENT KILL TYPE
pubsub; EXEC`), repoint the other one, and when the old primary comes back on its port and
directory it rejoins as a replica of the new one. `replica-priority 0` keeps a replica from
being promoted, `replica-announced no` keeps one out of SENTINEL REPLICAS, and a primary busy
in a script (PING answers -BUSY) gets SCRIPT KILL from Sentinel. Every wait polls with a deadline; every process is stopped by its fixture.
"""

from __future__ import annotations

import shutil
import threading
import time

import pytest

import harness

pytestmark = pytest.mark.darner_only

QUORUM = 2
# 2000, as Redis's own Sentinel suite sets it (tests/sentinel/tests/includes/init-tests.tcl),
# not 1000: a sentinel that switches to the promoted replica restarts its PING clock for the
# new address but keeps the throttle of its link (one connect per second, started for the
# dead primary), so its first PING to the new primary leaves up to ~1.05 s after the switch
# (strace: connect() 0.53-0.96 s after +switch-master, each 1.00-1.07 s after its last try
# on the dead primary). With 1000 that was a +sdown of a healthy new primary 1.01-1.03 s
# after the switch and a second failover, in about one run in ten, with Debian's
# redis-server 7.0 in Darner's place too.
DOWN_AFTER_MS = 2000
FAILOVER_TIMEOUT_MS = 5000


def wait_for(cond, timeout, what, logs=()):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = cond()
        except (OSError, harness.HarnessError) as e:  # a server on its way up or down
            last = e
        else:
            if last:
                return last
        time.sleep(0.05)
    tails = "".join("\n--- %r log:\n%s" % (s, s.log_tail(3000)) for s in logs)
    raise AssertionError("timed out after %.0fs waiting for %s (last: %r)%s"
                         % (timeout, what, last, tails))


def sentinel_command():
    """Debian's redis-sentinel, or redis-server in sentinel mode (the same binary)."""
    sentinel = shutil.which("redis-sentinel")
    if sentinel:
        return sentinel, []
    server = harness.redis_server_bin()
    if not server:
        pytest.fail("redis-sentinel not found: install it with `apt-get install -y redis-sentinel`")
    return server, ["--sentinel"]


def as_dict(flat):
    """SENTINEL's [name, value, ...] replies (a dict once redis-py parsed them) as a dict of
    str."""
    if not isinstance(flat, dict):
        it = iter(flat)
        flat = dict(zip(it, it))
    return {k.decode(): v.decode() for k, v in flat.items()}


def role(server):
    c = server.client(socket_timeout=2, socket_connect_timeout=2)
    try:
        return c.execute_command("ROLE")
    finally:
        c.close()


def is_replica_of(server, primary_port):
    r = role(server)
    return (r[0] == b"slave" and r[2] == primary_port and r[3] == b"connected") and r


def is_primary(server):
    return role(server)[0] == b"master"


class Deployment:
    """A darner primary, two darner replicas and three sentinels, each with a config file."""

    def __init__(self, factory, tmp_path):
        self.factory = factory
        self.tmp = tmp_path
        self.sentinels = []
        self.primary = self.darner("primary")
        self.replicas = [self.darner("replica%d" % i, self.primary.port) for i in (1, 2)]

    def darner(self, name, primary_port=None, extra=""):
        conf = self.tmp / ("%s.conf" % name)
        # verbose: the log tells when each connection was accepted (a failed run's logs
        # show whether a sentinel connected late or the server answered late).
        conf.write_text("# %s\nloglevel verbose\n%s" % (name, extra))
        args = ["--replicaof", "127.0.0.1", primary_port] if primary_port else []
        srv = self.factory.server(*args, config_file=str(conf))
        srv.conf = conf
        return srv.start()

    def servers(self):
        return [self.primary] + self.replicas

    def start_sentinels(self, n=3):
        binary, extra = sentinel_command()
        for i in range(n):
            conf = self.tmp / ("sentinel%d.conf" % i)
            conf.write_text(
                "sentinel monitor mymaster 127.0.0.1 %d %d\n"
                "sentinel down-after-milliseconds mymaster %d\n"
                "sentinel failover-timeout mymaster %d\n"
                "sentinel parallel-syncs mymaster 2\n"
                "loglevel verbose\n"
                % (self.primary.port, QUORUM, DOWN_AFTER_MS, FAILOVER_TIMEOUT_MS))
            s = harness.Server(binary, extra, is_redis=True, config_file=str(conf),
                               name="sentinel")
            self.sentinels.append(s)
            s.start()
            # TILT for 5 s, as Redis's own Sentinel suite sets it (init-tests.tcl), not 30:
            # a sentinel whose timer ran 2 s late (the whole loaded machine stalled: seen
            # once in 30 runs, all three sentinels entering TILT in the same millisecond)
            # acts on nothing for the TILT period, and 30 s outlasted the waits below.
            c = s.client(socket_timeout=2, socket_connect_timeout=2)
            try:
                c.execute_command("SENTINEL", "DEBUG", "tilt-period", 5000)
            finally:
                c.close()

    def sentinel(self, i, *args):
        c = self.sentinels[i].client(socket_timeout=2, socket_connect_timeout=2)
        try:
            return c.execute_command("SENTINEL", *args)
        finally:
            c.close()

    def master_port(self, i):
        addr = self.sentinel(i, "GET-MASTER-ADDR-BY-NAME", "mymaster")
        return int(addr[1])

    def discovered(self):
        """Every sentinel knows both replicas (up) and the two other sentinels."""
        want = sorted(r.port for r in self.replicas)
        for i in range(len(self.sentinels)):
            reps = [as_dict(r) for r in self.sentinel(i, "REPLICAS", "mymaster")]
            ports = sorted(int(r["port"]) for r in reps if r["flags"] == "slave"
                           and r["master-link-status"] == "ok")
            if ports != want or len(self.sentinel(i, "SENTINELS", "mymaster")) != 2:
                return False
        return True

    def logs(self):
        return self.servers() + self.sentinels

    def failure_logs(self):
        """Every log, whole, for a failed test's report (see conftest.py)."""
        return self.logs()

    def stop(self):
        for s in self.sentinels:
            try:
                s.stop()
            except Exception:
                s.kill()


@pytest.fixture
def deployment(darner_factory, tmp_path):
    d = Deployment(darner_factory, tmp_path)
    try:
        yield d
    finally:
        d.stop()


def synced(primary, replicas):
    offset = primary.client().info("replication")["master_repl_offset"]
    return all(r.client().info("replication").get("slave_repl_offset") == offset
               for r in replicas)


def fill(c, n=200):
    with c.pipeline(transaction=False) as p:
        for i in range(n):
            p.set("k%d" % i, i)
        p.rpush("list", *range(50))
        p.hset("hash", mapping={"f%d" % i: i for i in range(20)})
        p.execute()


def digest(server):
    return server.client().execute_command("DEBUG", "DIGEST")


def failover(d, promoted, other, may_swap=True):
    """Kills the primary; the sentinels must promote `promoted` and repoint `other`, and the
    old primary, restarted on its port and directory, must follow the new one.

    Sentinel promises that its sentinels settle on one primary, not that it fails over
    once: a sentinel that learnt the switch late could, if its first PING to the promoted
    server went unanswered for down-after-milliseconds, fail over again to the other replica
    (with DOWN_AFTER_MS 1000, Sentinel's reconnect throttle alone did it: see DOWN_AFTER_MS).
    What must hold either way: the sentinels settle on one of the two replicas, nothing
    written before the kill is lost, the other replica follows it, its config file says so,
    and the old primary rejoins it."""
    old = d.primary
    old_digest = digest(old)
    old.kill()
    # (`may_swap` False: `other` can never be promoted, priority 0.)
    candidates = {promoted.port, other.port} if may_swap else {promoted.port}
    # 30 s: a failover attempt that found no majority is retried after 2 x failover-timeout
    # (10 s), after down-after-milliseconds and up to a TILT period.
    wait_for(lambda: all(d.master_port(i) in candidates for i in range(len(d.sentinels))),
             30, "every sentinel to name a promoted replica", d.logs())
    # Every sentinel sees the same primary up, with no failover running, for 2 s: only then
    # is it known which replica Sentinel settled on (see above), and only then may the old
    # primary come back (an empty server back during a spurious +sdown could be promoted).
    settled_since = [None]

    def settled():
        flags = [as_dict(d.sentinel(i, "MASTER", "mymaster"))["flags"]
                 for i in range(len(d.sentinels))]
        ports = {d.master_port(i) for i in range(len(d.sentinels))}
        if any(f != "master" for f in flags) or len(ports) != 1 or not ports <= candidates:
            settled_since[0] = None
            return False
        settled_since[0] = settled_since[0] or time.monotonic()
        return time.monotonic() - settled_since[0] >= 2.0

    wait_for(settled, 30, "every sentinel to see the new primary up for 2 s", d.logs())
    if d.master_port(0) != promoted.port:
        promoted, other = other, promoted
    wait_for(lambda: is_primary(promoted), 5, "the promoted replica to be a primary", d.logs())
    # 25 s: after a second failover, the replica promoted first still says it is a primary;
    # Sentinel turns it into a replica once it has said so for 8 s, seen in an INFO it asks
    # replicas for every 10 s.
    wait_for(lambda: is_replica_of(other, promoted.port), 25,
             "the other replica to follow the new primary", d.logs())
    # Nothing written before the kill (and replicated) was lost.
    assert digest(promoted) == old_digest
    wait_for(lambda: synced(promoted, [other]), 10, "the other replica to catch up", d.logs())
    assert digest(other) == old_digest
    # Sentinel's MULTI ... CONFIG REWRITE ... EXEC rewrote the config files.
    assert "replicaof" not in promoted.conf.read_text()
    wait_for(lambda: "replicaof 127.0.0.1 %d" % promoted.port in other.conf.read_text(), 5,
             "the repointed replica's config file to name the new primary", d.logs())

    # The old primary comes back as a primary (its data gone: no persistence); Sentinel
    # turns it into a replica of the new one, which gives it the data.
    promoted.client().set("after-failover", "1")
    old.fixed_port = old.port
    old.start()
    wait_for(lambda: is_replica_of(old, promoted.port), 20,
             "the old primary to rejoin as a replica of the new one", d.logs())
    wait_for(lambda: synced(promoted, [old, other]), 10, "the old primary to catch up", d.logs())
    assert digest(old) == digest(promoted)
    assert old.client().get("after-failover") == b"1"


def test_sentinel_discovers_darner_replicas_fails_over_and_the_old_primary_rejoins(deployment):
    d = deployment
    fill(d.primary.client())
    wait_for(lambda: synced(d.primary, d.replicas), 10, "the replicas to sync", d.logs())
    d.start_sentinels()
    wait_for(d.discovered, 15, "the sentinels to discover the replicas and each other",
             d.logs())
    reps = [as_dict(r) for r in d.sentinel(0, "REPLICAS", "mymaster")]
    for r in reps:
        # What Sentinel read from the replicas' INFO.
        assert r["master-host"] == "127.0.0.1" and int(r["master-port"]) == d.primary.port
        assert r["slave-priority"] == "100"
        assert int(r["slave-repl-offset"]) > 0
        assert len(r["runid"]) == 40
    # Sentinel picks the replica with the lexicographically smaller run ID (equal priorities
    # and offsets): know which one to expect (it may fail over once more: see failover).
    first = min(d.replicas, key=lambda r: r.client().info("server")["run_id"])
    other = d.replicas[1] if first is d.replicas[0] else d.replicas[0]
    failover(d, first, other)


def test_sentinel_never_promotes_a_replica_with_priority_zero(deployment):
    d = deployment
    fill(d.primary.client())
    wait_for(lambda: synced(d.primary, d.replicas), 10, "the replicas to sync", d.logs())
    # Priority 0 on the replica Sentinel would otherwise pick (see the test above).
    first = min(d.replicas, key=lambda r: r.client().info("server")["run_id"])
    other = d.replicas[1] if first is d.replicas[0] else d.replicas[0]
    c = first.client()
    assert c.config_set("replica-priority", 0)
    assert c.config_get("replica-priority") == {"replica-priority": "0"}
    assert c.info("replication")["slave_priority"] == 0
    d.start_sentinels()
    wait_for(d.discovered, 15, "the sentinels to discover the replicas and each other",
             d.logs())
    wait_for(lambda: {as_dict(r)["port"]: as_dict(r)["slave-priority"]
                      for r in d.sentinel(0, "REPLICAS", "mymaster")}
             == {str(first.port): "0", str(other.port): "100"},
             5, "Sentinel to read the priorities", d.logs())
    failover(d, other, first, may_swap=False)


def test_replica_priority_and_announced_are_what_info_tells_sentinel(darner_factory):
    p = darner_factory()
    rep = darner_factory("--replicaof", "127.0.0.1", p.port, "--slave-priority", "7",
                         "--replica-announced", "no")
    c = rep.client()
    info = c.info("replication")
    assert (info["slave_priority"], info["replica_announced"]) == (7, 0)
    assert c.config_get("replica-priority") == {"replica-priority": "7"}
    c.config_set("replica-priority", 0)
    c.config_set("replica-announced", "yes")
    info = c.info("replication")
    assert (info["slave_priority"], info["replica_announced"]) == (0, 1)
    with pytest.raises(Exception, match="argument must be between 0 and 2147483647"):
        c.config_set("replica-priority", -1)


def test_sentinel_kills_a_busy_script_on_a_primary_it_sees_down(deployment):
    # One sentinel, quorum 2: the primary can be subjectively down, never failed over. A
    # script past busy-reply-threshold makes PING answer -BUSY; once the primary is down for
    # down-after-milliseconds, Sentinel sends SCRIPT KILL.
    d = deployment
    c = d.primary.client()
    c.config_set("busy-reply-threshold", 100)
    d.start_sentinels(1)
    wait_for(lambda: as_dict(d.sentinel(0, "MASTER", "mymaster"))["flags"] == "master"
             and int(as_dict(d.sentinel(0, "MASTER", "mymaster"))["num-slaves"]) == 2,
             10, "the sentinel to know the primary", d.logs())
    result = {}

    def busy():
        try:
            result["reply"] = d.primary.client(socket_timeout=30).eval("while true do end", 0)
        except Exception as e:  # the kill's error
            result["error"] = str(e)

    t = threading.Thread(target=busy, daemon=True)
    t.start()
    try:
        wait_for(lambda: not t.is_alive(), 20, "Sentinel to kill the script", d.logs())
    finally:
        if t.is_alive():
            d.primary.client().execute_command("SCRIPT", "KILL")
            t.join(10)
    assert "Script killed by user with SCRIPT KILL" in result.get("error", ""), result
    assert "+sdown master mymaster" in d.sentinels[0].log_tail(20000)
    wait_for(lambda: "-sdown master mymaster" in d.sentinels[0].log_tail(20000), 10,
             "the primary to be up again for Sentinel", d.logs())
    assert is_primary(d.primary) and c.ping()


def test_sentinel_leaves_an_unannounced_replica_out_of_its_list(deployment):
    d = deployment
    hidden, shown = d.replicas
    hidden.client().config_set("replica-announced", "no")
    d.start_sentinels(1)

    def listed():
        known = int(as_dict(d.sentinel(0, "MASTER", "mymaster"))["num-slaves"])
        ports = [int(as_dict(r)["port"]) for r in d.sentinel(0, "REPLICAS", "mymaster")]
        return known == 2 and ports == [shown.port]

    # Both replicas are known (num-slaves), only the announced one is listed.
    wait_for(listed, 10, "Sentinel to list the announced replica only", d.logs())
