# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The reduce decision of the FlashInfer all2allv prepare/finalize, vLLM 0.11-0.15.

Release line flashinfer_cutlass: the combine already sums the top-k expert
outputs of each token, so `output_is_reduced()` must say so, or the MoE layer
all-reduces it over the TP group a second time.
"""

import pytest

from vllm.model_executor.layers.fused_moe.flashinfer_cutlass_prepare_finalize import (
    FlashInferAllToAllMoEPrepareAndFinalize,
)

pytestmark = pytest.mark.cpu_test


@pytest.mark.parametrize(
    "prepare_finalize_cls",
    [
        FlashInferAllToAllMoEPrepareAndFinalize,
    ],
)
def test_output_is_reduced(prepare_finalize_cls):
    # __init__ needs an EP group with an all2all manager (a GPU and NVLink);
    # the answer depends only on whether the all-to-all runs over DP ranks,
    # which is where the combine sums over top-k (without DP, finalize() is a
    # plain copy and the output is not reduced).
    prepare_finalize = object.__new__(prepare_finalize_cls)
    prepare_finalize.use_dp = True
    assert prepare_finalize.output_is_reduced() is True
