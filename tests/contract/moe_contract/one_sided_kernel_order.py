"""The one-sided combine's top-k sum, in the order FlashInfer's CUDA kernel adds.

`vectorized_combine_impl` in moeAlltoAllKernels.cu (flashinfer-python 0.6.8.post1)
loads the top_k slots of a token into registers of the payload type T and adds them
pairwise, rounding to T after every add: (0+1, 2+3, ...), then (0+2, 4+6, ...), then
(0+4, ...). It is compiled only for the top_k values below. This is a model of a CUDA
kernel, not FlashInfer code; tests/kernel checks the real kernel on a GPU.
"""

import torch

SUPPORTED_TOP_K = (1, 2, 4, 6, 8, 10, 16, 22)


def one_sided_topk_sum(slots: torch.Tensor) -> torch.Tensor:
    """slots: [tokens, top_k, hidden] in the payload dtype -> [tokens, hidden], same dtype."""
    top_k = slots.shape[1]
    if top_k not in SUPPORTED_TOP_K:
        raise ValueError(f"FlashInfer's one-sided combine has no kernel for top_k={top_k}")
    acc = [slots[:, k] for k in range(top_k)]
    stride = 1
    while stride < top_k:
        for i in range(0, top_k, 2 * stride):
            if i + stride < top_k:
                acc[i] = acc[i] + acc[i + stride]  # a payload-dtype add, rounded each step
        stride *= 2
    return acc[0].clone()
