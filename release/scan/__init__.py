"""`scan`: which vLLM releases on the index need which patch (docs/affected-releases.md and its JSON).

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
