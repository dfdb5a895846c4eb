# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
"""The reduce decision of the FlashInfer NVLink all-to-all prepare/finalize.

FlashInfer's NVLink combine (two-sided and one-sided) already sums the top-k
expert outputs of each token, so every rank holds the complete routed output
of its own tokens: `output_is_reduced()` must say so, or the MoE runner
all-reduces it over the TP group a second time.
"""

import pytest

from vllm.model_executor.layers.fused_moe.prepare_finalize.flashinfer_nvlink_one_sided import (  # noqa: E501
    FlashInferNVLinkOneSidedPrepareAndFinalize,
)
from vllm.model_executor.layers.fused_moe.prepare_finalize.flashinfer_nvlink_two_sided import (  # noqa: E501
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
def test_flashinfer_nvlink_output_is_reduced(prepare_finalize_cls):
    # __init__ needs an EP group with an all2all manager (a GPU and NVLink);
    # the answer does not depend on them.
    prepare_finalize = object.__new__(prepare_finalize_cls)
    assert prepare_finalize.output_is_reduced() is True
