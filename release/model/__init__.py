"""The data every stage shares: patch, series, release line, pin, pristine tree, train entry, source, outcomes.

Small dataclasses and enums, parsed once and written back byte-stably. The bottom of the layers
above release.core (docs/architecture.md): nothing here imports a stage.
"""
