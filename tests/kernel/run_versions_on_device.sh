#!/usr/bin/env bash
# The kernel contract (what `nox -s kernel` runs) against several flashinfer-python
# versions in one call on a GPU machine with no network: carry `.whl/` holding
# flashinfer_python-<V>-py3-none-any.whl for each V and apache_tvm_ffi, then
#   bash tests/kernel/run_versions_on_device.sh 0.6.6 0.6.8.post1
# Each version gets its own install target and JIT cache, so one cannot serve another's
# compiled modules. Results: $OUT/junit-<V>.xml, $OUT/pytest-<V>.txt, $OUT/summary.txt.
set -u
out="${OUT:-/tmp/kernel-out}"
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST="9.0" MAX_JOBS=16
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; } >"$out/env.txt" 2>&1
for version in "$@"; do
  site="/tmp/site-$version"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
    ".whl/flashinfer_python-$version-py3-none-any.whl" .whl/apache_tvm_ffi-*.whl || { echo "$version: install failed" >>"$out/summary.txt"; continue; }
  t0=$(date +%s)
  PYTHONPATH="$site" FLASHINFER_WORKSPACE_BASE="/tmp/fiws-$version" timeout -s KILL 280 \
    python3 -m pytest -m gpu tests/kernel -rs -q -p no:cacheprovider --junitxml="$out/junit-$version.xml" \
    >"$out/pytest-$version.txt" 2>&1
  rc=$?
  echo "flashinfer-python $version: exit $rc, $(( $(date +%s) - t0 )) s, $(tail -1 "$out/pytest-$version.txt")" \
    | tee -a "$out/summary.txt"
done
