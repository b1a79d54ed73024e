"""Differential-testing engine: run the same command stream against darner and
a reference redis-server over raw sockets and compare the replies.

A scenario is a list of steps.  A step is either
  * a plain tuple/list of arguments            -> replies compared byte for byte
  * Cmd(args, mode=...)                        -> see MODES below
  * Sleep(seconds)                             -> pause both streams
  * a callable() returning a list of steps     -> expanded at run time (for
    absolute timestamps etc.)

MODES
  exact   raw reply bytes identical (default)
  type    only the RESP type byte of the reply is compared (TIME, INFO, ...)
  sorted  aggregate replies compared as multisets (KEYS, CONFIG GET pattern)
  approx  integer replies within `tol` of each other (TTL/PTTL/...)
  expect  darner's reply must equal `expect` (bytes, or {2: bytes, 3: bytes});
          the reference's reply is ignored.  Used where the Debian reference
          (redis 7.0) differs from the Redis 7.2 semantics darner targets.
  noreply no reply is read from either server (CLIENT REPLY OFF/SKIP)
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from resp_reader import ConnectionClosed, RawConn, Reply, encode_command


@dataclass
class Cmd:
    args: Sequence
    mode: str = "exact"
    tol: int = 0
    expect: Any = None
    note: str = ""


@dataclass
class Sleep:
    seconds: float


def T(*args, note=""):
    """Compare the reply type only."""
    return Cmd(args, "type", note=note)


def S(*args):
    """Compare aggregate replies order-insensitively."""
    return Cmd(args, "sorted")


def A(tol, *args):
    """Compare integer replies with a tolerance."""
    return Cmd(args, "approx", tol=tol)


def X(expect, *args, note="redis 7.2 semantics; Debian's 7.0 reference differs"):
    """darner must reply exactly `expect` (reference ignored)."""
    return Cmd(args, "expect", expect=expect, note=note)


def N(*args):
    """Send, expect no reply (CLIENT REPLY OFF / SKIP)."""
    return Cmd(args, "noreply")


def fmt_args(args: Sequence) -> str:
    out = []
    for a in args:
        if isinstance(a, str):
            a = a.encode("utf-8", "surrogateescape")
        elif not isinstance(a, bytes):
            a = str(a).encode()
        s = repr(a)[2:-1]
        out.append(s if s and " " not in s else '"%s"' % s)
    line = " ".join(out)
    return line if len(line) < 300 else line[:300] + "..."


def fmt_reply(r: Optional[Reply]) -> str:
    if r is None:
        return "<none>"
    if isinstance(r, Exception):
        return "<%s: %s>" % (type(r).__name__, r)
    raw = r.raw
    s = repr(raw if len(raw) <= 600 else raw[:600])
    return s + ("...(%d bytes)" % len(raw) if len(raw) > 600 else "")


def _sort_key(r: Reply) -> bytes:
    return r.raw


def compare(step: Cmd, d: Reply, f: Reply, proto: int) -> Optional[str]:
    """None if the replies agree under the step's mode, else a reason."""
    m = step.mode
    if m == "expect":
        exp = step.expect[proto] if isinstance(step.expect, dict) else step.expect
        if callable(exp):
            return exp(d)
        return None if d.raw == exp else "expected %r" % exp
    if m == "type":
        return None if d.kind == f.kind else "reply type differs"
    if m == "sorted":
        if d.kind != f.kind:
            return "reply type differs"
        if d.value is None or f.value is None:
            return None if d.raw == f.raw else "null differs"
        if d.kind in "%|":
            dv = sorted((k.raw, v.raw) for k, v in d.value)
            fv = sorted((k.raw, v.raw) for k, v in f.value)
        elif isinstance(d.value, list):
            dv = sorted(x.raw for x in d.value)
            fv = sorted(x.raw for x in f.value)
        else:
            return None if d.raw == f.raw else "differs"
        return None if dv == fv else "elements differ (order-insensitive)"
    if m == "approx":
        if d.kind != f.kind:
            return "reply type differs"
        if d.kind == ":" and f.kind == ":":
            if d.value < 0 or f.value < 0:  # -1 / -2 are exact sentinels
                return None if d.value == f.value else "differs"
            return None if abs(d.value - f.value) <= step.tol else "differs by more than %d" % step.tol
        return None if d.raw == f.raw else "differs"
    return None if d.raw == f.raw else "differs"


@dataclass
class Mismatch:
    index: int
    cmd: str
    darner: str
    redis: str
    why: str
    note: str = ""

    def __str__(self) -> str:
        s = "  step %d: %s\n      darner: %s\n      redis : %s\n      (%s)" % (
            self.index, self.cmd, self.darner, self.redis, self.why)
        if self.note:
            s += " [%s]" % self.note
        return s


