#!/usr/bin/env bash
# The benchmarks that need cores, as one prepared run on a lent 16-core machine (no network,
# none of our dependencies installed): first `bash bench/lent/pack.sh` here, then the device
# call, from the repository root there, carrying `.lent`:
#     bash bench/lent/run.sh [STAGE...]
# Stages run in the order given (default: all, most wanted first), each bounded by its own
# timeout so that one that hangs costs only its share; a stage that fails is reported and the
# next one runs. Everything printed goes to $OUT/all.log (one file: the device returns at most
# eight), the scaling report to $OUT/scaling/. Servers bind 127.0.0.1 and the bench scripts
# stop them whatever happens.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/lent-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/all.log") 2>&1
export PATH="$PWD/.lent/bin:$PATH" PYTHONUNBUFFERED=1
# The scripts' default binary paths are target/release/*.
# (Here, where target/ exists, the built ones are used.)
[ -e target/release/darner ] || { mkdir -p target/release && cp .lent/darner/* target/release/; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .lent/wheels/*.whl \
    && export PYTHONPATH=/tmp/site
# A disk for the append-only file's fsyncs (tmpfs would make them free).
DISK_DIR=$PWD/.lent/disk; mkdir -p "$DISK_DIR"

echo "== machine: $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo); $(uname -r)"
free -g | head -2; df -h "$DISK_DIR" /tmp | tail -2
redis-server --version; python3 --version; python3 -c 'import redis; print("redis-py", redis.__version__)'
git log --oneline -1 2>/dev/null || true

stage() {
    local name=$1 limit=$2; shift 2
    echo; echo "== stage $name (at most ${limit}s): $*"; local t0=$SECONDS
    timeout -k 5 "$limit" "$@"; local rc=$?
    echo "== stage $name: rc $rc, $((SECONDS - t0))s"
}

# Three nodes, six proxy threads and six load-generator threads: 15 of the 16 cores.
PROXY_ARGS=(--seconds 5 --workers 12 --requests 1000000 --proxy-threads 6 --bench-threads 6
            --clients 200)

run_stage() {
    case $1 in
        proxy) stage proxy 100 python3 bench/proxy.py "${PROXY_ARGS[@]}" ;;
        proxy_base) DARNER_PROXY_BIN=.lent/base/darner-proxy \
            stage proxy_base 100 python3 bench/proxy.py "${PROXY_ARGS[@]}" ;;
        proxy1) stage proxy1 80 python3 bench/proxy.py --seconds 4 --workers 12 --proxy-threads 1 ;;
        proxy_cache) stage proxy_cache 120 python3 bench/proxy_cache.py --seconds 5 \
            --proxy-threads 6 --bench-threads 6 --connections 25 ;;
        proxy_cache_base) DARNER_PROXY_BIN=.lent/base/darner-proxy stage proxy_cache_base 120 \
            python3 bench/proxy_cache.py --seconds 5 --proxy-threads 6 --bench-threads 6 \
            --connections 25 ;;
        # The cache-on proxy's clients cost it two system calls a request, hit or not (its
        # profile: three quarters in the kernel), so its figure follows its threads: eight
        # proxy threads, five load-generator threads, three nodes.
        proxy_cache8) stage proxy_cache8 120 python3 bench/proxy_cache.py --seconds 5 \
            --proxy-threads 8 --bench-threads 5 --connections 30 ;;
        scaling) stage scaling 150 python3 bench/scaling.py --full --tag lent \
            --configs darner:1,darner:4,darner:8,redis:1,redis:8 \
            --cases getset-p1,getset-p16,mset10,mget10 --out "$OUT/scaling" ;;
        replication) stage replication 110 python3 bench/replication.py --keys 200000 \
            --requests 1000000 --lag-seconds 5 ;;
        replication_base) stage replication_base 110 python3 bench/replication.py --keys 200000 \
            --requests 1000000 --lag-seconds 5 --darner .lent/base/darner ;;
        persistence_full) stage persistence_full 150 python3 bench/persistence.py --only bgsave \
            --worst 3 --keys 1000000 --hash-fields 10000000 ;;
        # With the cores the lent machine has to spare (the defaults are sized for two).
        replication4) stage replication4 110 python3 bench/replication.py --keys 200000 \
            --requests 1000000 --lag-seconds 5 --threads 4 --replica-threads 4 ;;
        aof4) stage aof4 100 python3 bench/aof.py --repeat 1 --threads 4 --dir "$DISK_DIR" ;;
        persistence) stage persistence 100 python3 bench/persistence.py --only bgsave --worst 3 ;;
        aof) stage aof 100 python3 bench/aof.py --repeat 1 --dir "$DISK_DIR" ;;
        smoke) stage smoke 60 python3 bench/scaling.py --quick --time 1 --tag smoke \
            --configs darner:1,redis:1 --cases getset-p1 --out /tmp/lent-smoke ;;
        *) echo "unknown stage $1" ;;
    esac
}

stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(proxy proxy_cache proxy_cache8 scaling replication persistence aof proxy1)
for s in "${stages[@]}"; do run_stage "$s"; done
echo "== done in ${SECONDS}s"
