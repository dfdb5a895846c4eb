"""The torch of this test environment is the CPU build (`nox -s test` and every `contract` session install it)."""

from __future__ import annotations


def test_torch_is_the_cpu_build() -> None:
    # PyPI's torch is the CUDA build: 2.55 GiB more to download and 28 more packages, none of
    # them usable here. `nox -s test` takes torch from PyTorch's CPU index (noxfile.py).
    import torch

    assert torch.version.cuda is None, f"torch {torch.__version__} is a CUDA {torch.version.cuda} build"
