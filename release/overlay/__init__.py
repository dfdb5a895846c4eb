"""The overlay wheel (`build`), the index it is published to (`publish`) and `doctor --python`.

runtime/ is no package of it: the wheel's top level as installed.

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
