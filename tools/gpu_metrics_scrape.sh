#!/usr/bin/env bash
# Record what a real vLLM on a GPU exposes on /metrics (tests/fixtures/metrics/ holds the
# result, the monitoring guard test reads it): the project's tiny Gemma-4 model, served on
# the GPU, two completions, then GET /metrics.  Needs vLLM importable by python3 (on the
# lent H200: the wheels installed with --target, PYTHONPATH set).
#   tools/gpu_metrics_scrape.sh OUT.prom
set -euo pipefail
out=${1:?usage: gpu_metrics_scrape.sh OUT.prom}
root=$(cd "$(dirname "$0")/.." && pwd)
model=$(mktemp -d)
cp -r "$root/tests/fixtures/models/tiny-gemma4/." "$model/"
# transformers 5.x reads Gemma-4's per-layer attributes only with this set
python3 - "$model/config.json" <<'EOF'
import json, sys
config = json.load(open(sys.argv[1]))
config["allow_global_per_layer_attribute_access"] = True
json.dump(config, open(sys.argv[1], "w"))
EOF
python3 -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name tiny-gemma4 \
  --max-model-len 1024 --enforce-eager --load-format dummy --port 8013 > "$out.log" 2>&1 &
server=$!
# (the GPU host may have no curl)
http() { python3 -c 'import sys, urllib.request
data = sys.argv[2].encode() if len(sys.argv) > 2 else None
req = urllib.request.Request(sys.argv[1], data=data, headers={"Content-Type": "application/json"})
sys.stdout.write(urllib.request.urlopen(req, timeout=60).read().decode())' "$@"; }
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 300); do
  http http://127.0.0.1:8013/health >/dev/null 2>&1 && break
  kill -0 $server 2>/dev/null || { tail -40 "$out.log"; exit 1; }
  sleep 1
done
for _ in 1 2; do
  http http://127.0.0.1:8013/v1/completions \
    '{"model": "tiny-gemma4", "prompt": "The fleet", "max_tokens": 16, "ignore_eos": true}' >/dev/null
done
version=$(python3 -c 'import vllm; print(vllm.__version__)')
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
{
  echo "# vLLM $version on $gpu (tiny-gemma4, two completions served), GET /metrics, $(date -u +%F)"
  http http://127.0.0.1:8013/metrics | grep -v -E '^(# (HELP|TYPE) )?(python|process)_'
} > "$out"
grep -c '^vllm:' "$out"
