"""Release lines: every train tag's patched files, parsed, change output_is_reduced() of the FlashInfer
all-to-all classes only, and nothing else (in particular not the all-gather class sharing a base).

The trees are the real ones: each tag's pristine modules read from its release wheel (the cache, or
range reads) and its line's series replayed by `train check`'s code (git, in this process).
"""

from __future__ import annotations

import ast

import pytest

from helpers import REPO
from helpers.train import load_train
from release.core.layout import Layout
from release.queue.snapshot import Checkout
from release.train.check import check_train

pytestmark = pytest.mark.network  # every train tag's release wheel: range reads or the cache

# Class names of FlashInfer all-to-all prepare/finalize classes across vLLM's history (what we fix);
# every other class in these files must come out of the series unchanged.
A2A_CLASS_SUFFIXES = ("AllToAllMoEPrepareAndFinalize", "A2APrepareAndFinalize", "SidedPrepareAndFinalize")


def _classes(source: bytes) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in ast.parse(source).body if isinstance(node, ast.ClassDef)}


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef | None:
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _returns(function: ast.FunctionDef) -> str:
    [statement] = [n for n in function.body if isinstance(n, ast.Return)]
    assert statement.value is not None
    return ast.unparse(statement.value)


@pytest.fixture(scope="module")
def checked() -> dict[str, tuple[str, dict[str, bytes], dict[str, bytes]]]:
    """{tag: (line, pristine files, patched files)} for every train tag, as `train check` makes them."""
    layout = Layout(REPO)
    train = load_train(layout)
    out = {}
    for result in check_train(Checkout.load(layout)):
        assert result.ok, [f.line() for f in result.findings]
        assert result.replay is not None
        entry = train.get(result.tag)
        assert entry is not None
        out[result.tag] = (entry.line, result.replay.upstream.files, result.replay.files)
    return out


def test_every_line_of_the_train_changes_only_the_a2a_classes_output_is_reduced(
    checked: dict[str, tuple[str, dict[str, bytes], dict[str, bytes]]],
) -> None:
    lines_seen = set()
    for tag, (line, pristine, patched) in checked.items():
        changed = sorted(name for name in patched if patched[name] != pristine.get(name))
        assert changed, f"{tag}: the series changed nothing"
        for name in changed:
            before, after = _classes(pristine[name]), _classes(patched[name])
            assert before.keys() == after.keys(), f"{tag} {name}: classes added or removed"
            fixed = [c for c in after if c.endswith(A2A_CLASS_SUFFIXES)]
            assert fixed, f"{tag} {name}: no FlashInfer all-to-all class"
            for cname in after:
                old, new = before[cname], after[cname]
                if cname not in fixed:
                    # The base and the all-gather class (and any other) are exactly upstream's.
                    assert ast.dump(old) == ast.dump(new), f"{tag} {name}: {cname} changed"
                    continue
                method = _method(new, "output_is_reduced")
                assert method is not None, f"{tag} {name}: {cname} has no output_is_reduced()"
                # self.use_dp where the factory also builds the class without DP (its finalize is a copy).
                assert _returns(method) in ("True", "self.use_dp"), f"{tag} {name}: {cname}"
                others = [ast.dump(n) for n in new.body if n is not method]
                assert others == [ast.dump(n) for n in old.body if n is not _method(old, "output_is_reduced")]
        lines_seen.add(line)
    assert {"prepare_finalize", "flashinfer_nvlink", "flashinfer_a2a", "flashinfer_cutlass"} <= lines_seen


def test_the_cutlass_line_overrides_in_the_a2a_class_and_leaves_the_shared_base_false(
    checked: dict[str, tuple[str, dict[str, bytes], dict[str, bytes]]],
) -> None:
    tags = [tag for tag, (line, _, _) in checked.items() if line == "flashinfer_cutlass"]
    assert tags
    for tag in tags:
        files = checked[tag][2]
        classes = _classes(files["flashinfer_cutlass_prepare_finalize.py"])
        base = classes["FlashInferCutlassMoEPrepareAndFinalize"]
        gather = classes["FlashInferAllGatherMoEPrepareAndFinalize"]
        a2a = classes["FlashInferAllToAllMoEPrepareAndFinalize"]
        assert [ast.unparse(b) for b in gather.bases] == [ast.unparse(b) for b in a2a.bases] == [base.name]
        base_method = _method(base, "output_is_reduced")
        assert base_method is not None and _returns(base_method) == "False"
        assert _method(gather, "output_is_reduced") is None  # inherits False: right for all-gather
        override = _method(a2a, "output_is_reduced")
        assert override is not None and _returns(override) == "self.use_dp"
