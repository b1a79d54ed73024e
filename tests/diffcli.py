#!/usr/bin/env python3
"""Ad-hoc differential check: run commands on darner and on redis-server and
print both raw replies side by side.

  python3 tests/diffcli.py 'SET a 1' 'INCR a' 'GETRANGE a 0 -1'
  python3 tests/diffcli.py --resp3 'HELLO' 'CONFIG GET hz'
  python3 tests/diffcli.py --scenario incr_decr        # a scenario from diff_scenarios.py

Commands are split shell-style, then C escapes (\\x00 \\r \\n) are decoded.  Servers are started
on free ports (DARNER_BIN / REDIS_SERVER as for the test suite) and stopped
at exit.
"""

from __future__ import annotations

import argparse
import codecs
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from differential import Cmd, compare, expand, fmt_args, fmt_reply  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("commands", nargs="*")
    ap.add_argument("--resp3", action="store_true")
    ap.add_argument("--scenario")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--all", action="store_true", help="print matching replies too")
    a = ap.parse_args()
    if a.scenario:
        from diff_scenarios import SCENARIOS
        steps = expand(SCENARIOS[a.scenario])
    else:
        # tokens are shell-split, then C escapes (\x00, \r, \n, ...) are decoded
        steps = [tuple(codecs.escape_decode(t.encode("utf-8", "surrogateescape"))[0] for t in shlex.split(c))
                 for c in a.commands]
    d = harness.start_darner(threads=a.threads)
    f = harness.start_reference()
    bad = 0
    try:
        with d.raw() as dc, f.raw() as fc:
            for c in (dc, fc):
                c.call("FLUSHALL")
                if a.resp3:
                    c.call("HELLO", "3")
            for step in steps:
                if not isinstance(step, Cmd):
                    if not isinstance(step, (tuple, list)):
                        continue  # Sleep etc.
                    step = Cmd(step)
                dc.send(*step.args)
                fc.send(*step.args)
                if step.mode == "noreply":
                    continue
                fr = fc.read_reply()
                try:
                    dr = dc.read_reply()
                except Exception as e:  # noqa
                    print("%s\n   darner: <%s>\n   redis : %s" % (fmt_args(step.args), e, fmt_reply(fr)))
                    return 1
                why = compare(step, dr, fr, 3 if a.resp3 else 2)
                if why or a.all:
                    bad += bool(why)
                    print("%s %s\n   darner: %s\n   redis : %s" % ("DIFF" if why else "same", fmt_args(step.args),
                                                                 fmt_reply(dr), fmt_reply(fr)))
    finally:
        d.stop()
        f.stop()
    print("%d difference(s)" % bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
