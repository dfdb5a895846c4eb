"""One release's pristine upstream code, from the package index, a wheel, a git remote or a directory.

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
