"""The verdict on the facts found, and the fix: the exact command that makes the fix live here."""

from __future__ import annotations

import shlex

from .installed import public_version
from .records import Facts, Fix, Overlay, Release, Report
from .words import INDEX_ENV, INDEX_PLACEHOLDER, MODE_ENV, PROJECT, Status, Verdict


def conclude(facts: Facts, index_url: str | None = None) -> Report:
    """The facts with their verdict, summary and fix."""
    verdict, summary = judge(facts)
    return Report(facts, verdict, summary, fix_for(facts, verdict, index_url))


def judge(facts: Facts) -> tuple[Verdict, str]:
    """(verdict, summary) from the facts gathered: docs/doctor.md, "Order of the checks"."""
    release, serve = facts.release, facts.serve
    if release.status is Status.UNKNOWN:
        return Verdict.CANNOT_TELL, release.why
    if serve is not None and serve.refused:
        what = "command line" if serve.refused.startswith("--") else "environment"
        return Verdict.REFUSED, f"vLLM {vllm_of(facts)} would refuse this {what}: {serve.refused}"
    reduced = facts.live.reduced() if facts.live is not None else None  # what the classes vLLM resolves say
    if release.status in (Status.FIXED, Status.NOT_AFFECTED):
        if release.status is Status.FIXED and reduced is False:
            return Verdict.FIXED_NOT_LIVE, (
                f"{release.why}, but the classes vLLM resolves here return output_is_reduced() False: "
                "something overrides them"
            )
        stale = stale_overlay(facts.overlay)
        return Verdict.NOT_AFFECTED, release.why + (f"; {stale}" if stale else "")
    return judge_affected(facts, reduced)


def judge_affected(facts: Facts, reduced: bool | None) -> tuple[Verdict, str]:
    """Affected: is our fix for this very release in place, and will vLLM run it?"""
    release, overlay, serve, why = facts.release, facts.overlay, facts.serve, facts.release.why
    ours = overlay.for_this_vllm
    if ours and overlay.missing_fixes:
        named = "; ".join(
            f"{bug} ({release.bugs[bug].title})" if bug in release.bugs and release.bugs[bug].title else bug
            for bug in overlay.missing_fixes
        )
        carried = ", ".join(str(p) for p in overlay.patches) or "no patch"
        damage = f"; it is damaged: {overlay.reason}" if overlay.damaged else ""
        return Verdict.AFFECTED, (
            f"{why}; the installed overlay {overlay.version} carries no fix for {named} (its patches: {carried})"
            + damage
        )
    if ours and overlay.activates and overlay.hook_installed and reduced is not False:
        live = facts.live
        if live is not None and reduced is None:  # --live asked, and vLLM's import did not say
            return Verdict.CANNOT_TELL, (
                f"{why}; the hook would activate our overlay, but --live could not read the classes vLLM "
                f"resolves here: {live.error or 'none of them was found'}"
            )
        how = "the classes vLLM resolves say so (--live)" if reduced else "the import hook's own decision"
        if overlay.damaged:  # live in this process, but an install pip can neither upgrade nor remove
            return Verdict.DAMAGED, f"{why}; our fix is live here ({how}), but the install is damaged: {overlay.reason}"
        return Verdict.FIXED_LIVE, f"{why}; our fix is live here: {how}"
    if serve is not None and serve.conclusive and not serve.reduce_runs:
        return Verdict.NOT_USED, f"{why}, but this command line does not run it: {serve.why}"
    if ours:
        if overlay.damaged:
            not_live = f"the overlay is damaged: {overlay.reason}"
        elif not overlay.activates:
            not_live = f"the overlay does not activate: {overlay.reason}"
        elif not overlay.hook_installed:
            not_live = "the overlay would activate, but its import hook is not installed in this interpreter"
        else:
            not_live = "the overlay activates, yet the classes vLLM resolves return output_is_reduced() False"
        return Verdict.FIXED_NOT_LIVE, f"{why}; {not_live}"
    if overlay.installed:
        damage = "it is damaged: " if overlay.damaged else ""
        return Verdict.AFFECTED, f"{why}; the installed overlay does not fix it: {damage}{overlay.reason}"
    if overlay.version is not None:  # the record without its package
        return Verdict.AFFECTED, f"{why}; the fix is not installed: {overlay.reason}"
    return Verdict.AFFECTED, f"{why}; the fix is not installed"


