"""The data every stage shares: patch, series, release line, pin, pristine tree, train entry, source, outcomes.

Small dataclasses and enums, parsed once and written back byte-stably.
Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
