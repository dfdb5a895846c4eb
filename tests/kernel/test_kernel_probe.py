"""The probe itself: it must read the device and explain every backend."""

from __future__ import annotations

import os

import pytest

import kernel_probe

pytestmark = pytest.mark.gpu


def test_probe_reads_device_and_version(probe: kernel_probe.ProbeResult) -> None:
    assert probe.cuda_available
    major, _minor = (int(p) for p in probe.compute_capability.split("."))
    assert major >= 9, f"NVLink MoE all-to-all kernels target sm_90+, got {probe.compute_capability}"
    assert probe.attr_vmm == "1", f"CUDA VMM is required for the MNNVL workspace: {probe.attr_vmm}"
    under_test = os.environ.get("VLLM_FUSED_MOE_FLASHINFER")  # set by `nox -s kernel -- --flashinfer V`
    if under_test:
        # A verification run: the version asked for is what runs, verified or not yet.
        assert probe.flashinfer == under_test, f"asked for flashinfer-python {under_test}, {probe.flashinfer} runs"
    else:
        assert probe.flashinfer_verified, (
            f"flashinfer-python {probe.flashinfer} is outside VERIFIED.toml {probe.verified_specifier}"
        )


def test_probe_explains_every_backend(probe: kernel_probe.ProbeResult) -> None:
    names = [b.backend for b in probe.backends]
    assert names == list(kernel_probe.BACKENDS)
    for b in probe.backends:
        # A backend that cannot run must say why, in the probe's words.
        assert b.can_run or len(b.reason) > 10, b
