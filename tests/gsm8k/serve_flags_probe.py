"""Parse a `vllm serve` command line with the vLLM first on sys.path, as `vllm serve` does; print JSON.

Usage: python serve_flags_probe.py '[["serve", "MODEL", "--port", "8000", ...], ...]'
Run in a process of its own with one release's files first on PYTHONPATH. No server starts:
the probe builds the `vllm` parser with the `serve` subcommand the way the release's CLI does
(FlexibleArgumentParser, a `serve` subparser filled by entrypoints.openai.cli_args.make_arg_parser),
parses each argument list and runs the serve subcommand's own validation. One JSON line per list,
with the values the parser's --all2all-backend accepts (`all2all_choices`).

Seam: vLLM computes argument defaults (DeviceConfig) from the platform it detects, and a
CPU test machine running a CUDA wheel is no platform vLLM knows, so the probe declares
vLLM's own CPU platform first. Which arguments a release accepts does not depend on it.
"""

from __future__ import annotations

import json
import sys

MARKER = "SERVE-FLAGS "


def main(argvs: list[list[str]]) -> int:
    import vllm
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms.current_platform = CpuPlatform()

    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    for argv in argvs:
        parser = FlexibleArgumentParser(prog="vllm")
        subparsers = parser.add_subparsers(dest="subparser")
        serve = subparsers.add_parser("serve", usage="vllm serve [model_tag] [options]")
        make_arg_parser(serve)
        backend = next(a for a in serve._actions if "--all2all-backend" in a.option_strings)
        report: dict[str, object] = {
            "vllm_version": vllm.__version__,
            "vllm_file": vllm.__file__,
            "all2all_choices": None if backend.choices is None else [str(c) for c in backend.choices],
        }
        try:
            args = parser.parse_args(argv)
            validate_parsed_serve_args(args)
        except SystemExit as exit_:
            report.update(accepted=False, exit_code=exit_.code)
        else:
            parsed = {k: v for k, v in vars(args).items() if isinstance(v, str | int | float | bool | type(None))}
            report.update(accepted=True, args=parsed)
        print(MARKER + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
