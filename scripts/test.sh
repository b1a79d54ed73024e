#!/usr/bin/env bash
# Darner's single test entry point:
#   1. installs what the tests need when missing (redis-server for the
#      differential reference, redis-sentinel for the Sentinel tests, python
#      packages from tests/requirements.txt,
#      node-redis and rueidis for the client-side caching tests)
#   2. cargo build --release
#   3. cargo test --workspace --release --no-fail-fast   (Rust unit / property / e2e tests)
#   4. python3 -m pytest tests            (end-to-end suite against target/release/darner)
#   Steps 3 and 4 run at the same time: step 3 is mostly compiling (CPU), step 4 mostly
#   waiting on servers (timeouts, failovers), so together they take little more than step 4.
#   Step 3 runs at a lower CPU priority and its output is printed when it ends.
#
# Usage: ./scripts/test.sh [extra pytest arguments, e.g. -k differential -x]
# Environment knobs:
#   SKIP_CARGO_TEST=1   skip step 3          SKIP_PYTEST=1   skip step 4
#   DARNER_BIN=path     binary for step 4 (default: <target dir>/release/darner)
# The tests only ever use free ephemeral ports on 127.0.0.1, never 6379, so a
# redis-server started by the distribution's service scripts does not matter.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

START=$(date +%s)
section() {
    printf '\n========================================================================\n'
    printf '== %s   (+%ss)\n' "$*" "$(( $(date +%s) - START ))"
    printf '========================================================================\n'
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else echo "need root to run: $*" >&2; return 1
    fi
}

apt_install() {
    # wait for a concurrent dpkg/apt run (e.g. unattended upgrades) to finish
    for _ in $(seq 1 120); do
        if ! as_root fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock >/dev/null 2>&1; then break; fi
        echo "dpkg is locked, waiting..."; sleep 5
    done
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
}

# ----------------------------------------------------------------------------
section "Test prerequisites"
if ! command -v redis-server >/dev/null 2>&1; then
    echo "redis-server not found: installing it (reference server for differential tests)"
    apt_install redis-server redis-tools
fi
redis-server --version
# Sentinel (tests/test_sentinel.py) comes from Debian's redis-sentinel package.
if ! command -v redis-sentinel >/dev/null 2>&1; then
    echo "redis-sentinel not found: installing it (Sentinel monitoring darner servers)"
    apt_install redis-sentinel
fi

if ! python3 -c 'import redis, redis.cache, pytest, hypothesis, rq' 2>/dev/null; then
    echo "installing python test dependencies from tests/requirements.txt"
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    python3 -m pip install -r tests/requirements.txt \
        || python3 -m pip install --break-system-packages -r tests/requirements.txt
fi
python3 -c 'import redis, pytest, hypothesis; print("python", __import__("sys").version.split()[0], "redis-py", redis.__version__, "pytest", pytest.__version__, "hypothesis", hypothesis.__version__)'

# Client libraries with client-side caching (tests/test_client_libs.py): node-redis, rueidis.
echo "node $(node --version), $(go version)"
(cd tests/clients/node && npm ci --no-audit --no-fund --loglevel=error)
(cd tests/clients/go && go mod download)

# ----------------------------------------------------------------------------
section "cargo build --release"
cargo build --release

TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET_DIR" in /*) ;; *) TARGET_DIR="$ROOT/$TARGET_DIR" ;; esac
export DARNER_BIN="${DARNER_BIN:-$TARGET_DIR/release/darner}"
if [ ! -x "$DARNER_BIN" ]; then
    echo "ERROR: cargo build succeeded but $DARNER_BIN does not exist" >&2
    exit 1
fi

# ----------------------------------------------------------------------------
# Test stages all run even if an earlier one fails; the script fails at the end.
FAILED_STAGES=()
CARGO_TEST_PID=""
CARGO_TEST_LOG="$(mktemp "${TMPDIR:-/tmp}/darner-cargo-test.XXXXXX")"
stop_cargo_test() {
    if [ -n "$CARGO_TEST_PID" ]; then kill -- "-$CARGO_TEST_PID" 2>/dev/null || true; fi
    rm -f "$CARGO_TEST_LOG"
}
trap stop_cargo_test EXIT
if [ "${SKIP_CARGO_TEST:-0}" != "1" ]; then
    section "cargo test --workspace --release --no-fail-fast  (in the background, output below when done)"
    # its own process group (set -m), so that an interrupted run stops all of it
    set -m
    nice -n 10 cargo test --workspace --release --no-fail-fast >"$CARGO_TEST_LOG" 2>&1 &
    CARGO_TEST_PID=$!
    set +m
fi

# ----------------------------------------------------------------------------
if [ "${SKIP_PYTEST:-0}" != "1" ]; then
    section "pytest tests  (DARNER_BIN=$DARNER_BIN)"
    export PYTHONDONTWRITEBYTECODE=1
    # safety net: the suite itself takes about 11 minutes on 2 cores
    timeout --kill-after=30 1200 python3 -m pytest tests -q -p no:cacheprovider -rfE "$@" \
        || FAILED_STAGES+=("pytest tests")
fi

if [ -n "$CARGO_TEST_PID" ]; then
    CARGO_TEST_STATUS=0
    wait "$CARGO_TEST_PID" || CARGO_TEST_STATUS=$?
    CARGO_TEST_PID=""
    section "cargo test --workspace --release --no-fail-fast  (output)"
    cat "$CARGO_TEST_LOG"
    if [ "$CARGO_TEST_STATUS" -ne 0 ]; then FAILED_STAGES+=("cargo test"); fi
fi

if [ "${#FAILED_STAGES[@]}" -ne 0 ]; then
    section "FAILED: ${FAILED_STAGES[*]}"
    exit 1
fi
section "All tests passed"
