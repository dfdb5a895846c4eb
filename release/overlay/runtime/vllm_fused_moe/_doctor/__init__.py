"""The doctor's parts (vllm_fused_moe/doctor.py is the command): one module per question it answers.

- `words`: its names and words (the verdicts and release statuses as enums, the exit codes);
- `records`: what it finds and concludes, as frozen dataclasses, each with its part of the JSON report;
- `installed`: what is installed (vLLM, FlashInfer, our overlay and the hook's decision), and what
  the scan data says of the installed release; `live`: what `--live` reads from vLLM's own import;
- `serve`: what a `vllm serve` command line asks of the installed release;
- `evidence`: what `publish` proved of the installed wheel, read from the index; `binding`: whether that
  evidence is of the wheel installed here; `reading`: bounded reads of a file or URL, and the words
  (credentials out, control characters escaped) anything read from outside is printed in;
- `verdict`: the verdict and the fix;
- `report`: the whole report, gathered, and in words.

Standard library only at module level, Python 3.10+, and only relative imports among themselves:
doctor.py run as a file from a checkout loads this folder under a private name, so that it never
shadows the `vllm_fused_moe` package installed in the environment it asks.
"""
