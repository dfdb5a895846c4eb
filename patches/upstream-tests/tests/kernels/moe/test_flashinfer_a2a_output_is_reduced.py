# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The reduce decision of the FlashInfer A2A prepare/finalize, vLLM 0.16-0.17.

Release line flashinfer_a2a: the combine already sums the top-k expert outputs
of each token, so `output_is_reduced()` must say so, or the MoE layer (0.16) or
runner (0.17) all-reduces it over the TP group a second time.
"""

import pytest

from vllm.model_executor.layers.fused_moe.flashinfer_a2a_prepare_finalize import (
    FlashInferA2APrepareAndFinalize,
)

pytestmark = pytest.mark.cpu_test


@pytest.mark.parametrize(
    "prepare_finalize_cls",
    [
        FlashInferA2APrepareAndFinalize,
    ],
)
def test_output_is_reduced(prepare_finalize_cls):
    # __init__ needs an EP group with an all2all manager (a GPU and NVLink);
    # the answer does not depend on them.
    prepare_finalize = object.__new__(prepare_finalize_cls)
    assert prepare_finalize.output_is_reduced() is True
