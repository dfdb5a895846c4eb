"""The patch queue on disk: load, check and status, the classifier and the replay the stages above share.

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
