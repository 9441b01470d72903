#!/usr/bin/env bash
# The serving benchmark on one GPU host that has vLLM (see bench/gpu_rehearsal.py):
# the planned configuration (cold start, the concurrency sweep, a warm restart), the
# roofline, vLLM's defaults, the plan with an FP8 KV cache, the seed guide's command
# line.  A step that fails is reported and the next one still runs.  Plot afterwards where matplotlib is:
#   bench/gpu_serving.sh OUT && .venv/bin/python bench/gpu_rehearsal.py plot --out OUT
set -uo pipefail
out=${1:?usage: $0 OUT}
rehearsal="$(dirname "$0")/gpu_rehearsal.py"
failed=0
for step in "bench --config planned --restart" "roofline" "bench --config defaults" \
            "bench --config planned --kv-cache-dtype fp8" "bench --config seed"; do
    echo "== $step ($(date +%T))"
    # shellcheck disable=SC2086  # $step is several arguments
    python3 "$rehearsal" $step --out "$out" || { echo "== FAILED: $step"; failed=1; }
done
exit "$failed"
