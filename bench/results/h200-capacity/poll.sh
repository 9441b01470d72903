#!/bin/bash
# One poll of a background capacity run: wait up to $1 seconds (or until the driver is done), then
# copy what exists to $OUT as one archive, cap.tgz (a machine can be taken back at any time, and
# the device tool brings back at most 8 files: run 10's separate copies lost capacity.json,
# driver.txt and the engine's log to that limit).
for _ in $(seq 1 "$1"); do [ -f /tmp/cap/done ] && break; sleep 1; done
tar czf "$OUT/cap.tgz" -C /tmp/cap --exclude=./cache --exclude=./plugin . 2>/dev/null
ls /tmp/cap; tail -4 /tmp/cap/driver.txt | cut -c1-600
grep -h "Avg prompt throughput" /tmp/cap/*.log | tail -2 | cut -c1-300
nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader
