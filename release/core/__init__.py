"""What every stage uses: errors, git, layout, versions, hashing, lock, journal, log.

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
