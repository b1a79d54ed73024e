#!/usr/bin/env python3
"""Scaling report: darner at 1, 2, 4, 8, 12 threads against redis-server with 1, 4, 8 I/O
threads, on the same cores, under the same load from darner-bench.

For each server configuration using N cores, the server is pinned (sched_setaffinity, as taskset) to cores 0..N-1
and darner-bench to the cores left (one driver thread per core, up to 8); only configurations
that leave the load generator at least one core are run, so on a 2-core machine it is one
server core against one client core. darner runs with `--threads N`; redis-server with
`--io-threads N --io-threads-do-reads yes` (N = 1 is plain single-threaded redis).

Cases (each --time seconds, closed loop, --connections in all):
  getset-p1   GET:SET 10:1 (`--ratio 1:10`), unpipelined, 100,000 keys, 32-byte values
  getset-p16  the same, 16 requests in flight per connection
  mset10      MSET of 10 keys  (`--command mset:10`)
  mget10      MGET of 10 keys  (`--command mget:10`, after mset10 filled the keys)
  ycsb-a..f   YCSB core workloads as YCSB's Redis binding sends them (`--ycsb W`), on
              --records records loaded once per server (run in YCSB's order A B C F D E)

For each case: ops/s, p50/p99/p99.9 latency (µs) and ops per server CPU-second (utime+stime
of the server process from /proc/<pid>/stat over the run). Output, under --out: a markdown
report (scaling-<tag>.md, also printed), the raw figures (scaling-<tag>.json) and, when
matplotlib can be imported, throughput-<tag>.png (ops/s against cores, one panel per case)
and latency-<tag>.png (p50 and p99 against ops/s, one point per core count). Without
matplotlib the markdown is still written; get it with `pip install --user matplotlib`
(or the distribution's python3-matplotlib).

Self-contained: give it the three binaries; it needs no network beyond 127.0.0.1. Servers bind
127.0.0.1 on free ports, every run is bounded (--time, plus a timeout), and every server is
stopped whatever happens.

Usage:
  bench/scaling.py --quick            # what fits this machine, about 2-3 minutes
  bench/scaling.py --full             # the whole matrix (for a 16-core machine)
      [--darner target/release/darner] [--bench target/release/darner-bench]
      [--redis redis-server] [--out docs/scaling] [--tag NAME] [--time S]
      [--records N] [--connections C] [--cases getset-p1,ycsb-a,...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import free_port, cpu_seconds, cores_available, machine_line, Server, cpu_list, pin_to  # noqa: E402

STRING_CASES = {
    "getset-p1": ["--ratio", "1:10"],
    "getset-p16": ["--ratio", "1:10", "--pipeline", "16"],
    "mset10": ["--command", "mset:10"],
    "mget10": ["--command", "mget:10"],
}
YCSB_ORDER = ["a", "b", "c", "f", "d", "e"]
ALL_CASES = list(STRING_CASES) + [f"ycsb-{w}" for w in YCSB_ORDER]
DARNER_THREADS = [1, 2, 4, 8, 12]
REDIS_IO_THREADS = [1, 4, 8]


def start_server(args, family, n, cores):
    port = free_port()
    if family == "darner":
        argv = [args.darner, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--threads", str(n),
                "--loglevel", "warning"]
    else:
        argv = [args.redis, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--loglevel", "warning"]
        if n > 1:
            argv += ["--io-threads", str(n), "--io-threads-do-reads", "yes"]
    label = f"darner --threads {n}" if family == "darner" else (
        f"redis --io-threads {n}" if n > 1 else "redis")
    s = Server(label, argv, port, cores)
    s.family, s.n, s.label = family, n, label
    return s


def run_bench(args, server, client_cores, extra, time_s):
    """Runs darner-bench pinned to the client cores; returns its JSON and the server's CPU
    seconds over the run."""
    threads = max(1, min(len(client_cores), 8, args.connections))
    conns = max(1, -(-args.connections // threads))
    cmd = [args.bench, "--port", str(server.port),
           "--threads", str(threads), "--connections", str(conns), "--test-time", str(time_s),
           "--json"] + extra
    c0 = cpu_seconds(server.proc.pid)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=time_s + 300,
                         preexec_fn=pin_to(client_cores))
    c1 = cpu_seconds(server.proc.pid)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {out.stderr.strip()}")
    return json.loads(out.stdout), c1 - c0, cmd


def run_server_cases(args, server, client_cores, cases, results):
    for case in cases:
        if case in STRING_CASES:
            extra = STRING_CASES[case] + ["--key-maximum", "100000"]
        else:
            w = case.split("-")[1]
            extra = ["--ycsb", w, "--ycsb-records", str(args.records), "--ycsb-no-load"]
            if not server.loaded:
                # Load once per server (a short run of workload C after the load phase).
                j, _, _ = run_bench(args, server, client_cores,
                                    ["--ycsb", "c", "--ycsb-records", str(args.records)], 0.05)
                server.loaded = True
                load = j.get("load") or {}
                results.append({"case": "ycsb-load", "server": server.label,
                                "family": server.family, "cores": server.n,
                                "ops_per_sec": load.get("ops_per_sec", 0.0),
                                "errors": load.get("errors", 0)})
        j, cpu, cmd = run_bench(args, server, client_cores, extra, args.time)
        ops = j["ops"]
        r = {"case": case, "server": server.label, "family": server.family, "cores": server.n,
             "ops_per_sec": j["ops_per_sec"], "p50_us": j["p50_us"], "p99_us": j["p99_us"],
             "p999_us": j["p999_us"], "errors": j["errors"], "server_cpu_s": cpu,
             "ops_per_cpu_s": ops / cpu if cpu > 0 else 0.0, "by_type": j.get("by_type", {}),
             "client_cores": cpu_list(client_cores),
             "command": " ".join(cmd[1:]).replace(str(server.port), "PORT")}
        results.append(r)
        print(f"  {case:<11} {server.label:<24} {r['ops_per_sec']:>12,.0f} ops/s  "
              f"p50 {r['p50_us']:>8.1f}  p99 {r['p99_us']:>9.1f}  p99.9 {r['p999_us']:>9.1f} µs  "
              f"{r['ops_per_cpu_s']:>10,.0f} ops/cpu-s  errors {r['errors']}", flush=True)


def markdown(args, results, machine, configs, elapsed):
    lines = [f"# Scaling report ({args.tag})", "",
             f"Machine: {machine}. Run: `{' '.join(sys.argv)}`, {elapsed:.0f} s; "
             f"{args.time:g} s per case, {args.connections} connections in all, "
             f"{args.records:,} YCSB records.", "",
             "Server configurations (server cores / darner-bench cores): " +
             "; ".join(f"{s} ({cpu_list(sc)} / {cpu_list(cc)})" for s, sc, cc in configs) + ".", "",
             "| case | server | cores | ops/s | p50 µs | p99 µs | p99.9 µs | ops per server CPU-s | errors |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        if r["case"] == "ycsb-load":
            continue
        lines.append(f"| {r['case']} | {r['server']} | {r['cores']} | {r['ops_per_sec']:,.0f} | "
                     f"{r['p50_us']:.0f} | {r['p99_us']:.0f} | {r['p999_us']:.0f} | "
                     f"{r['ops_per_cpu_s']:,.0f} | {r['errors']} |")
    ycsb = [r for r in results if r["case"].startswith("ycsb-") and r["case"] != "ycsb-load"]
    if ycsb:
        lines += ["", "YCSB per operation (p50 / p99 / p99.9 µs):", "",
                  "| case | server | operation | ops/s | p50 | p99 | p99.9 |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
        for r in ycsb:
            for name, k in r["by_type"].items():
                lines.append(f"| {r['case']} | {r['server']} | {name} | {k['ops_per_sec']:,.0f} | "
                             f"{k['p50_us']:.0f} | {k['p99_us']:.0f} | {k['p999_us']:.0f} |")
        loads = [r for r in results if r["case"] == "ycsb-load"]
        lines += ["", "YCSB load phase (HMSET + ZADD per record): " +
                  "; ".join(f"{r['server']} {r['ops_per_sec']:,.0f} records/s" for r in loads) + "."]
    return "\n".join(lines) + "\n"


def plots(args, results, cases):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib not importable: no PNGs (pip install --user matplotlib)")
        return []
    families = ["darner", "redis"]
    colors = {"darner": "tab:blue", "redis": "tab:red"}
    cols = min(5, len(cases))
    rows = -(-len(cases) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows), squeeze=False)
    for i, case in enumerate(cases):
        ax = axes[i // cols][i % cols]
        for fam in families:
            pts = sorted((r["cores"], r["ops_per_sec"]) for r in results
                         if r["case"] == case and r["family"] == fam)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colors[fam],
                        label=fam + (" (--threads)" if fam == "darner" else " (--io-threads)"))
        ax.set_title(case, fontsize=9)
        ax.set_xticks(sorted({r["cores"] for r in results if r["case"] == case}))
        ax.set_xlabel("server cores", fontsize=8)
        ax.set_ylabel("ops/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    for j in range(len(cases), rows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Throughput against server cores ({args.tag})", fontsize=10)
    fig.tight_layout()
    tp = os.path.join(args.out, f"throughput-{args.tag}.png")
    fig.savefig(tp, dpi=90)
    plt.close(fig)

    lat_cases = [c for c in ["getset-p1", "getset-p16", "mset10", "ycsb-a"] if c in cases]
    fig, axes = plt.subplots(1, max(1, len(lat_cases)), figsize=(4 * max(1, len(lat_cases)), 3.2),
                             squeeze=False)
    for i, case in enumerate(lat_cases):
        ax = axes[0][i]
        for fam in families:
            pts = sorted((r["ops_per_sec"], r["p50_us"], r["p99_us"], r["cores"]) for r in results
                         if r["case"] == case and r["family"] == fam)
            if not pts:
                continue
            x = [p[0] for p in pts]
            ax.plot(x, [p[1] for p in pts], "o-", color=colors[fam], label=f"{fam} p50")
            ax.plot(x, [p[2] for p in pts], "s--", color=colors[fam], label=f"{fam} p99")
            for p in pts:
                ax.annotate(str(p[3]), (p[0], p[2]), fontsize=7, textcoords="offset points",
                            xytext=(3, 3))
        ax.set_title(f"{case}: latency against throughput", fontsize=9)
        ax.set_xlabel("ops/s (labels: server cores)", fontsize=8)
        ax.set_ylabel("µs", fontsize=8)
        ax.set_yscale("log")
        ax.set_xlim(left=0)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    lp = os.path.join(args.out, f"latency-{args.tag}.png")
    fig.savefig(lp, dpi=90)
    plt.close(fig)
    return [tp, lp]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="short runs (default)")
    mode.add_argument("--full", action="store_true", help="the whole matrix, longer runs")
    ap.add_argument("--darner", default="target/release/darner")
    ap.add_argument("--bench", default="target/release/darner-bench")
    ap.add_argument("--redis", default="redis-server")
    ap.add_argument("--out", default="docs/scaling")
    ap.add_argument("--tag", help="names the output files (default: quick or full)")
    ap.add_argument("--time", type=float, help="seconds per case (quick 4, full 3)")
    ap.add_argument("--records", type=int, help="YCSB records (quick 20000, full 100000)")
    ap.add_argument("--connections", type=int, help="connections in all (quick 50, full 200)")
    ap.add_argument("--cases", help="comma-separated, from: " + ",".join(ALL_CASES))
    ap.add_argument("--configs", help="only these server configurations, comma-separated "
                    "FAMILY:N (darner:8,redis:1); default: all that fit")
    args = ap.parse_args()
    full = args.full
    args.tag = args.tag or ("full" if full else "quick")
    args.time = args.time or (3.0 if full else 4.0)
    args.records = args.records or (100_000 if full else 20_000)
    args.connections = args.connections or (200 if full else 50)
    cases = args.cases.split(",") if args.cases else ALL_CASES
    for c in cases:
        if c not in ALL_CASES:
            ap.error(f"unknown case {c}")
    for b in (args.darner, args.bench):
        if not os.access(b, os.X_OK):
            ap.error(f"{b}: not an executable (cargo build --release)")
    os.makedirs(args.out, exist_ok=True)

    cores = cores_available()
    # Every configuration must leave the load generator at least one core.
    fits = lambda n: n <= len(cores) - 1  # noqa: E731
    # By core count, darner before redis at each: a run cut short still compares like with like.
    configs = sorted([("darner", n) for n in DARNER_THREADS if fits(n)] +
                     [("redis", n) for n in REDIS_IO_THREADS if fits(n)],
                     key=lambda c: (c[1], c[0] != "darner"))
    if args.configs:
        wanted = [(f, int(n)) for f, n in (c.split(":") for c in args.configs.split(","))]
        configs = [c for c in wanted if c[0] in ("darner", "redis") and fits(c[1])]
    if not configs:
        sys.exit("need at least 2 cores: one for the server, one for the load generator")
    machine = machine_line(cores)
    load_before = os.getloadavg()[0]
    print(f"# {machine}; {len(configs)} server configurations x {len(cases)} cases, "
          f"{args.time:g} s each", flush=True)
    results, shown = [], []
    started = time.time()
    for family, n in configs:
        server_cores, client_cores = cores[:n], cores[n:]
        server = None
        try:
            server = start_server(args, family, n, server_cores)
            server.loaded = False
            shown.append((server.label, server_cores, client_cores))
            run_server_cases(args, server, client_cores, cases, results)
        finally:
            if server is not None:
                server.stop()
        # The report so far, after every configuration: a run cut short (a lent machine's
        # time is bounded) still leaves what it measured.
        md = write_report(args, results, machine, load_before, shown, time.time() - started,
                          cases, final=False)
    md = write_report(args, results, machine, load_before, shown, time.time() - started,
                      cases, final=True)
    print(md)


def write_report(args, results, machine, load_before, shown, elapsed, cases, final):
    machine += f"; load average {load_before:.2f} before the run, {os.getloadavg()[0]:.2f} after"
    md = markdown(args, results, machine, shown, elapsed)
    with open(os.path.join(args.out, f"scaling-{args.tag}.json"), "w") as f:
        json.dump({"machine": machine, "argv": sys.argv, "results": results}, f, indent=1)
    if final:
        pngs = plots(args, results, cases)
        if pngs:
            md += "\n" + "\n".join(f"![{os.path.basename(p)}]({os.path.basename(p)})"
                                    for p in pngs) + "\n"
    with open(os.path.join(args.out, f"scaling-{args.tag}.md"), "w") as f:
        f.write(md)
    return md


if __name__ == "__main__":
    sys.exit(main())
