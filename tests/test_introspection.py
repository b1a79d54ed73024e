"""What test suites and tools expect to find (issue 11): config aliases, CONFIG SET's errors,
runtime rebinding, LATENCY, INFO's fields and COMMAND DOCS, checked against redis-server."""

from __future__ import annotations

import time

import pytest
import redis


def err(client, *args) -> str:
    with pytest.raises(redis.ResponseError) as e:
        client.execute_command(*args)
    return str(e.value)


# ---------------------------------------------------------------------------
# COMMAND DOCS
# ---------------------------------------------------------------------------

def _tokens(docs) -> list:
    """Every (argument name, token) pair of a COMMAND DOCS argument tree, in order."""
    out = []

    def walk(args):
        for a in args:
            d = dict(zip(a[::2], a[1::2]))
            out.append((d.get(b"name"), d.get(b"token")))
            walk(d.get(b"arguments", []))

    body = dict(zip(docs[1][::2], docs[1][1::2]))
    walk(body[b"arguments"])
    return out


@pytest.mark.parametrize("cmd", ["GEOSEARCH", "GEOSEARCHSTORE", "GEODIST"])
def test_command_docs_geo_unit_tokens_match_redis(darner, redis_ref, cmd):
    ours = darner.raw().call("COMMAND", "DOCS", cmd).py()
    ref = redis_ref.raw().call("COMMAND", "DOCS", cmd).py()
    got = _tokens(ours)
    assert (b"m", b"M") in got and (b"mi", b"MI") in got
    # The argument names of the shared specs are not always Redis's; the tokens are what
    # clients and tools match on.
    assert [t for _, t in got] == [t for _, t in _tokens(ref)]


# ---------------------------------------------------------------------------
# config aliases
# ---------------------------------------------------------------------------

ALIASES = {
    "hash-max-ziplist-entries": "hash-max-listpack-entries",
    "hash-max-ziplist-value": "hash-max-listpack-value",
    "zset-max-ziplist-entries": "zset-max-listpack-entries",
    "zset-max-ziplist-value": "zset-max-listpack-value",
    "list-max-ziplist-size": "list-max-listpack-size",
    "slave-read-only": "replica-read-only",
    "slave-ignore-maxmemory": "replica-ignore-maxmemory",
    "slave-lazy-flush": "replica-lazy-flush",
}


def test_config_aliases_are_listed_and_set_like_redis(darner_factory, redis_ref):
    srv = darner_factory()
    for c in (srv.client(), redis_ref.client()):
        listed = c.execute_command("CONFIG", "GET", "*")
        for alias, name in ALIASES.items():
            # CONFIG GET * lists the alias under its own name, with the directive's value.
            assert listed[alias.encode()] == listed[name.encode()], (c, alias)
        assert c.execute_command("CONFIG", "SET", "zset-max-ziplist-entries", "7") == b"OK"
        assert c.execute_command("CONFIG", "GET", "zset-max-listpack-entries") == \
            {b"zset-max-listpack-entries": b"7"}
        # A plain name is answered under the name as typed.
        assert c.execute_command("CONFIG", "GET", "ZSET-MAX-ZIPLIST-ENTRIES") == \
            {b"ZSET-MAX-ZIPLIST-ENTRIES": b"7"}
        # An alias and its directive in one SET are two parameters (the later value wins).
        assert c.execute_command("CONFIG", "SET", "zset-max-ziplist-entries", "8",
                                 "zset-max-listpack-entries", "9") == b"OK"
        assert c.execute_command("CONFIG", "GET", "zset-max-ziplist-entries") == \
            {b"zset-max-ziplist-entries": b"9"}
    # The session's reference server goes back to its default (a later differential test
    # of sorted sets prints scores by encoding: -0 stays -0 only in a skiplist).
    redis_ref.client().config_set("zset-max-listpack-entries", "128")
    ours, ref = srv.client(), redis_ref.client()
    assert ours.execute_command("CONFIG", "GET", "*ziplist*").keys() == \
        ref.execute_command("CONFIG", "GET", "*ziplist*").keys()
    for args in (("hash-max-ziplist-value", "abc"), ("list-max-ziplist-size", "x"),
                 ("list-max-ziplist-entries", "1")):
        assert err(ours, "CONFIG", "SET", *args) == err(ref, "CONFIG", "SET", *args)


