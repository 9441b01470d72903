#!/bin/bash
# One poll of a background capacity run: wait up to $1 seconds (or until the driver is done), then
# copy what exists to $OUT (a machine can be taken back at any time).
# (Runs 5-7 copied no per-point file: the copy was added after them; since run 8 it also takes
# each point's bench log, *-r<rate>.json.txt, which exists while the point runs.)
for _ in $(seq 1 "$1"); do [ -f /tmp/cap/done ] && break; sleep 1; done
cp /tmp/cap/capacity.json /tmp/cap/driver.txt "$OUT"/ 2>/dev/null
cp /tmp/cap/*.log /tmp/cap/*-r[0-9]*.json* "$OUT"/ 2>/dev/null
ls /tmp/cap; tail -4 /tmp/cap/driver.txt | cut -c1-600
grep -h "Avg prompt throughput" /tmp/cap/*.log | tail -2 | cut -c1-300
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
