#!/bin/bash
# The H200 capacity run of 2026-12-04 (run 5, second machine): realistic FP8 weights, vLLM defaults, both
# workloads on one engine. $1: seconds this may take.
export PYTHONPATH=/tmp/site:/tmp/ns VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p /tmp/cap && cd /tmp/repo || exit 1
python3 bench/gpu_rehearsal.py capacity --weights realistic --out /tmp/cap --cache /tmp/cap/cache \
  --workload 1024/256 8192/256 --grid 5.5,6.0 0.9,1.2 --warmup-s 45 --deadline-s "$1" \
  > /tmp/cap/driver.txt 2>&1
echo "rc=$? after ${SECONDS}s" >> /tmp/cap/driver.txt
touch /tmp/cap/done
