"""What test suites and tools expect to find (issue 11): config aliases, CONFIG SET's errors,
runtime rebinding, LATENCY, INFO's fields and COMMAND DOCS, checked against redis-server."""

from __future__ import annotations

import time

import pytest
import redis


def wait_until(pred, timeout=5.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


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
