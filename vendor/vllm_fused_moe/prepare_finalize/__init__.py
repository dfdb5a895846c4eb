# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project

from vllm.model_executor.layers.fused_moe.prepare_finalize.batched import (
    BatchedPrepareAndFinalize,
)
from vllm.model_executor.layers.fused_moe.prepare_finalize.naive_dp_ep import (
    MoEPrepareAndFinalizeNaiveDPEPModular,
    MoEPrepareAndFinalizeNaiveDPEPMonolithic,
    make_moe_prepare_and_finalize_naive_dp_ep,
)
from vllm.model_executor.layers.fused_moe.prepare_finalize.no_dp_ep import (
    MoEPrepareAndFinalizeNoDPEPModular,
    MoEPrepareAndFinalizeNoDPEPMonolithic,
    make_moe_prepare_and_finalize_no_dp_ep,
)

__all__ = [
    "BatchedPrepareAndFinalize",
    "MoEPrepareAndFinalizeNaiveDPEPMonolithic",
    "MoEPrepareAndFinalizeNaiveDPEPModular",
    "make_moe_prepare_and_finalize_naive_dp_ep",
    "MoEPrepareAndFinalizeNoDPEPMonolithic",
    "MoEPrepareAndFinalizeNoDPEPModular",
    "make_moe_prepare_and_finalize_no_dp_ep",
    # deepep_ht, deepep_ll, and flashinfer_a2a are not
    # imported here as they have optional dependencies (deep_ep, flashinfer).
    # Import them directly from their modules as needed.
]
