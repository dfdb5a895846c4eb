"""vLLM's fused-MoE `prepare_finalize` subtree with our patch series, activated in place.

`vllm_fused_moe.pth` (installed next to this package) imports `vllm_fused_moe._finder` at
interpreter start-up, which puts one import hook on `sys.meta_path`. The hook serves
`vllm.model_executor.layers.fused_moe.prepare_finalize` and its submodules from
`vllm_fused_moe/prepare_finalize/` under the upstream names, after checking that the
installed vLLM is the one this build was made for. See docs/overlay.md.

This module is imported by every Python process of the environment, so it imports nothing.
"""

# The environment variable that selects the mode: on (default), off, strict.
MODE_ENV = "VLLM_FUSED_MOE"
