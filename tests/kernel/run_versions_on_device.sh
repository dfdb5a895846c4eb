#!/usr/bin/env bash
# The kernel contract (what `nox -s kernel` runs: EP 1, 2 and 4) against several flashinfer-python
# versions in one call on a GPU machine with no network: carry `.whl/` holding
# flashinfer_python-<V>-py3-none-any.whl for each V and apache_tvm_ffi, then
#   bash tests/kernel/run_versions_on_device.sh 0.6.6 0.6.8.post1
# Each version gets its own install target and JIT cache, so one cannot serve another's compiled
# modules. run_on_device.sh's `versions` step does the work; results in $OUT/results.tgz and
# $OUT/summary.txt.
exec bash "$(dirname "$0")/run_on_device.sh" versions "$@"
