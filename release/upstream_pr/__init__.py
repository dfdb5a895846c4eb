"""`upstream-pr`: one of our patches as an upstream vLLM pull request (mail, branch, PR.md).

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