def test_config_aliases_work_in_the_config_file_and_on_the_command_line(darner_factory, tmp_path):
    import harness
    port = harness.free_port()
    conf = tmp_path / "darner.conf"
    # list-max-ziplist-entries is a directive Redis 7.2 reads and ignores.
    conf.write_text("port %d\nbind 127.0.0.1\nhash-max-ziplist-entries 2\n"
                    "list-max-ziplist-entries 512\n" % port)
    srv = darner_factory.server("--zset-max-ziplist-value", "5", threads=1, config_file=str(conf),
                                port=port, add_port=False)
    srv.start()
    c = srv.client()
    assert c.execute_command("CONFIG", "GET", "hash-max-listpack-entries") == \
        {b"hash-max-listpack-entries": b"2"}
    assert c.execute_command("CONFIG", "GET", "zset-max-listpack-value") == \
        {b"zset-max-listpack-value": b"5"}
    c.hset("h", mapping={"a": 1, "b": 2})
    assert c.object("encoding", "h") == b"listpack"
    c.hset("h", "c", 3)
    assert c.object("encoding", "h") == b"hashtable"
    c.zadd("z", {"short": 1})
    assert c.object("encoding", "z") == b"listpack"
    c.zadd("z", {"longer-than-five": 2})
    assert c.object("encoding", "z") == b"skiplist"


def test_config_file_values_are_unquoted_as_redis_unquotes_them(darner_factory, tmp_path):
    """redis.conf lines are split by Redis's sdssplitargs: `\\xHH` and `\\b` escapes in double
    quotes, a quote opening mid-word."""
    import harness
    port = harness.free_port()
    conf = tmp_path / "darner.conf"
    conf.write_text('port %d\nbind 127.0.0.1\nrequirepass "p\\x41ss w\\x6Frd"\n'
                    'masteruser ab"c d"\n' % port)
    srv = darner_factory.server(threads=1, config_file=str(conf), port=port, add_port=False)
    srv.start()
    c = srv.client(password="pAss word")
    assert c.execute_command("CONFIG", "GET", "masteruser") == {b"masteruser": b"abc d"}


# ---------------------------------------------------------------------------
# CONFIG SET's errors
# ---------------------------------------------------------------------------

CONFIG_SET_ERRORS = [
    ("daemonize", "no"),
    ("daemonize", "yes"),
    ("databases", "4"),
    ("enable-debug-command", "no"),
    ("cluster-enabled", "no"),
    ("io-threads", "1"),
    ("replicaof", "no one"),
    ("nosuch", "1"),
    ("maxclients", "10", "maxclients", "20"),
    ("nosuch", "1", "daemonize", "no"),
    ("daemonize", "no", "nosuch", "1"),
    ("maxclients", "5", "databases", "4"),
    ("maxclients", "abc"),
    ("hz", "10", "maxclients", "abc"),
    ("protected-mode", "maybe"),
    ("maxclients",),
]


@pytest.mark.parametrize("args", CONFIG_SET_ERRORS, ids=lambda a: " ".join(a))
def test_config_set_errors_match_redis(darner, redis_ref, args):
    ours = err(darner.client(), "CONFIG", "SET", *args)
    assert ours == err(redis_ref.client(), "CONFIG", "SET", *args)


