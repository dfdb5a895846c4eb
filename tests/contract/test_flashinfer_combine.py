"""FlashInfer's side of the contract, as far as it runs without a GPU.

Two-sided: the top-k sum is Python in flashinfer-python, so we run the installed
function itself (device and NVLink transport replaced by named doubles) and check
what it returns. One-sided: the sum is inside a CUDA kernel; tests/kernel pins it on a
GPU and VERIFIED.toml records which FlashInfer versions passed.
"""

import ast

import pytest
import torch
from packaging.version import Version

from helpers import tag_facts
from moe_contract.checks import RELATIVE_TOLERANCE, worst_row_error
from moe_contract.flashinfer_two_sided import (
    COMBINE_FUNCTION,
    EXPECTED_GLOBALS,
    MoeCommTransportDouble,
    combine_source_file,
    find_combine_function,
    global_names_read,
    installed_flashinfer_version,
    load_two_sided_combine,
)
from moe_contract.one_sided_kernel_order import one_sided_topk_sum
from moe_contract.problem import PAYLOAD_DTYPES
from moe_contract.verified import read_verified_flashinfer

pytestmark = pytest.mark.timeout(60)


def test_installed_flashinfer_is_the_one_the_installed_vllm_pins_and_verified() -> None:
    pinned = tag_facts.pinned_version(tag_facts.installed_vllm_flashinfer_requirement())
    installed = installed_flashinfer_version()
    assert installed == pinned, f"vLLM {tag_facts.installed_vllm()} pins flashinfer-python {pinned}, not {installed}"
    assert installed in read_verified_flashinfer().versions, (
        f"flashinfer-python {installed} is not in VERIFIED.toml's verified list; "
        "follow docs/contract.md before adding it"
    )


@pytest.mark.any_release
def test_the_heads_flashinfer_pin_is_verified() -> None:
    pinned = tag_facts.pinned_version(tag_facts.head().flashinfer)
    assert pinned in read_verified_flashinfer().versions


@pytest.mark.any_release
def test_every_verified_version_says_how_it_was_verified() -> None:
    from moe_contract.paths import VERIFIED_TOML
    from release.queue.verified import read_verified

    entries = read_verified(VERIFIED_TOML).entries
    assert entries
    for entry in entries:
        assert str(Version(entry.version)) == entry.version, "a verified version is written in PEP 440 normal form"
        assert "tests/" in entry.how, f"{entry.version}: `how` must name the suites that ran against it"


@pytest.mark.parametrize("payload_dtype", PAYLOAD_DTYPES)
@pytest.mark.parametrize("top_k", [1, 2, 8])
@pytest.mark.parametrize("tokens", [0, 1, 9])
def test_two_sided_combine_returns_the_top_k_sum(payload_dtype: str, top_k: int, tokens: int) -> None:
    dtype = PAYLOAD_DTYPES[payload_dtype]
    gen = torch.Generator().manual_seed(top_k * 100 + tokens)
    hidden = 16
    expert_outputs = torch.randn(tokens * top_k, hidden, generator=gen).to(dtype)
    # Expert outputs arrive in dispatch order, not token order: slot_of_row undoes that.
    slot_of_row = torch.randperm(tokens * top_k, generator=gen)
    transport = MoeCommTransportDouble(group=None)
    combine = load_two_sided_combine(transport)
    info = type("AlltoallInfoStandIn", (), {})()
    info.recv_rank_count_cumsum = torch.tensor([tokens * top_k])
    info.recv_rank_local_indices = torch.arange(tokens * top_k)
    info.send_rank_count_cumsum = torch.tensor([tokens * top_k])
    info.backward_recv_rank_local_indices = slot_of_row

    combined = combine(expert_outputs, info, None, 0, 1, top_k, tokens)

    slots = torch.zeros(tokens * top_k, hidden)
    slots[slot_of_row] = expert_outputs.float()
    expected = slots.view(tokens, top_k, hidden).sum(dim=1)
    assert transport.calls == 1
    assert combined.dtype == dtype and combined.shape == (tokens, hidden)
    assert worst_row_error(combined.float(), expected) <= RELATIVE_TOLERANCE[payload_dtype]
    if tokens and top_k > 1:
        # Not a pass-through of one slot: dropping any slot moves the result.
        partial = slots.view(tokens, top_k, hidden)[:, 1:].sum(dim=1)
        assert worst_row_error(combined.float(), partial) > RELATIVE_TOLERANCE[payload_dtype]


def test_two_sided_combine_still_ends_in_a_sum_over_the_top_k_axis() -> None:
    """Structural pin with a readable failure when FlashInfer rewrites the function."""
    function = find_combine_function(ast.parse(combine_source_file().read_text()))
    assert global_names_read(function) == EXPECTED_GLOBALS
    last = function.body[-1]
    assert isinstance(last, ast.Return) and isinstance(last.value, ast.Call), ast.unparse(last)
    call = last.value
    assert ast.unparse(call.func) == "torch.sum", f"{COMBINE_FUNCTION} now returns {ast.unparse(call)}"
    reshape = call.args[0]
    assert isinstance(reshape, ast.Call) and ast.unparse(reshape.func).endswith(".reshape")
    assert [ast.unparse(a) for a in reshape.args[:2]] == ["token_count", "top_k"]
    assert {kw.arg: ast.unparse(kw.value) for kw in call.keywords}.get("dim") == "1"


@pytest.mark.any_release
@pytest.mark.parametrize("top_k", [3, 5, 32])
def test_one_sided_model_refuses_top_k_the_kernel_is_not_built_for(top_k: int) -> None:
    with pytest.raises(ValueError, match=f"no kernel for top_k={top_k}"):
        one_sided_topk_sum(torch.zeros(1, top_k, 4, dtype=torch.bfloat16))


@pytest.mark.any_release
def test_one_sided_model_adds_pairwise_in_the_payload_dtype() -> None:
    # In bf16, 1 + 2^-8 rounds back to 1 (tie to even). Pairwise, the kernel first adds
    # 2^-8 + 2^-8 = 2^-7, which survives: 1 + 2^-7. Left to right would lose all three,
    # and one float32 sum rounded once (torch.sum) gives 1 + 2^-6.
    slots = torch.tensor([[[1.0], [2**-8], [2**-8], [2**-8]]], dtype=torch.bfloat16)
    assert one_sided_topk_sum(slots).item() == 1.0 + 2**-7
    left_to_right = ((slots[:, 0] + slots[:, 1]) + slots[:, 2]) + slots[:, 3]
    assert left_to_right.item() == 1.0
    assert slots.sum(dim=1).item() == 1.0 + 2**-6
