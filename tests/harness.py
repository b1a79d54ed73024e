"""Process management for the e2e tests: start/stop darner and a reference
redis-server on free loopback ports.  Imported by conftest.py and by tests.

Environment:
  DARNER_BIN       path of the server binary (default: <repo>/target/release/darner)
  DARNER_ARGS      extra arguments for every darner started (shell syntax)
  DARNER_IS_REDIS  1 = the binary is a redis-server (harness validation mode):
                   darner-only arguments (--threads) are dropped and
                   --save "" --appendonly no are added.  Auto-detected when the
                   binary's file name starts with "redis-server".

Every server runs in a temporary directory of its own (removed by stop()), and without save
points (`--save ""`, as Redis's test suite runs it) unless the test gives its own `--save` or a
config file with a `save` line: Redis's default save points would make each server write
dump.rdb when it stops and load it when it starts again in the same directory.
  REDIS_SERVER     path of the reference redis-server (default: from $PATH)
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence

from resp_reader import ConnectionClosed, RawConn

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BIN = os.path.join(REPO_ROOT, "target", "release", "darner")

# Arguments only darner understands (name -> number of values).
DARNER_ONLY_ARGS = {"--threads": 1}
REDIS_EXTRA_ARGS = ["--save", "", "--appendonly", "no", "--enable-debug-command", "yes"]
# Redis 7 refuses DEBUG unless enable-debug-command allows it, and so does darner; the suites
# use DEBUG (SLEEP, SET-ACTIVE-EXPIRE, OBJECT). Given first, so a test's own setting wins.
# A full sync starts at once (Redis 7's default waits 5 s for more replicas to share a
# diskless snapshot); a test of the delay gives its own, which comes later and wins.
DARNER_TEST_ARGS = ["--enable-debug-command", "yes", "--repl-diskless-sync-delay", "0"]

STARTUP_TIMEOUT = float(os.environ.get("DARNER_STARTUP_TIMEOUT", "20"))
FORBIDDEN_PORTS = {6379, 6380, 16379}

_ALL_SERVERS: List["Server"] = []  # for the atexit / session-end safety net


class HarnessError(Exception):
    pass


def darner_bin() -> str:
    return os.environ.get("DARNER_BIN") or DEFAULT_BIN


def darner_is_redis() -> bool:
    v = os.environ.get("DARNER_IS_REDIS")
    if v is not None and v != "":
        return v not in ("0", "no", "false")
    return os.path.basename(darner_bin()).startswith("redis-server")


def darner_extra_args() -> List[str]:
    return shlex.split(os.environ.get("DARNER_ARGS", ""))


def redis_server_bin() -> Optional[str]:
    return os.environ.get("REDIS_SERVER") or shutil.which("redis-server")


def free_port() -> int:
    """A currently-free loopback TCP port (never 6379)."""
    for _ in range(50):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        finally:
            s.close()
        if port not in FORBIDDEN_PORTS:
            return port
    raise HarnessError("could not find a free port")


def strip_darner_only(args: Sequence[str]) -> List[str]:
    out: List[str] = []
    i = 0
    args = list(args)
    while i < len(args):
        a = args[i]
        if a in DARNER_ONLY_ARGS:
            i += 1 + DARNER_ONLY_ARGS[a]
            continue
        out.append(a)
        i += 1
    return out


def check_binary(path: str, what: str = "darner") -> None:
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise HarnessError(
            "%s binary not found or not executable at %r.\n"
            "Build it with `cargo build --release` (or run ./scripts/test.sh), "
            "or point DARNER_BIN at a binary." % (what, path))


class Server:
    """One server process on 127.0.0.1:<port>."""

    def __init__(self, binary: str, args: Sequence[str] = (), *, is_redis: bool = False,
                 config_file: Optional[str] = None, port: Optional[int] = None,
                 add_port: bool = True, name: str = "darner", wait_ready: bool = True,
                 auth: Optional[str] = None, save_off: bool = True,
                 preexec_fn: Optional[Callable[[], None]] = None):
        self.binary = binary
        self.user_args = [str(a) for a in args]
        self.is_redis = is_redis
        self.config_file = config_file
        self.fixed_port = port
        self.add_port = add_port
        self.name = name
        self.auth = auth
        # False: no `--save ""` is added (the server keeps its default save points).
        self.save_off = save_off
        # Run in the child before exec (e.g. a signal disposition it should inherit).
        self.preexec_fn = preexec_fn
        self.proc: Optional[subprocess.Popen] = None
        self.port: Optional[int] = port
        self.workdir = tempfile.mkdtemp(prefix="%s-test-" % name)
        self.log_path = os.path.join(self.workdir, "server.log")
        self.cmdline: List[str] = []
        self._wait_ready = wait_ready
        _ALL_SERVERS.append(self)

    # ------------------------------------------------------------------
    def build_cmdline(self, port: Optional[int]) -> List[str]:
        cmd = [self.binary]
        if self.config_file:
            cmd.append(self.config_file)
        args = list(self.user_args)
        own_save = self.sets_save()
        if self.is_redis:
            extra = list(REDIS_EXTRA_ARGS)
            if own_save:
                extra = extra[2:]  # the test's own save points win
            args = strip_darner_only(args) + extra
        else:
            # Given first: a later --save of the test's replaces these (save lines add up
            # only after a first one).
            args = DARNER_TEST_ARGS + ([] if own_save else ["--save", ""]) + args
        if self.add_port and port is not None:
            cmd += ["--port", str(port), "--bind", "127.0.0.1"]
        cmd += args
        return cmd

    def sets_save(self) -> bool:
        """Whether the test gives save points itself (an argument or a config file line)."""
        if "--save" in self.user_args or not self.save_off:
            return True
        if self.config_file:
            try:
                with open(self.config_file) as f:
                    return any(line.split()[:1] == ["save"] for line in f)
            except OSError:
                return False
        return False

    def start(self) -> "Server":
        check_binary(self.binary, self.name)
        attempts = 1 if self.fixed_port or not self.add_port else 5
        last_err = ""
        for _ in range(attempts):
            port = self.fixed_port or (free_port() if self.add_port else None)
            self.port = port
            self.cmdline = self.build_cmdline(port)
            logf = open(self.log_path, "ab")
            logf.write(b"\n=== start: " + " ".join(shlex.quote(c) for c in self.cmdline).encode() + b"\n")
            logf.flush()
            self.proc = subprocess.Popen(self.cmdline, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir,
                                         preexec_fn=self.preexec_fn)
            logf.close()
            if not self._wait_ready:
                return self
            ok, last_err, exited = self._await_ready()
            if ok:
                return self
            self.stop(cleanup=False)
            if not exited:
                break  # hung rather than refused: retrying would only burn time
        raise HarnessError("%s did not become ready: %s\ncommand: %s\nlog tail:\n%s"
                           % (self.name, last_err, " ".join(shlex.quote(c) for c in self.cmdline),
                              self.log_tail()))

    def _await_ready(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT
        err = "timeout after %.0fs" % STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False, "process exited with code %s" % self.proc.returncode, True
            try:
                with RawConn("127.0.0.1", self.port, timeout=2) as c:
                    r = c.call("PING")
                    if r.raw.startswith(b"+PONG") or r.raw.startswith(b"-NOAUTH"):
                        return True, "", False
                    if r.raw.startswith(b"-LOADING"):
                        pass
                    else:
                        return False, "unexpected PING reply %r" % r.raw, False
            except (OSError, ConnectionClosed):
                pass
            time.sleep(0.05)
        return False, err, False

    # ------------------------------------------------------------------
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout: float = 10.0) -> Optional[int]:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, cleanup: bool = True) -> Optional[int]:
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.proc.send_signal(signal.SIGTERM)
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
                except ProcessLookupError:
                    pass
            rc = self.proc.returncode
        if cleanup:
            shutil.rmtree(self.workdir, ignore_errors=True)
            if self in _ALL_SERVERS:
                _ALL_SERVERS.remove(self)
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return "<no log>"

    # ------------------------------------------------------------------
    def raw(self, timeout: float = 10.0) -> RawConn:
        return RawConn("127.0.0.1", self.port, timeout=timeout)

    def client(self, **kw):
        import redis
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("socket_connect_timeout", 5)
        if self.auth is not None:
            kw.setdefault("password", self.auth)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def __repr__(self) -> str:
        return "<%s pid=%s port=%s>" % (self.name, self.proc.pid if self.proc else None, self.port)


def start_darner(args: Sequence[str] = (), threads: Optional[int] = 2, **kw) -> Server:
    binary = darner_bin()
    full = []
    if threads is not None:
        full += ["--threads", str(threads)]
    full += darner_extra_args() + [str(a) for a in args]
    return Server(binary, full, is_redis=darner_is_redis(), name="darner", **kw).start()


def start_reference(args: Sequence[str] = ()) -> Server:
    binary = redis_server_bin()
    if not binary:
        raise HarnessError("redis-server not found: install it with "
                           "`apt-get install -y redis-server` or set REDIS_SERVER")
    return Server(binary, list(args), is_redis=True, name="redis-ref").start()


def run_to_exit(binary: str, args: Sequence[str], timeout: float = 10.0, cwd: Optional[str] = None):
    """Run a server expected to refuse to start.  Returns (returncode, output).

    If the process is still running after `timeout`, it is killed and
    returncode is None."""
    check_binary(binary)
    cwd = cwd or tempfile.mkdtemp(prefix="darner-refuse-")
    p = subprocess.Popen([binary] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, cwd=cwd)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
        return None, out.decode("utf-8", "replace")


def stop_all() -> None:
    for s in list(_ALL_SERVERS):
        try:
            s.stop()
        except Exception:
            pass
