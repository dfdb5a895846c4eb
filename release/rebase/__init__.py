"""`rebase` (vendor/ and patches/ onto another vLLM tag) and `tags` (the releases newer than the pin).

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
