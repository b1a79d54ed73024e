#!/bin/bash
# Where the unpipelined CPU ratio can go: the probe (a server that answers every request with a
# fixed reply and does no other work, epoll mode) next to darner --threads 1 and redis-server,
# alternated ROUNDS times. Each run: the server on core 0, `redis-benchmark -c 50 -n 400000
# -r 1000000 -t get` on core 1 (darner and redis first get 200,000 SETs), and the server's
# user and system CPU ticks during the GETs. Prints every run, then the medians.
# Servers bind 127.0.0.1 on free ports and are stopped whatever happens.
# usage: bench/syscall_probe/floor.sh [ROUNDS=5] [DARNER=target/release/darner]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rounds=${1:-5}
darner=${2:-$root/target/release/darner}
(cd "$here" && cargo build --release -q) || exit 1
probe=$here/target/release/syscall-probe
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

one() {
    local which=$1 port
    port=$(free_port)
    case $which in
        probe) taskset -c 0 "$probe" epoll "$port" >/dev/null 2>&1 & pid=$! ;;
        darner) taskset -c 0 "$darner" --port "$port" --bind 127.0.0.1 --save "" --threads 1 >/dev/null 2>&1 & pid=$! ;;
        redis) taskset -c 0 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 & pid=$! ;;
    esac
    for _ in $(seq 50); do
        (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
        sleep 0.1
    done
    if [ "$which" != probe ]; then
        redis-benchmark -p "$port" -n 200000 -r 1000000 -t set -q >/dev/null 2>&1
    fi
    read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat)
    taskset -c 1 redis-benchmark -p "$port" -c 50 -n 400000 -r 1000000 -t get -q >/dev/null 2>&1
    read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat)
    kill $pid; wait $pid 2>/dev/null; pid=
    local u=$((u1 - u0)) s=$((s1 - s0))
    echo "$which user=$u sys=$s ops/cpu-s=$((400000 * $(getconf CLK_TCK) / (u + s)))"
}

out=$(for _ in $(seq "$rounds"); do for w in probe darner redis; do one $w; done; done | tee /dev/stderr)
for w in probe darner redis; do
    echo "$out" | awk -v w=$w '$1 == w { split($4, a, "="); print a[2] }' | sort -n |
        awk -v w=$w '{ v[NR] = $1 } END { printf "%-7s median ops/cpu-s %d (%d runs)\n", w, v[int((NR + 1) / 2)], NR }'
done