def stale_overlay(overlay: Overlay) -> str | None:
    """Where the release needs no overlay: the one still installed (or its record), which serves nothing."""
    if overlay.version is None or (overlay.for_this_vllm and not overlay.damaged):
        return None
    if overlay.vllm_tag and not overlay.for_this_vllm:
        return (
            f"{PROJECT} {overlay.version} is still installed, built for vLLM {overlay.vllm_tag}: it serves "
            f"nothing here, and pip check fails on its requirement of vllm=={overlay.vllm_tag.lstrip('v')}"
        )
    return f"{PROJECT} {overlay.version} is still installed and serves nothing here: {overlay.reason}"


def vllm_of(facts: Facts) -> str:
    return public_version(facts.vllm or "")


# ----------------------------------------------------------------------------- the fix


def pip_install(python: str, *args: str) -> list[str]:
    return [python, "-m", "pip", "install", *args]


def index_base(index_url: str) -> str:
    """Our index as `publish` lays it out: the URL that holds `simple/` and `requirements/`.

    A URL of its `simple/` (what --index-url named before the index held requirements files) means
    the same index.
    """
    base = index_url.rstrip("/")
    return base[: -len("/simple")] if base.endswith("/simple") else base


def overlay_install(
    python: str, index_url: str, vllm: str, reinstall: bool = False, record_lost: bool = False
) -> tuple[list[str], list[str]]:
    """docs/overlay.md "Install": our wheel for vLLM `vllm` from the hash-pinned requirements file
    that `publish` writes, our project page the only source; then `pip check`. `reinstall`: over an
    install pip would keep as it is (its record without its package, an impostor of the same version,
    damaged files), only our wheel (`pip check` then checks its requirements). `record_lost`: its
    RECORD is gone, so pip cannot uninstall it first: our wheel's files are written over it
    (--ignore-installed), its RECORD with them."""
    base = index_base(index_url)
    forced = ["--ignore-installed" if record_lost else "--force-reinstall", "--no-deps"] if reinstall else []
    page, requirements = f"{base}/simple/{PROJECT}/", f"{base}/requirements/vllm-{vllm}.txt"
    install = pip_install(python, *forced, "--no-index", "--find-links", page, "-r", requirements)
    return install, [python, "-m", "pip", "check"]


def make_fix(argv: list[str] | None, why: str, check: list[str] | None = None) -> Fix:
    command = shlex.join(argv) if argv else None
    if command and check:
        command += f" && {shlex.join(check)}"
    return Fix(command, tuple(argv) if argv else None, tuple(check) if check else None, why)


def fix_for(facts: Facts, verdict: Verdict, index_url: str | None) -> Fix | None:
    """The exact command that makes the fix live here, or None when nothing is to be done."""
    release, overlay, python = facts.release, facts.overlay, facts.python
    if verdict is Verdict.REFUSED:
        choices = (facts.serve.all2all_backends if facts.serve else None) or ()
        return make_fix(None, f"give vLLM {vllm_of(facts)} one of: {', '.join(choices)}")
    if verdict is Verdict.NOT_AFFECTED and stale_overlay(overlay):
        why = f"removes {PROJECT} {overlay.version}: vLLM {vllm_of(facts)} needs no overlay"
        if overlay.record_lost and overlay.leftovers:  # pip uninstall refuses it: "no RECORD file was found"
            return make_fix(["rm", "-r", *overlay.leftovers], f"{why}; by hand, as pip cannot (its RECORD is gone)")
        return make_fix([python, "-m", "pip", "uninstall", "-y", PROJECT], why)
    if verdict is Verdict.DAMAGED:  # live now, but pip cannot keep it (upgrade, remove)
        return fix_by_install(facts, index_url)
    # not-used, not-affected, fixed-live: nothing to do; cannot-tell: nothing known to do.
    if verdict not in (Verdict.AFFECTED, Verdict.FIXED_NOT_LIVE):
        return None
    if release.status is not Status.AFFECTED:  # fixed upstream, yet overridden (--live): nothing of ours to install
        return make_fix(None, "find what serves vLLM's prepare_finalize modules here (see live.classes)")
    if overlay.for_this_vllm and not overlay.missing_fixes and not overlay.damaged:
        return fix_ours(overlay, python)
    if overlay.record_lost and overlay.leftovers and not overlay.for_this_vllm:
        # Another release's overlay without RECORD: an install over it would leave its .dist-info beside
        # the new one (two versions installed). Removed first; the doctor then prints the install.
        return make_fix(
            ["rm", "-r", *overlay.leftovers],
            f"removes {PROJECT} {overlay.version} by hand, as pip cannot (its RECORD is gone); then run the doctor "
            "again: it prints the install of the overlay for this release",
        )
    return fix_by_install(facts, index_url)


