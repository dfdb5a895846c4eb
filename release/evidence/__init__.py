"""Evidence: each bug's regression test run on a wheel's pristine vLLM release and with the wheel installed.

The stage `publish` holds every wheel to (docs/architecture.md, "Layers" and "The flow").
"""
