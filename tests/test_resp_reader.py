"""The test suite's own RESP reader (tests/resp_reader.py): however a byte stream of replies
is cut into recv() chunks, the reader gives back the same replies, each with its exact bytes,
as parsing the whole stream at once. Its resumable framing scan (which keeps big replies
linear to read) must never end a reply early or late."""

from hypothesis import given, settings, strategies as st

from resp_reader import RespReader, parse

LEAVES = [b"+OK\r\n", b"-ERR x\r\n", b":-12\r\n", b"$3\r\nabc\r\n", b"$0\r\n\r\n", b"$-1\r\n",
          b"*-1\r\n", b"_\r\n", b"#t\r\n", b",1.5\r\n", b"(123\r\n", b"=7\r\ntxt:a\r\n\r\n",
          b"!3\r\nbad\r\n"]


def _aggregate(children):
    def build(kind_items):
        kind, items = kind_items
        if kind == b"%":
            items = items[: len(items) // 2 * 2]
            return b"%%%d\r\n" % (len(items) // 2) + b"".join(items)
        if kind == b"|":
            # An attribute of one pair annotates the reply after it.
            return b"|1\r\n+k\r\n+v\r\n" + (items[0] if items else b"*0\r\n")
        return kind + b"%d\r\n" % len(items) + b"".join(items)
    return st.tuples(st.sampled_from([b"*", b"~", b">", b"%", b"|"]),
                     st.lists(children, max_size=5)).map(build)


REPLY = st.recursive(st.sampled_from(LEAVES), _aggregate, max_leaves=20)


@settings(max_examples=100, deadline=None)
@given(st.lists(REPLY, min_size=1, max_size=6), st.lists(st.integers(1, 9), max_size=200))
def test_replies_come_back_whole_however_the_stream_is_cut(replies, cuts):
    stream = b"".join(replies)
    whole, pos = [], 0
    while pos < len(stream):
        r, pos = parse(stream, pos)
        whole.append(r.raw)
    reader, got, pos = RespReader(), [], 0
    for size in cuts + [len(stream)]:
        reader.feed(stream[pos:pos + size])
        pos += size
        while (r := reader.get()) is not None:
            got.append(r.raw)
        if pos >= len(stream):
            break
    assert got == whole == replies
    assert reader.buf == b""


def test_taking_bytes_out_of_the_buffer_restarts_the_scan():
    reader = RespReader()
    reader.feed(b"*2\r\n$3\r\nabc")
    assert reader.get() is None
    reader.buf = b""  # a test read the half reply raw
    reader.feed(b"+OK\r\n")
    assert reader.get().raw == b"+OK\r\n"