def fix_ours(overlay: Overlay, python: str) -> Fix:
    """Our overlay for this release is installed, carrying every fix it needs: what keeps it from running."""
    reason = overlay.reason or ""
    if overlay.mode == "off":
        return Fix(f"unset {MODE_ENV}", None, None, f"{MODE_ENV}=off disables the overlay")
    if not overlay.activates and "flashinfer-python" in reason and overlay.flashinfer_specifier:
        return make_fix(pip_install(python, f"flashinfer-python{overlay.flashinfer_specifier}"), reason)
    if overlay.activates and not overlay.hook_installed:
        return make_fix(
            None,
            "start Python without -S, with the overlay's site-packages processed by site "
            "(a .pth file in a PYTHONPATH directory is not run)",
        )
    if not overlay.activates:
        return make_fix(None, reason)
    return make_fix(None, "something else serves vLLM's prepare_finalize modules here (see live.classes)")


def fix_by_install(facts: Facts, index_url: str | None) -> Fix:
    """The overlay of this release from our index, or vLLM with the fix where no overlay is published."""
    release, overlay, vllm = facts.release, facts.overlay, vllm_of(facts)
    if release.in_train:
        return install_overlay(facts.python, overlay, release, vllm, index_url or INDEX_PLACEHOLDER)
    if release.fixed_in:
        return make_fix(
            pip_install(facts.python, f"vllm>={release.fixed_in}"),
            f"no overlay is published for vLLM {vllm}; vLLM has the fix from {release.fixed_in}",
        )
    return make_fix(None, f"no overlay is published for vLLM {vllm}, and no fixed vLLM release is known")


def install_overlay(python: str, overlay: Overlay, release: Release, vllm: str, index: str) -> Fix:
    # The pinned requirements file takes our newest wheel for this vLLM by its sha256, from our page
    # alone, and checks the installed vLLM and FlashInfer without replacing them (docs/overlay.md).
    argv, check = overlay_install(python, index, vllm, reinstall=overlay.damaged, record_lost=overlay.record_lost)
    why = f"installs the overlay for vLLM {vllm} (the newest patch level our index pins, {vllm}+fm.N)"
    if overlay.damaged:
        found = f"{PROJECT} {overlay.version}" if overlay.version else PROJECT
        why += (
            f", over the {found} found here, which pip would otherwise keep "
            "(`Requirement already satisfied`); --no-deps: a forced reinstall would reinstall vLLM and "
            "FlashInfer too, which our page does not hold"
        )
    elif overlay.installed:
        why += f", replacing {overlay.version}"
    why += "; pip check then says that the environment's requirements are met"
    if index == INDEX_PLACEHOLDER:  # no command that would fail as printed: say how to get the one that runs
        return make_fix(
            None,
            f"{why}. Which index you installed from is not known here: run the doctor again with --index-url URL "
            f"(or {INDEX_ENV}=URL), URL being where our index is served (the address of the requirements file "
            "you installed from, up to /requirements/), and it prints the command",
        )
    return make_fix(argv, why, check)
