"""One METADATA reader (`packaging`'s) and which FlashInfer requirement is a release's pin.

The pin is the first requirement on FlashInfer, by its canonical name, whose marker holds on Linux
x86_64 CPython without extras. The regex this replaced missed `flashinfer_python`, a requirement with
extras, one written with a space before its specifier and one whose marker names another platform
(it took the first line that matched, whatever its marker). Every train tag's real METADATA against
patches/train.toml: tests/e2e/test_metadata_pins.py.
"""

from __future__ import annotations

import pytest

from release.core.errors import SourceError, VersionProofError
from release.pristine import safe
from release.pristine.metadata import read_metadata, requirements_file_pin

HEAD = "Metadata-Version: 2.4\nName: vllm\nVersion: 0.20.0\n"


def pin_of(requires: str) -> str:
    return safe.wheel_flashinfer_pin(read_metadata(HEAD + requires + "\nthe description\n"), "test.whl")


@pytest.mark.parametrize(
    ("requires", "pin"),
    [
        (
            "Requires-Dist: flashinfer-python==0.6.8.post1\nRequires-Dist: flashinfer-cubin==0.6.8.post1",
            "==0.6.8.post1",
        ),
        # the spelling PEP 503 normalises: the old regex saw no pin at all
        ("Requires-Dist: flashinfer_python==0.6.6", "==0.6.6"),
        ("Requires-Dist: FlashInfer.Python==0.6.6", "==0.6.6"),
        # extras asked of FlashInfer are still a pin on FlashInfer
        ("Requires-Dist: flashinfer-python[jit]==0.6.1", "==0.6.1"),
        # a space before the specifier: the old regex cut the pin to ">="
        ("Requires-Dist: flashinfer-python >=0.6.1, <0.7", "<0.7,>=0.6.1"),
        # only under an extra (vLLM 0.10.1-0.11.0): a plain install gets no FlashInfer
        ('Requires-Dist: flashinfer-python==0.2.11; extra == "flashinfer"', ""),
        # a marker for another platform first: the one for Linux x86_64 is the pin
        (
            'Requires-Dist: flashinfer-python==0.5.0; platform_machine == "aarch64"\n'
            'Requires-Dist: flashinfer-python==0.6.0; platform_machine == "x86_64" and sys_platform == "linux"',
            "==0.6.0",
        ),
        ('Requires-Dist: flashinfer-python==0.6.0; sys_platform == "darwin"', ""),
        ("Requires-Dist: torch==2.9.0", ""),
        ("", ""),
    ],
)
def test_the_pin_is_the_requirement_on_flashinfer_that_holds_on_linux_x86_64(requires: str, pin: str) -> None:
    assert pin_of(requires) == (f"flashinfer-python{pin}" if pin else "")


def test_a_requires_dist_that_does_not_parse_is_refused_with_the_wheel_named() -> None:
    with pytest.raises(SourceError, match=r"test\.whl: \.dist-info/METADATA: a Requires-Dist does not parse"):
        pin_of("Requires-Dist: flashinfer-python (==0.6")


def test_the_version_proof_reads_the_header_with_the_same_parser() -> None:
    meta = b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.20.0+cu129\nLicense-File: LICENSE\n\nbody\n"
    # Metadata-Version 2.1 with License-File (2.4): what vLLM 0.1.4-0.6.x ship, read all the same
    assert safe.prove_wheel_version(meta, "v0.20.0", "w.whl").version == "0.20.0+cu129"
    with pytest.raises(VersionProofError, match=r"is vLLM 0\.20\.1, not v0\.20\.0"):
        safe.prove_wheel_version(meta.replace(b"0.20.0+cu129", b"0.20.1"), "v0.20.0", "w.whl")
    with pytest.raises(VersionProofError, match="has no Version"):
        safe.prove_wheel_version(b"Metadata-Version: 2.1\nName: vllm\n", "v0.20.0", "w.whl")
    # a Version header in the body is no header: the regex this replaced took it
    with pytest.raises(VersionProofError, match="has no Version"):
        safe.prove_wheel_version(b"Metadata-Version: 2.1\nName: vllm\n\nVersion: 0.20.0\n", "v0.20.0", "w.whl")
    with pytest.raises(VersionProofError, match="not UTF-8"):
        safe.prove_wheel_version(b"Version: \xff\n", "v0.20.0", "w.whl")


def test_a_requirements_file_is_read_line_by_line_as_pep_508() -> None:
    text = "\n".join(
        [
            "# Common dependencies",
            "-r common.txt",
            "--extra-index-url https://download.pytorch.org/whl/cu128",
            "torch==2.9.0",
            'flashinfer_python==0.2.5 ; platform_machine == "aarch64"  # the ARM build',
            'flashinfer-python==0.2.6 ; platform_machine == "x86_64"  # the x86 build',
            "not a requirement at all (",
        ]
    )
    assert requirements_file_pin(text) == "flashinfer-python==0.2.6"
    assert requirements_file_pin("torch==2.9.0\n") == ""