def test_config_set_failure_rolls_back_every_parameter(darner, redis_ref):
    for c in (darner.client(), redis_ref.client()):
        c.config_set("maxclients", "100")
        c.config_set("timeout", "0")
        e = err(c, "CONFIG", "SET", "maxclients", "200", "timeout", "7", "hz", "nope")
        assert "possibly related to argument 'hz'" in e
        assert c.config_get("maxclients") == {"maxclients": "100"}
        assert c.config_get("timeout") == {"timeout": "0"}
        assert c.execute_command("CONFIG", "SET", "maxclients", "200", "timeout", "7") == b"OK"
        assert c.config_get("timeout") == {"timeout": "7"}
        c.config_set("maxclients", "10000")
        c.config_set("timeout", "0")


# ---------------------------------------------------------------------------
# LATENCY
# ---------------------------------------------------------------------------

def _resp(server, *args):
    """A reply as plain Python data, read raw (redis-py rewrites some of these replies)."""
    with server.raw() as c:
        return c.call(*args).py()


@pytest.fixture
def latency_pair(darner_factory, redis_ref):
    """A fresh darner and the reference, both with the latency monitor at 10 ms."""
    ours = darner_factory()
    servers = (ours, redis_ref)
    for s in servers:
        _resp(s, "CONFIG", "SET", "latency-monitor-threshold", "10")
        _resp(s, "LATENCY", "RESET")
        _resp(s, "CONFIG", "RESETSTAT")
    yield servers
    for s in servers:
        _resp(s, "CONFIG", "SET", "latency-monitor-threshold", "0",
              "latency-tracking", "yes", "latency-tracking-info-percentiles", "50 99 99.9")
        _resp(s, "LATENCY", "RESET")


def _digits(text: bytes) -> bytes:
    import re
    return re.sub(rb"\d+", b"N", text)


def test_latency_monitor_records_slow_commands_like_redis(latency_pair):
    got = {}
    for s in latency_pair:
        assert _resp(s, "LATENCY", "LATEST") == []
        _resp(s, "DEBUG", "SLEEP", "0.03")
        _resp(s, "PING")
        latest = _resp(s, "LATENCY", "LATEST")
        assert len(latest) == 1 and latest[0][0] == b"command", latest
        _, when, last, high = latest[0]
        assert 30 <= last == high < 1000 and abs(when - time.time()) < 5
        history = _resp(s, "LATENCY", "HISTORY", "command")
        assert history == [[when, last]]
        got[s] = (
            _digits(_resp(s, "LATENCY", "GRAPH", "command")),
            _resp(s, "LATENCY", "HISTORY", "nosuch"),
            _resp(s, "LATENCY", "GRAPH", "nosuch"),
            _resp(s, "LATENCY", "RESET", "nosuch", "command"),
            _resp(s, "LATENCY", "LATEST"),
        )
    ours, ref = got.values()
    assert ours == ref
    assert ours[3] == 1 and ours[4] == []


def test_latency_monitor_off_records_nothing(latency_pair):
    for s in latency_pair:
        _resp(s, "CONFIG", "SET", "latency-monitor-threshold", "0")
        _resp(s, "DEBUG", "SLEEP", "0.02")
        assert _resp(s, "LATENCY", "LATEST") == []
        doctor = _resp(s, "LATENCY", "DOCTOR")
        assert isinstance(doctor, bytes) and doctor


REDIS_BUCKETS = {1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227, 8454, 16908,
                 33816, 67633, 135266, 270532, 541065}


def test_latency_histogram_shape_matches_redis(latency_pair):
    got = []
    for s in latency_pair:
        with s.raw() as c:
            for i in range(100):
                c.send("SET", "k%d" % i, "v")
            c.read_replies(100)
        flat = _resp(s, "LATENCY", "HISTOGRAM", "set", "nosuch", "config")
        # RESP2 maps are flat arrays.
        h = dict(zip(flat[::2], flat[1::2]))
        body = dict(zip(h[b"set"][::2], h[b"set"][1::2]))
        assert body[b"calls"] == 100
        buckets = body[b"histogram_usec"]
        keys, counts = buckets[::2], buckets[1::2]
        assert set(keys) <= REDIS_BUCKETS and counts[-1] == 100
        assert counts == sorted(counts) and len(set(counts)) == len(counts)
        assert b"config|resetstat" in h and b"config|get" not in h
        got.append((sorted(h), list(body)))
        assert _resp(s, "LATENCY", "HISTOGRAM", "nosuch") == []
    assert got[0] == got[1]


