"""Shared pytest fixtures for the Darner end-to-end suite.

Fixtures:
  darner          session-scoped darner (--threads 2) on a free loopback port
  darner_factory  start extra servers with custom args; always stopped at test end
  redis_ref       session-scoped reference redis-server (--save "" --appendonly no)
  r / r3          redis-py clients (RESP2 / RESP3) on `darner`, FLUSHALL'd before each test
  raw             factory of raw-socket RESP connections (tests/resp_reader.RawConn)

Logs: a failed test's servers' logs (those a fixture value's failure_logs() names) come in its
report whole; DARNER_KEEP_LOGS=<dir> also copies them there, DARNER_KEEP_LOGS_ALL=1 for every
test (to count a rare event in a loop's passing runs too).

Validate the harness against redis itself:
  DARNER_BIN=$(which redis-server) python3 -m pytest tests -q
"""

from __future__ import annotations

import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from harness import HarnessError, Server  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "darner_only: checks a darner-specific fact; "
                            "skipped in harness-validation mode (DARNER_IS_REDIS=1)")


def pytest_report_header(config):
    mode = " (redis validation mode)" if harness.darner_is_redis() else ""
    return ["darner binary: %s%s" % (harness.darner_bin(), mode),
            "reference redis-server: %s" % harness.redis_server_bin()]


def pytest_runtest_setup(item):
    if item.get_closest_marker("darner_only") and harness.darner_is_redis():
        pytest.skip("darner-only fact; not applicable to redis-server (DARNER_IS_REDIS)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's server logs, whole, in its report, and copied under $DARNER_KEEP_LOGS
    when set (every test's with DARNER_KEEP_LOGS_ALL=1: a loop hunting a rare event counts it
    in the runs that passed too). A fixture value with a `failure_logs()` method names the
    servers. Done here, in the call phase, because the fixtures' teardown deletes the
    servers' directories."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call":
        return
    keep = os.environ.get("DARNER_KEEP_LOGS")
    keep_all = os.environ.get("DARNER_KEEP_LOGS_ALL") not in (None, "", "0")
    if not rep.failed and not (keep and keep_all):
        return
    for value in getattr(item, "funcargs", {}).values():
        servers = getattr(value, "failure_logs", None)
        if not callable(servers):
            continue
        for srv in servers():
            text = srv.log_tail(1 << 20)
            if rep.failed:
                rep.sections.append(("log of %r" % srv, text))
            if keep:
                os.makedirs(keep, exist_ok=True)
                name = "%s-%s-%s-%s.log" % (item.name, int(time.time()), srv.name, srv.port)
                with open(os.path.join(keep, name), "w") as f:
                    f.write(text)


def pytest_sessionfinish(session, exitstatus):
    harness.stop_all()


def _fail(e: Exception):
    pytest.fail(str(e), pytrace=False)


# --------------------------------------------------------------------------
# servers
# --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def darner():
    try:
        srv = harness.start_darner(threads=2)
    except HarnessError as e:
        _fail(e)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(autouse=True)
def _session_server_health(request):
    """If a test crashed or wedged the session darner, report it (with the log)
    and restart it so the remaining tests still run against a live server."""
    yield
    if "darner" not in request.fixturenames:
        return
    srv: Server = request.getfixturevalue("darner")
    problem = None
    if not srv.alive():
        problem = "died during this test, exit code %s" % (srv.proc.returncode if srv.proc else None)
    else:
        try:
            with srv.raw(timeout=5) as c:
                rep = c.call("PING")
            if rep.raw != b"+PONG\r\n":
                problem = "answers PING with %r after this test" % rep.raw
        except Exception as e:  # noqa
            problem = "stopped answering PING after this test (%s: %s)" % (type(e).__name__, e)
    if problem is None:
        return
    log = srv.log_tail()
    srv.kill()
    try:
        srv.start()
    except HarnessError as e:
        log += "\n(restart failed: %s)" % e
    pytest.fail("darner (session server) %s; it was restarted.\nlog tail:\n%s" % (problem, log), pytrace=False)


class Factory:
    """darner_factory(args..., threads=2, config_file=None, add_port=True, port=None,
    wait_ready=True, auth=None) -> Server.  Every server is stopped at test end."""

    def __init__(self):
        self.servers = []
        self.binary = harness.darner_bin()
        self.is_redis = harness.darner_is_redis()

    def __call__(self, *args, threads=2, **kw) -> Server:
        flat = []
        for a in args:
            if isinstance(a, (list, tuple)):
                flat.extend(str(x) for x in a)
            else:
                flat.append(str(a))
        try:
            srv = harness.start_darner(flat, threads=threads, **kw)
        except HarnessError as e:
            _fail(e)
        self.servers.append(srv)
        return srv

    def server(self, *args, threads=2, **kw) -> Server:
        """Create (not start) a Server object; caller starts it.  Still cleaned up."""
        full = (["--threads", str(threads)] if threads is not None else []) + \
            harness.darner_extra_args() + [str(a) for a in args]
        srv = Server(self.binary, full, is_redis=self.is_redis, name="darner", **kw)
        self.servers.append(srv)
        return srv

    def failure_logs(self):
        """The servers whose logs a failed test's report carries (see
        pytest_runtest_makereport)."""
        return list(self.servers)

    def run_to_exit(self, args, timeout=10.0):
        """Run the binary with `args` (no port added) expecting it to exit."""
        return harness.run_to_exit(self.binary, [str(a) for a in args], timeout=timeout)

    def stop_all(self):
        for s in self.servers:
            try:
                s.stop()
            except Exception:
                s.kill()


@pytest.fixture
def darner_factory():
    f = Factory()
    try:
        harness.check_binary(f.binary)
    except HarnessError as e:
        _fail(e)
    try:
        yield f
    finally:
        f.stop_all()


@pytest.fixture(scope="session")
def redis_ref():
    try:
        srv = harness.start_reference()
    except HarnessError as e:
        _fail(e)
    try:
        yield srv
    finally:
        srv.stop()


# --------------------------------------------------------------------------
# clients
# --------------------------------------------------------------------------

@pytest.fixture
def r(darner):
    c = darner.client()
    c.flushall()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def r3(darner):
    c = darner.client(protocol=3)
    c.flushall()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def raw(darner):
    """raw() -> RawConn to the session darner; raw(server) -> to another server."""
    conns = []

    def make(server: Server = None, timeout: float = 10.0):
        c = (server or darner).raw(timeout=timeout)
        conns.append(c)
        return c

    try:
        yield make
    finally:
        for c in conns:
            c.close()
