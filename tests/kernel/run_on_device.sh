#!/usr/bin/env bash
# What `nox -s kernel` does on a GPU machine, plus the probe and the benchmark,
# for the device machine (no nox, no network there). Carry `.whl` (the
# flashinfer-python wheel of VERIFIED.toml and apache-tvm-ffi) and run from the
# repo root:   bash tests/kernel/run_on_device.sh [NPROC]
# NPROC > 1 (multi-GPU issue) also runs the contract and benchmark under torchrun.
set -u
nproc="${1:-1}"
out="${OUT:-/tmp/kernel-out}"
mkdir -p "$out"
# NVLink multicast stays off everywhere (it can take a shared host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST="9.0" MAX_JOBS=16 FLASHINFER_WORKSPACE_BASE=/tmp/fiws
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
set -o pipefail
{ nvidia-smi; nvcc --version | tail -2; uname -r
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.device_count())'
} >"$out/env.txt" 2>&1
t0=$(date +%s)
python3 tests/kernel/kernel_probe.py --json "$out/probe.json" 2>&1 | tee "$out/probe.txt"
echo "probe (incl. JIT build) took $(( $(date +%s) - t0 )) s" | tee -a "$out/probe.txt"
python3 -m pytest -m gpu tests/kernel -v -rs -p no:cacheprovider --junitxml="$out/junit.xml" 2>&1 \
  | tee "$out/pytest.txt"
python3 benchmarks/kernel_combine.py --json "$out/bench.json" 2>&1 | tee "$out/bench.txt"
if [ "$nproc" -gt 1 ]; then
  timeout -s KILL 300 torchrun --nproc-per-node "$nproc" tests/kernel/kernel_contract.py \
    --json "$out/ep${nproc}.json" 2>&1 | tee "$out/ep${nproc}.txt"
  timeout -s KILL 300 torchrun --nproc-per-node "$nproc" benchmarks/kernel_combine.py \
    2>&1 | tee -a "$out/ep${nproc}.txt"
fi
