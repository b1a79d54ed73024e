"""Minimal RESP2/RESP3 reader + raw socket client used by the e2e tests.

Everything here works on bytes so that replies can be compared byte for byte
with a reference redis-server.  A parsed reply is a `Reply` carrying its RESP
type byte (``kind``), a Python value and the exact raw bytes it was parsed from.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, List, Optional, Sequence, Tuple, Union

CRLF = b"\r\n"

# RESP type bytes.
AGGREGATES = frozenset(b"*~>%|")  # array, set, push, map, attribute
BLOBS = frozenset(b"$!=")  # bulk string, blob error, verbatim string
LINES = frozenset(b"+-:,(_#")  # simple, error, int, double, bignum, null, bool


class Incomplete(Exception):
    """Not enough bytes buffered to parse a whole reply."""


class ProtocolViolation(Exception):
    """The server sent bytes that are not valid RESP."""


@dataclass(slots=True)
class Reply:
    kind: str  # one char: '+', '-', ':', '$', '*', '%', '~', '>', '_', ',', '#', '(', '!', '='
    value: Any  # bytes | int | None | list[Reply] | list[tuple[Reply, Reply]] | bool
    raw: bytes = b""
    attrs: Optional[list] = None  # RESP3 attribute (|) that preceded the reply, if any

    # ---- convenience ----------------------------------------------------
    @property
    def is_error(self) -> bool:
        return self.kind in ("-", "!")

    @property
    def is_null(self) -> bool:
        return self.value is None

    def py(self):
        """Plain python rendering (bytes/int/list/dict/None), for assertions."""
        if self.kind in ("*", "~", ">"):
            return None if self.value is None else [r.py() for r in self.value]
        if self.kind == "%":
            return {k.py() if not isinstance(k.py(), list) else tuple(k.py()): v.py() for k, v in self.value}
        return self.value

    def __repr__(self) -> str:  # short, useful in assertion messages
        raw = self.raw if len(self.raw) <= 400 else self.raw[:400] + b"...(%d bytes)" % len(self.raw)
        return "Reply(%r)" % raw


# Type bytes as ints (buf[pos] is an int): parse() runs once per element of every reply the
# suite reads, so it compares ints and looks kinds up rather than calling ord()/chr().
_KIND = {t: chr(t) for t in range(256)}
_PLUS, _MINUS, _COLON, _LPAREN, _COMMA, _UNDERSCORE, _HASH, _PERCENT, _PIPE = b"+-:(,_#%|"


def parse(buf: bytes, pos: int = 0) -> Tuple[Reply, int]:
    """Parse one reply starting at buf[pos]; return (reply, new_pos).

    Raises Incomplete if more bytes are needed."""
    start = pos
    if pos >= len(buf):
        raise Incomplete()
    t = buf[pos]
    end = buf.find(CRLF, pos + 1)
    if end < 0:
        raise Incomplete()
    line = buf[pos + 1:end]
    pos = end + 2
    kind = _KIND[t]
    if t in BLOBS:
        n = int(line)
        if n < 0:
            return Reply(kind, None, buf[start:pos]), pos
        stop = pos + n
        if len(buf) < stop + 2:
            raise Incomplete()
        if buf[stop:stop + 2] != CRLF:
            raise ProtocolViolation("bulk not terminated by CRLF")
        return Reply(kind, buf[pos:stop], buf[start:stop + 2]), stop + 2
    if t in AGGREGATES:
        n = int(line)
        if n < 0:
            return Reply(kind, None, buf[start:pos]), pos
        if t == _PERCENT or t == _PIPE:
            items = []
            for _ in range(n):
                k, pos = parse(buf, pos)
                v, pos = parse(buf, pos)
                items.append((k, v))
            if t == _PIPE:
                # attribute: applies to the following reply
                nxt, pos = parse(buf, pos)
                nxt.attrs = items
                nxt.raw = buf[start:pos]
                return nxt, pos
            return Reply(kind, items, buf[start:pos]), pos
        items = []
        for _ in range(n):
            r, pos = parse(buf, pos)
            items.append(r)
        return Reply(kind, items, buf[start:pos]), pos
    if t == _PLUS or t == _MINUS or t == _COMMA:
        return Reply(kind, line, buf[start:pos]), pos  # doubles stay textual
    if t == _COLON:
        try:
            return Reply(kind, int(line), buf[start:pos]), pos
        except ValueError:
            raise ProtocolViolation("bad integer %r" % line)
    if t == _LPAREN:
        return Reply(kind, int(line), buf[start:pos]), pos
    if t == _UNDERSCORE:
        return Reply(kind, None, buf[start:pos]), pos
    if t == _HASH:
        if line not in (b"t", b"f"):
            raise ProtocolViolation("bad boolean %r" % line)
        return Reply(kind, line == b"t", buf[start:pos]), pos
    raise ProtocolViolation("unknown RESP type byte %r at offset %d: %r" % (kind, start, buf[start:start + 60]))


class RespReader:
    """Incremental reader: feed() bytes, pop replies with get().

    A big reply arrives in many recv() chunks. Parsing it from its first byte after every
    chunk made reading it quadratic (a 16 MB XRANGE cost tens of seconds of Python), so get()
    first runs a framing scan that resumes where the previous chunk left it (position and the
    elements still owed by each open aggregate) and parses the reply once, when it is whole.
    Assigning `buf` (tests take bytes out of it directly) starts the scan again."""

    def __init__(self) -> None:
        self.buf = b""

    @property
    def buf(self) -> bytes:
        return self._buf

    @buf.setter
    def buf(self, data: bytes) -> None:
        self._buf = bytes(data)
        self._scan_pos = 0
        self._scan_owed: List[int] = []

    def feed(self, data: bytes) -> None:
        self._buf += data

    def _scan(self) -> Optional[int]:
        """The end of the first reply if it is whole, else None (the scan state is kept)."""
        buf, pos, owed = self._buf, self._scan_pos, self._scan_owed
        size = len(buf)
        while True:
            if pos >= size:
                break
            t = buf[pos]
            end = buf.find(CRLF, pos + 1)
            if end < 0:
                break
            if t in BLOBS:
                n = int(buf[pos + 1:end])
                nxt = end + 2 if n < 0 else end + 2 + n + 2
                if nxt > size:
                    break
            elif t in AGGREGATES:
                n = int(buf[pos + 1:end])
                if n > 0:
                    # A map owes keys and values; an attribute also the reply it annotates.
                    owed.append(2 * n if t == ord("%") else 2 * n + 1 if t == ord("|") else n)
                    pos = end + 2
                    continue
                nxt = end + 2
            elif t in LINES:
                nxt = end + 2
            else:
                raise ProtocolViolation("unknown RESP type byte %r" % chr(t))
            pos = nxt
            # One element is whole: so is every aggregate it completes.
            while owed:
                owed[-1] -= 1
                if owed[-1] > 0:
                    break
                owed.pop()
            if not owed:
                return pos
        self._scan_pos = pos
        return None

    def get(self) -> Optional[Reply]:
        try:
            if self._scan() is None:
                return None
        except (ValueError, ProtocolViolation):
            pass  # parse() below names what is wrong
        try:
            r, pos = parse(self._buf, 0)
        except Incomplete:
            return None
        self.buf = self._buf[pos:]
        return r


def _b(x) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, bytearray):
        return bytes(x)
    if isinstance(x, str):
        return x.encode("utf-8", "surrogateescape")
    if isinstance(x, (int, float)):
        return str(x).encode()
    raise TypeError("cannot encode %r" % (x,))


def encode_command(args: Sequence) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        a = _b(a)
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


class ConnectionClosed(Exception):
    pass


class RawConn:
    """A raw TCP connection speaking RESP; exact framing control for tests."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, timeout: float = 10.0):
        self.addr = (host, port)
        self.timeout = timeout
        self.sock = socket.create_connection(self.addr, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = RespReader()
        self.closed_by_peer = False

    # ---- sending ---------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, *args) -> None:
        self.sock.sendall(encode_command(args))

    def send_many(self, commands: Iterable[Sequence]) -> int:
        data = b"".join(encode_command(c) for c in commands)
        self.sock.sendall(data)
        return len(data)

    # ---- receiving -------------------------------------------------------
    def _recv_some(self, deadline: float) -> bytes:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout("timed out waiting for reply; buffered=%r" % self.reader.buf[:200])
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 20)
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed_by_peer = True
            raise ConnectionClosed("connection closed by server; buffered=%r" % self.reader.buf[:200])
        return data

    def read_reply(self, timeout: Optional[float] = None) -> Reply:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            r = self.reader.get()
            if r is not None:
                return r
            self.reader.feed(self._recv_some(deadline))

    def read_replies(self, n: int, timeout: Optional[float] = None) -> List[Reply]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        out: List[Reply] = []
        while len(out) < n:
            r = self.reader.get()
            if r is not None:
                out.append(r)
                continue
            self.reader.feed(self._recv_some(deadline))
        return out

    def read_raw(self, nbytes: int, timeout: Optional[float] = None) -> bytes:
        """Read exactly nbytes raw bytes (bypassing the parser)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self.reader.buf) < nbytes:
            self.reader.feed(self._recv_some(deadline))
        data, self.reader.buf = self.reader.buf[:nbytes], self.reader.buf[nbytes:]
        return data

    def call(self, *args, timeout: Optional[float] = None) -> Reply:
        self.send(*args)
        return self.read_reply(timeout)

    def call_raw(self, data: bytes, timeout: Optional[float] = None) -> Reply:
        self.send_raw(data)
        return self.read_reply(timeout)

    def pending(self, wait: float = 0.2) -> bytes:
        """Whatever arrives within `wait` seconds (b'' if nothing)."""
        deadline = time.monotonic() + wait
        try:
            while time.monotonic() < deadline:
                self.reader.feed(self._recv_some(deadline))
        except (socket.timeout, ConnectionClosed):
            pass
        data, self.reader.buf = self.reader.buf, b""
        return data

    def wait_closed(self, timeout: float = 5.0) -> bytes:
        """Wait until the peer closes; returns every byte received meanwhile.

        Raises AssertionError if the connection is still open at the deadline."""
        deadline = time.monotonic() + timeout
        got = b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("server did not close the connection within %.1fs; got %r"
                                     % (timeout, (self.reader.buf + got)[:300]))
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                self.closed_by_peer = True
                out, self.reader.buf = self.reader.buf + got, b""
                return out
            got += data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
