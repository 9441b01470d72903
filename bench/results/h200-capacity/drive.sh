#!/bin/bash
# The background driver of a capacity run on the lent H200 (runs 5-7): vLLM 0.25.1 from the wheels
# installed in /tmp/site, the repository copied to /tmp/repo, one `gpu_rehearsal.py capacity` with
# realistic FP8 weights, its output in /tmp/cap.  $1: seconds it may take; the rest: the search's
# arguments (--workload, --grid, --known, --start), as README.md records them for each run.
export PYTHONPATH=/tmp/site:/tmp/ns VLLM_USE_FLASHINFER_SAMPLER=0 NCCL_NVLS_ENABLE=0 \
  TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
mkdir -p /tmp/cap /tmp/ns/ansible/module_utils && cd /tmp/repo || exit 1
# gpu_rehearsal.py needs ansible.module_utils only as a namespace
touch /tmp/ns/ansible/__init__.py /tmp/ns/ansible/module_utils/__init__.py
python3 bench/gpu_rehearsal.py capacity --weights realistic --out /tmp/cap --cache /tmp/cap/cache \
  --warmup-s 45 --deadline-s "$1" "${@:2}" > /tmp/cap/driver.txt 2>&1
echo "rc=$? after ${SECONDS}s" >> /tmp/cap/driver.txt
touch /tmp/cap/done
