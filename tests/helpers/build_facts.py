"""The build facts (`_build_info.json`) of a made-up overlay wheel, for the hook's and the doctor's
decisions called in process: tests/doctor/test_decision.py, tests/overlay/test_modes.py and
tests/overlay/test_version_checks.py. Its versions are made up too: each test compares them with the
vLLM and FlashInfer versions it pretends are installed, never with a release of the train.
"""

from __future__ import annotations

from typing import cast

from vllm_fused_moe._meta import BuildInfo

# Only the keys the decisions read: a whole BuildInfo holds every fact of a build (a cast, so not checked).
INFO = cast(
    "BuildInfo",
    {
        "version": "0.20.0+fm.1",
        "vllm_tag": "v0.20.0",
        "vllm_version": "0.20.0",
        "flashinfer_specifier": "==0.6.8.post1",
        "patches": [{"name": "0001-x.patch"}],
    },
)