def test_latency_tracking_and_info_latencystats(latency_pair):
    import re
    for s in latency_pair:
        _resp(s, "SET", "a", "1")
        _resp(s, "GET", "a")
        info = _resp(s, "INFO", "latencystats").decode()
        assert info.startswith("# Latencystats\r\n")
        line = re.search(r"^latency_percentiles_usec_get:(.*)\r$", info, re.M)
        assert line and re.fullmatch(r"p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}",
                                     line.group(1)), info
        assert "latencystats" not in _resp(s, "INFO").decode().lower()
        assert "# Latencystats" in _resp(s, "INFO", "everything").decode()
        _resp(s, "CONFIG", "SET", "latency-tracking-info-percentiles", "0 99.90 100")
        assert _resp(s, "CONFIG", "GET", "latency-tracking-info-percentiles") == \
            [b"latency-tracking-info-percentiles", b"0 99.9 100"]
        info = _resp(s, "INFO", "latencystats").decode()
        assert re.search(r"^latency_percentiles_usec_get:p0=\d+\.\d{3},p99\.9=\d+\.\d{3},"
                         r"p100=\d+\.\d{3}\r$", info, re.M), info
        # Off: no histograms are kept, and INFO lists none.
        _resp(s, "CONFIG", "SET", "latency-tracking", "no")
        _resp(s, "CONFIG", "RESETSTAT")
        _resp(s, "GET", "a")
        assert _resp(s, "LATENCY", "HISTOGRAM", "get") == []
        assert _resp(s, "INFO", "latencystats") == b"# Latencystats\r\n"


# ---------------------------------------------------------------------------
# INFO's fields
# ---------------------------------------------------------------------------

