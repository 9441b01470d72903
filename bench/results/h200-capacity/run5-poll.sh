#!/bin/bash
# One poll of run 5: wait up to $1 seconds (or until the driver is done), then copy what exists.
for _ in $(seq 1 "$1"); do [ -f /tmp/cap/done ] && break; sleep 1; done
cp /tmp/cap/capacity.json /tmp/cap/driver.txt "$OUT"/ 2>/dev/null
cp /tmp/cap/*.log "$OUT"/ 2>/dev/null
ls /tmp/cap; tail -5 /tmp/cap/driver.txt; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
