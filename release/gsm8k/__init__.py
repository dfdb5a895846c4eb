"""GSM8K 5-shot smoke against a real `vllm serve`, per all2all backend: `python -m release.gsm8k --help`.

One module per job: dataset (jsonl), prompts (lm-eval's 5-shot format), extract and
scoring (lm-eval's gsm8k filters and exact match), client (completions over HTTP),
server (process lifecycle), venvs (serving venvs from our index), lm_eval_runner (the
upstream report's command), results (Markdown + JSON), smoke (one run), cli.

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
