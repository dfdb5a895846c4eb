#!/usr/bin/env bash
# The GPU runs on a machine with no network and no nox (this workplace's device machine): what
# `nox -s kernel` runs, per flashinfer-python version, plus the EP-size probe, the EP 8 study and
# vLLM's reduce decision on the GPU. From the repo root:
#
#   WHEELS=DIR VLLM_FILES=DIR bash tests/kernel/run_on_device.sh STEP [ARGS] [+ STEP [ARGS]]...
#
#   versions V...   install each flashinfer-python V (its own target and JIT cache), build every
#                   version's JIT modules at once (the EP 1 probe), then `pytest -m gpu tests/kernel`
#                   for each in turn: EP 1 in process, EP 2 and 4 as rank processes (ep_launcher.py)
#   probe V         kernel_probe.py --ep 2 --ep 4 --ep 8: per backend and EP size, can it run and why not
#   ep8 V           the EP 8 study (docs/contract.md): the matrix at EP 8 with the one-sided init
#                   barrier; one-sided at EP 8 without it; the race made deterministic at EP 2
#                   (--delay-init) without and with the barrier
#   vllm V          tests/kernel/test_vllm_reduce_gpu.py with vLLM's Python files (VLLM_FILES holds
#                   vllm-py.tgz or .txz, the release wheel's .py files and dist-info, and the wheels
#                   of its import-time dependencies)
#
# WHEELS holds flashinfer_python-V-py3-none-any.whl for each V and one apache_tvm_ffi wheel.
# Results: $OUT/results.tgz (every log, JSON and junit file) and $OUT/summary.txt, also printed.
# BUDGET_S (default 540): no step starts after that many seconds, so a call ends inside its limit.
set -u
wheels=$(cd "${WHEELS:-.whl}" && pwd)
vllm_files=${VLLM_FILES:+$(cd "$VLLM_FILES" && pwd)}
out=${OUT:-/tmp/kernel-out}
work=/tmp/kernel-run
budget=${BUDGET_S:-540}
mkdir -p "$out" "$work"
summary="$work/summary.txt"
# NVLink multicast stays off everywhere (it can take a shared host's GPUs down).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 FLASHINFER_CUDA_ARCH_LIST="9.0" MAX_JOBS=16 PYTHONDONTWRITEBYTECODE=1
started=$(date +%s)

note() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(( $(date +%s) - started )); }
in_budget() {
  if [ "$(elapsed)" -ge "$budget" ]; then note "SKIPPED (budget $budget s spent): $*"; return 1; fi
}
site() { echo "/tmp/site-$1"; }
with_version() {  # run "$@" against flashinfer-python $V, its own JIT cache
  local v=$1; shift
  PYTHONPATH="$(site "$v")${EXTRA_PATH:+:$EXTRA_PATH}" FLASHINFER_WORKSPACE_BASE="/tmp/fiws-$v" \
    VLLM_FUSED_MOE_FLASHINFER="$v" "$@"
}
install() {
  local v=$1
  [ -d "$(site "$v")/flashinfer" ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$(site "$v")" \
    "$wheels/flashinfer_python-$v-py3-none-any.whl" "$wheels"/apache_tvm_ffi-*.whl \
    || { note "flashinfer-python $v: install failed"; return 1; }
}
junit_counts() {
  python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    s = ET.parse(sys.argv[1]).getroot()
    s = s if s.tag == "testsuite" else s[0]
    t, f, e, k = (int(s.get(x, 0)) for x in ("tests", "failures", "errors", "skipped"))
    print(f"tests {t}, passed {t - f - e - k}, failed {f + e}, skipped {k}, {float(s.get('time', 0)):.1f} s")
except Exception as exc:
    print(f"no junit ({exc})")
PY
}

pack() {  # after every step, so a call stopped at its limit still returns what ran
  tar czf "$out/results.tgz" -C "$work" . 2>/dev/null
  cp "$summary" "$out/summary.txt"
}

step_versions() {
  for v in "$@"; do install "$v"; done
  # JIT builds are CPU work: all versions at once (16 cores), each probe at EP 1 in its own process.
  local t0; t0=$(date +%s)
  for v in "$@"; do
    mkdir -p "$work/$v"
    with_version "$v" timeout 400 python3 tests/kernel/kernel_probe.py --json "$work/$v/probe.json" \
      >"$work/$v/probe.txt" 2>&1 &
  done
  wait
  note "JIT builds + EP 1 probes of $*: $(( $(date +%s) - t0 )) s"
  for v in "$@"; do
    in_budget "pytest for flashinfer-python $v" || continue
    local t1; t1=$(date +%s)
    with_version "$v" env KERNEL_REPORT_DIR="$work/$v" timeout 420 python3 -m pytest -m gpu tests/kernel -rs -q \
      -p no:cacheprovider --junitxml="$work/$v/junit.xml" >"$work/$v/pytest.txt" 2>&1
    note "flashinfer-python $v: pytest exit $?, $(( $(date +%s) - t1 )) s wall; $(junit_counts "$work/$v/junit.xml")"
  done
}

step_probe() {
  local v=$1; install "$v"; mkdir -p "$work/$v"
  in_budget "probe --ep 2 4 8" || return
  local t0; t0=$(date +%s)
  with_version "$v" timeout 400 python3 tests/kernel/kernel_probe.py --ep 2 --ep 4 --ep 8 \
    --json "$work/$v/probe-ep.json" >"$work/$v/probe-ep.txt" 2>&1
  note "probe at EP 1/2/4/8, flashinfer-python $v: exit $?, $(( $(date +%s) - t0 )) s"
  grep -E "ep_size" "$work/$v/probe-ep.txt" | tee -a "$summary"
}

launch() {  # launch NAME EP [launcher args] -- [rank args]
  local name=$1 ep=$2; shift 2
  in_budget "$name" || return
  local t0; t0=$(date +%s)
  timeout 300 python3 tests/kernel/ep_launcher.py --ep "$ep" --json "$work/study/$name.json" \
    --workdir "$work/study/$name" "$@" >"$work/study/$name.txt" 2>&1
  note "$name: exit $?, $(( $(date +%s) - t0 )) s"
  grep -E "^\| [0-9]|deadline|crash" "$work/study/$name.txt" | head -8 | tee -a "$summary"
}

step_ep8() {
  local v=$1; install "$v"; mkdir -p "$work/study"
  export PYTHONPATH="$(site "$v")" FLASHINFER_WORKSPACE_BASE="/tmp/fiws-$v"
  launch ep8-with-barrier 8 --case-deadline 60
  launch ep8-one-sided-no-barrier 8 --case-deadline 45 --setup-deadline 200 -- --top-k 1 --top-k 2 --tokens 1 --tokens 7 \
    --backend flashinfer_nvlink_one_sided --no-init-barrier
  launch ep2-late-init-no-barrier 2 --case-deadline 30 -- --backend flashinfer_nvlink_one_sided \
    --top-k 1 --tokens 1 --no-init-barrier --delay-init 1:5
  launch ep2-late-init-with-barrier 2 --case-deadline 30 -- --backend flashinfer_nvlink_one_sided \
    --top-k 1 --tokens 1 --delay-init 1:5
  unset PYTHONPATH FLASHINFER_WORKSPACE_BASE
}

step_vllm() {
  local v=$1; install "$v"; mkdir -p "$work/vllm"
  in_budget "vLLM reduce decision" || return
  if [ -z "$vllm_files" ]; then note "vllm: VLLM_FILES not set"; return; fi
  if [ ! -d /tmp/vsite/vllm ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/vsite \
      "$vllm_files"/*.whl && python3 -m tarfile -e "$vllm_files"/vllm-py.t* /tmp/vsite \
      || { note "vllm: install failed"; return; }
  fi
  if [ ! -d "/tmp/fiws-$v" ]; then  # build the JIT modules once here, not in four ranks at once
    with_version "$v" timeout 300 python3 tests/kernel/kernel_probe.py >"$work/vllm/probe.txt" 2>&1
  fi
  local t0; t0=$(date +%s)
  EXTRA_PATH=/tmp/vsite with_version "$v" env KERNEL_REPORT_DIR="$work/vllm" VLLM_LOGGING_LEVEL=WARNING \
    timeout 300 python3 -m pytest -m gpu tests/kernel/test_vllm_reduce_gpu.py -rs -q -s -p no:cacheprovider \
    --junitxml="$work/vllm/junit.xml" >"$work/vllm/pytest.txt" 2>&1
  note "vllm reduce decision (flashinfer-python $v): pytest exit $?, $(( $(date +%s) - t0 )) s; $(junit_counts "$work/vllm/junit.xml")"
  grep -E "^\| [0-9]|deadline|crash|passed|failed" "$work/vllm/pytest.txt" | tail -8 | tee -a "$summary"
}

{ nvidia-smi; nvcc --version | tail -2; uname -r; python3 --version
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda, torch.cuda.device_count())'
} >"$work/env.txt" 2>&1
note "$(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"

# Steps are separated by "+": versions 0.6.6 0.6.8.post1 + ep8 0.6.8.post1 + vllm 0.6.8.post1
args=("$@" "+")
current=()
for word in "${args[@]}"; do
  if [ "$word" = "+" ]; then
    if [ "${#current[@]}" -gt 0 ]; then
      name=${current[0]}
      case "$name" in
        versions|probe|ep8|vllm) "step_$name" "${current[@]:1}"; pack ;;
        *) note "unknown step $name" ;;
      esac
    fi
    current=()
  else
    current+=("$word")
  fi
done
note "total $(elapsed) s"
pack