def expand(steps) -> List[Any]:
    out = []
    for s in steps:
        if callable(s) and not isinstance(s, (Cmd, Sleep)):
            out.extend(expand(s()))
        else:
            out.append(s)
    return out


def run_scenario(darner_port: int, ref_port: int, steps, proto: int = 2,
                 cleanup: Sequence = (), timeout: float = 10.0, max_mismatches: int = 40,
                 golden: bool = True) -> List[Mismatch]:
    """Run `steps` on fresh connections to both servers (after FLUSHALL and,
    for proto 3, HELLO 3).  Returns the list of mismatches.  golden=False
    turns X() steps into plain comparisons with the reference (used when the
    "darner" under test is itself a redis-server, i.e. harness validation)."""
    d = RawConn("127.0.0.1", darner_port, timeout=timeout)
    f = RawConn("127.0.0.1", ref_port, timeout=timeout)
    mismatches: List[Mismatch] = []
    try:
        for c, who in ((d, "darner"), (f, "redis")):
            r = c.call("FLUSHALL")
            if r.raw != b"+OK\r\n":
                if who == "redis":
                    raise AssertionError("reference FLUSHALL failed: %r" % r)
                mismatches.append(Mismatch(-1, "FLUSHALL (scenario prelude)", fmt_reply(r), "b'+OK\\r\\n'",
                                           "cannot reset state; scenario not run"))
                return mismatches
            if proto == 3:
                r = c.call("HELLO", "3")
                if r.kind != "%":
                    if who == "redis":
                        raise AssertionError("reference HELLO 3 failed: %r" % r)
                    mismatches.append(Mismatch(-1, "HELLO 3", fmt_reply(r), "<map>", "HELLO 3 did not return a map"))
                    return mismatches
        for i, step in enumerate(expand(steps)):
            if isinstance(step, Sleep):
                time.sleep(step.seconds)
                continue
            if not isinstance(step, Cmd):
                step = Cmd(step)
            if step.mode == "expect" and not golden:
                step = Cmd(step.args, "exact", note=step.note)
            payload = encode_command(step.args)
            d_err = None
            try:
                d.send_raw(payload)
            except OSError as e:
                d_err = e
            f.send_raw(payload)
            if step.mode == "noreply":
                continue
            fr = f.read_reply()
            dr = None
            if d_err is None:
                try:
                    dr = d.read_reply()
                except (socket.timeout, ConnectionClosed, OSError) as e:
                    d_err = e
            if d_err is not None:
                mismatches.append(Mismatch(i, fmt_args(step.args), fmt_reply(d_err), fmt_reply(fr),
                                           "no reply from darner; scenario aborted", step.note))
                break
            why = compare(step, dr, fr, proto)
            if why:
                mismatches.append(Mismatch(i, fmt_args(step.args), fmt_reply(dr), fmt_reply(fr), why, step.note))
                if len(mismatches) >= max_mismatches:
                    break
    finally:
        d.close()
        f.close()
        if cleanup:
            for port in (darner_port, ref_port):
                try:
                    with RawConn("127.0.0.1", port, timeout=5) as c:
                        for cmd in cleanup:
                            c.call(*cmd)
                except Exception:
                    pass
    return mismatches


def run_raw_stream(port: int, data: bytes, chunk: Optional[int] = None, sentinel: bytes = b"diff-sentinel",
                   timeout: float = 10.0, delay: float = 0.0) -> List[bytes]:
    """Send raw bytes (optionally in `chunk`-sized pieces) followed by
    ECHO <sentinel>; return the raw replies before the sentinel's."""
    with RawConn("127.0.0.1", port, timeout=timeout) as c:
        payload = data + encode_command(["ECHO", sentinel])
        if chunk:
            for i in range(0, len(payload), chunk):
                c.send_raw(payload[i:i + chunk])
                if delay:
                    time.sleep(delay)
        else:
            c.send_raw(payload)
        out = []
        deadline = time.monotonic() + timeout
        while True:
            r = c.read_reply(timeout=max(0.1, deadline - time.monotonic()))
            if r.kind == "$" and r.value == sentinel:
                return out
            out.append(r.raw)


def pipeline_replies(port: int, commands: List[Sequence], timeout: float = 60.0) -> List[Reply]:
    """Send all commands in ONE write (from a helper thread, so a server that
    replies while we are still writing cannot deadlock us) and read all replies."""
    c = RawConn("127.0.0.1", port, timeout=timeout)
    payload = b"".join(encode_command(x) for x in commands)
    err: List[BaseException] = []

    def writer():
        try:
            c.sock.sendall(payload)
        except BaseException as e:  # noqa
            err.append(e)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        replies = c.read_replies(len(commands), timeout=timeout)
    finally:
        t.join(timeout)
        c.close()
    if err:
        raise err[0]
    return replies
