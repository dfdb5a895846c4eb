"""`train`: the release train, every vLLM release we ship an overlay for (add, remove, list, check, watch).

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
