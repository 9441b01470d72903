#!/bin/bash
# Which attention backend vLLM 0.25.1 picks for Gemma-4-31B FP8-block with an FP8 KV cache
# (and whether the others are accepted): start, read the log's backend line, stop.
export PYTHONPATH=/tmp/site:/tmp/ns VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1
cd /tmp/repo || exit 1
M=$(python3 -c "import sys; sys.path.insert(0,'bench'); import gpu_rehearsal as g; from pathlib import Path; print(g.model_dir('gemma-4-31B-it-FP8-block', Path('/tmp/models')))")
one() {  # tag, extra flags
  python3 -m vllm.entrypoints.openai.api_server --model "$M" --load-format dummy --port 8011 \
    --max-model-len 32768 "${@:2}" > /tmp/b-$1.log 2>&1 & pid=$!
  for i in $(seq 150); do grep -q "attention backend\|AttentionBackendEnum\|Traceback" /tmp/b-$1.log && break; sleep 1; done
  sleep 2; kill -INT $pid; sleep 3; kill -9 $pid 2>/dev/null; pkill -9 -f api_server; pkill -9 -f EngineCore; sleep 2
  echo "== $1 (${SECONDS}s)"; grep -h "attention backend\|AttentionBackendEnum\|Traceback\|Error:\|not support" /tmp/b-$1.log | grep -v "Initializing a V1" | cut -c1-400 | head -8
}
one fp8 --kv-cache-dtype fp8
one fp8-triton --kv-cache-dtype fp8 --attention-backend TRITON_ATTN
one fp8-flex --kv-cache-dtype fp8 --attention-backend FLEX_ATTENTION
