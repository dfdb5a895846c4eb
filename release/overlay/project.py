"""The overlay's names: its project, its package, and the two modules beside the package (the `.pth`'s and the
console script's), which `build` stages and `publish` holds a wheel to."""

from __future__ import annotations

from release.core.layout import OVERLAY_PACKAGE

PROJECT = "vllm-fused-moe"

PACKAGE = OVERLAY_PACKAGE

# The zip format cannot store times before 1980; used when there is no git commit to date.
ZIP_EPOCH = 315532800

PTH_NAME = f"{PACKAGE}.pth"

# The .pth's module (release/overlay/runtime/_vllm_fused_moe_pth.py): beside the package, not in it, so
# that the kill switch works whatever state the package is in.
PTH_MODULE = "_vllm_fused_moe_pth"

# The console script's module, beside both: it speaks with either the package or the .pth's module gone.
CLI_MODULE = "_vllm_fused_moe_cli"

# One line: site.py executes a .pth line that starts with `import`, at every interpreter start-up of
# the environment. The module reads the switch, then installs the hook or a stand-in; it never raises.
PTH_LINE = f"import {PTH_MODULE}; {PTH_MODULE}.install()\n"
