#!/usr/bin/env bash
# Packs what bench/lent/run.sh needs on a lent machine that has none of it and no network:
# the release binaries, Debian's redis-server/redis-cli/redis-benchmark with the shared
# libraries they load (glibc excepted: the lent machine's own is newer), and redis-py as a
# wheel. Everything goes under .lent/ (git-ignored through .git/info/exclude), which the
# device call carries. Run from the repository root after `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.lent/' .git/info/exclude 2>/dev/null || echo '/.lent/' >> .git/info/exclude
rm -rf .lent && mkdir -p .lent/bin .lent/real .lent/lib .lent/wheels .lent/darner
for b in darner darner-proxy darner-bench; do cp "target/release/$b" .lent/darner/; done
# BASE=DIR: a second build's binaries (an A/B in the same run: run.sh's *_base stages).
if [ -n "${BASE:-}" ]; then mkdir -p .lent/base && cp "$BASE"/darner "$BASE"/darner-proxy .lent/base/; fi
for b in redis-server redis-cli redis-benchmark; do
    cp "$(command -v $b)" .lent/real/$b
    # A wrapper, so that the bench scripts find them by name on PATH; the carried libraries
    # are set for these programs alone (python there must keep its own libstdc++).
    printf '#!/bin/sh\nd=$(dirname "$(readlink -f "$0")")/..\nLD_LIBRARY_PATH="$d/lib" exec "$d/real/%s" "$@"\n' "$b" > .lent/bin/$b
    chmod +x .lent/bin/$b
done
ldd .lent/real/* | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
        libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) ;;
        *) cp -L "$lib" .lent/lib/ ;;
    esac
done
ver=$(python3 -c 'import redis; print(redis.__version__)')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux2014_x86_64 -d .lent/wheels "redis==$ver"
du -sh .lent
