#!/bin/bash
# One measurement of the probe: mode (epoll|uring) on a port, 400,000 unpipelined GETs from
# 50 connections (redis-benchmark on core 1, probe on core 0); prints ops per server CPU-second.
# Build first: cargo build --release (in this folder).
# usage: run.sh mode port
mode=$1; port=$2
taskset -c 0 ./target/release/syscall-probe $mode $port & pid=$!
sleep 0.3
t0=$(awk '{print $14+$15}' /proc/$pid/stat)
s0=$(date +%s.%N)
out=$(taskset -c 1 redis-benchmark -p $port -c 50 -n 400000 -t get -q 2>&1 | tr '\r' '\n' | grep -E "^GET: [0-9]" | tail -1)
t1=$(awk '{print $14+$15}' /proc/$pid/stat)
kill $pid; wait $pid 2>/dev/null
rps=$(echo "$out" | awk '{print $2}')
cpu=$(echo "($t1-$t0)/100" | bc -l)
echo "$mode rps=$rps cpu_s=$cpu ops_per_cpu=$(echo "400000/$cpu" | bc)"
