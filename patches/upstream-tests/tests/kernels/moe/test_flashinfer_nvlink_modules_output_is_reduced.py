# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The reduce decision of the FlashInfer NVLink all-to-all prepare/finalize, vLLM 0.18.

The same classes as the head line's test, one level up in
*_prepare_finalize.py modules (release line flashinfer_nvlink): their combine
already sums the top-k expert outputs of each token, so `output_is_reduced()`
must say so, or the MoE runner all-reduces it over the TP group a second time.
"""

import pytest

from vllm.model_executor.layers.fused_moe.flashinfer_nvlink_one_sided_prepare_finalize import (  # noqa: E501
    FlashInferNVLinkOneSidedPrepareAndFinalize,
)
from vllm.model_executor.layers.fused_moe.flashinfer_nvlink_two_sided_prepare_finalize import (  # noqa: E501
    FlashInferNVLinkTwoSidedPrepareAndFinalize,
)

pytestmark = pytest.mark.cpu_test


@pytest.mark.parametrize(
    "prepare_finalize_cls",
    [
        FlashInferNVLinkTwoSidedPrepareAndFinalize,
        FlashInferNVLinkOneSidedPrepareAndFinalize,
    ],
)
def test_output_is_reduced(prepare_finalize_cls):
    # __init__ needs an EP group with an all2all manager (a GPU and NVLink);
    # the answer does not depend on them.
    prepare_finalize = object.__new__(prepare_finalize_cls)
    assert prepare_finalize.output_is_reduced() is True