# The fields of Redis's INFO that Darner reports, by section. Every name is checked against a
# live redis-server's INFO too, so a misspelt name fails. (Fields Darner leaves out: the
# jemalloc allocator_* figures, used_memory_overhead/_startup/_dataset, expired_stale_perc,
# total_reads/writes_processed, reply_buffer_*, used_cpu_*_main_thread.)
INFO_FIELDS = {
    "Server": """redis_version redis_git_sha1 redis_git_dirty redis_build_id redis_mode os
        arch_bits monotonic_clock multiplexing_api atomicvar_api gcc_version process_id
        process_supervised run_id tcp_port server_time_usec uptime_in_seconds uptime_in_days
        hz configured_hz lru_clock executable config_file io_threads_active""",
    "Clients": """connected_clients cluster_connections maxclients
        client_recent_max_input_buffer client_recent_max_output_buffer blocked_clients
        tracking_clients clients_in_timeout_table""",
    "Memory": """used_memory used_memory_human used_memory_rss used_memory_rss_human
        used_memory_peak used_memory_peak_human used_memory_peak_perc used_memory_lua
        used_memory_vm_eval used_memory_lua_human used_memory_scripts_eval
        number_of_cached_scripts number_of_functions number_of_libraries
        used_memory_vm_functions used_memory_vm_total used_memory_vm_total_human
        used_memory_functions used_memory_scripts used_memory_scripts_human
        total_system_memory total_system_memory_human maxmemory maxmemory_human
        maxmemory_policy mem_fragmentation_ratio mem_fragmentation_bytes
        mem_not_counted_for_evict mem_replication_backlog mem_total_replication_buffers
        mem_clients_slaves mem_cluster_links mem_aof_buffer mem_allocator
        active_defrag_running lazyfree_pending_objects lazyfreed_objects""",
    "Persistence": """loading async_loading current_cow_peak current_cow_size
        current_cow_size_age current_fork_perc current_save_keys_processed
        current_save_keys_total rdb_changes_since_last_save rdb_bgsave_in_progress
        rdb_last_save_time rdb_last_bgsave_status rdb_last_bgsave_time_sec
        rdb_current_bgsave_time_sec rdb_saves rdb_last_cow_size rdb_last_load_keys_expired
        rdb_last_load_keys_loaded aof_enabled aof_rewrite_in_progress aof_rewrite_scheduled
        aof_last_rewrite_time_sec aof_current_rewrite_time_sec aof_last_bgrewrite_status
        aof_rewrites aof_rewrites_consecutive_failures aof_last_write_status
        aof_last_cow_size module_fork_in_progress module_fork_last_cow_size""",
    "Stats": """total_connections_received total_commands_processed instantaneous_ops_per_sec
        total_net_input_bytes total_net_output_bytes total_net_repl_input_bytes
        total_net_repl_output_bytes instantaneous_input_kbps instantaneous_output_kbps
        instantaneous_input_repl_kbps instantaneous_output_repl_kbps rejected_connections
        sync_full sync_partial_ok sync_partial_err expired_keys
        expired_time_cap_reached_count expire_cycle_cpu_milliseconds evicted_keys
        evicted_clients total_eviction_exceeded_time current_eviction_exceeded_time
        keyspace_hits keyspace_misses pubsub_channels pubsub_patterns pubsubshard_channels
        latest_fork_usec total_forks migrate_cached_sockets slave_expires_tracked_keys
        active_defrag_hits active_defrag_misses active_defrag_key_hits
        active_defrag_key_misses total_active_defrag_time current_active_defrag_time
        tracking_total_keys tracking_total_items tracking_total_prefixes
        unexpected_error_replies total_error_replies dump_payload_sanitizations
        io_threaded_reads_processed io_threaded_writes_processed""",
    "Replication": """role connected_slaves master_failover_state master_replid
        master_replid2 master_repl_offset second_repl_offset repl_backlog_active
        repl_backlog_size repl_backlog_first_byte_offset repl_backlog_histlen""",
    "CPU": "used_cpu_sys used_cpu_user used_cpu_sys_children used_cpu_user_children",
    "Cluster": "cluster_enabled",
}

# Redis 7.2's fields that its 7.0 (the reference installed here) does not have yet.
INFO_FIELDS_72 = {
    "Server": "listener0",
    "Clients": """pubsub_clients watching_clients total_watched_keys total_blocking_keys
        total_blocking_keys_on_nokey""",
    "Stats": """eventloop_cycles eventloop_duration_sum eventloop_duration_cmd_sum
        instantaneous_eventloop_cycles_per_sec instantaneous_eventloop_duration_usec""",
}


def _info_names(text: bytes) -> dict:
    sections, cur = {}, None
    for line in text.decode().split("\r\n"):
        if line.startswith("# "):
            cur = sections.setdefault(line[2:], [])
        elif line and cur is not None:
            cur.append(line.split(":", 1)[0])
    return sections


def test_info_carries_redis_fields(darner, redis_ref):
    _resp(darner, "SET", "info-k", "v")
    ours = _info_names(_resp(darner, "INFO", "everything"))
    ref = _info_names(_resp(redis_ref, "INFO", "everything"))
    for section, names in INFO_FIELDS.items():
        for name in names.split():
            assert name in ref[section], "not a field of redis-server's %s: %s" % (section, name)
            assert name in ours.get(section, []), "INFO %s lacks %s" % (section, name)
    for section, names in INFO_FIELDS_72.items():
        for name in names.split():
            assert name in ours.get(section, []), "INFO %s lacks %s" % (section, name)
    # Keyspace, errorstats and commandstats have one line per database, error or command.
    assert any(n.startswith("db") for n in ours["Keyspace"])
    assert any(n.startswith("cmdstat_set") for n in ours["Commandstats"])
