"""One owner per fact (issue 39): where a fact has to be written twice, the two spellings agree."""

from __future__ import annotations

from release.core.layout import BUILD_INFO_MEMBER, BUILD_INFO_NAME, OVERLAY_PACKAGE, PROJECT_ROOT, Layout
from vllm_fused_moe import _meta


def test_the_build_info_the_tooling_writes_is_the_file_the_runtime_reads() -> None:
    """The runtime ships in the wheel and cannot import release/: it names _build_info.json itself."""
    layout = Layout(PROJECT_ROOT)
    assert layout.runtime_package.resolve() == _meta.HERE
    assert _meta.BUILD_INFO == _meta.HERE / BUILD_INFO_NAME
    assert f"{layout.runtime_package.name}/{BUILD_INFO_NAME}" == BUILD_INFO_MEMBER
    assert layout.runtime_package.name == OVERLAY_PACKAGE
