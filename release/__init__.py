"""Tooling for the vllm-fused-moe patch queue: `python -m release --help`."""
