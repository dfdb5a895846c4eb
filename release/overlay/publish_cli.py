"""`python -m release publish DIST INDEX_DIR`: add our wheels to a PEP 503 index directory.

The stage is release/overlay/publish.py; `--to URL` (an index server) is release/overlay/upload.py."""

from __future__ import annotations

import argparse

from release.core import flags
from release.core.errors import BadInputError
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.overlay.attest import SIGNING_KEY_ENV, SUFFIX
from release.overlay.project import PROJECT
from release.overlay.publish import PublishOptions, publish_wheels
from release.overlay.upload import ServerTarget, publish_to_server
from release.queue.snapshot import Checkout


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"Add the {PROJECT} wheels in DIST (a directory or one .whl) to the PEP 503 index in INDEX_DIR "
        "(created if missing), and write INDEX_DIR/requirements/vllm-X.txt for each vLLM release X: our "
        "newest wheel for X, pinned by version and sha256. Users install through that file, never by name "
        f"(pip install --no-index --find-links URL/simple/{PROJECT}/ -r URL/requirements/vllm-X.txt; "
        "docs/overlay.md, 'Install'). Nothing is written unless `check` passes, each wheel is byte for byte "
        "its build again at the commit it names, and each recorded bug's test fails on the pristine release, "
        "passes with it and fails with it built without the fix. "
        "Refusals (exit 2, index unchanged), repairs: docs/overlay.md, 'The index'."
    )
    parser.add_argument("dist", type=flags.path, metavar="DIST", help="a directory of wheels, or one wheel")
    parser.add_argument("index", type=flags.path, metavar="INDEX_DIR", help="the index directory (holds simple/)")
    parser.add_argument(
        "--python",
        type=flags.name,
        default=None,
        metavar="PYTHON",
        help="run the evidence under this interpreter instead (one with torch CPU, vLLM's import-time packages, "
        "pytest and pip); default: each release line's proving environment (envs/lines.toml), made by the tool",
    )
    # issue 47: an index server (release/overlay/upload.py), and the key that signs the evidence (attest.py).
    parser.add_argument(
        "--to",
        metavar="URL",
        help="upload the wheels to the index server whose legacy upload API (what `twine upload` speaks) is at URL "
        "(or a repository name of ~/.pypirc), refusing a file it holds with other bytes; INDEX_DIR then gets "
        "only requirements/ and evidence/, served statically (or committed) for operators. Credentials as twine "
        "finds them: TWINE_USERNAME/TWINE_PASSWORD, keyring, ~/.pypirc (never printed). Without --to, INDEX_DIR "
        "is the whole index",
    )
    parser.add_argument(
        "--simple-url",
        metavar="URL",
        help="with --to: the server's simple index, whose page of our project is read before and after the "
        "upload (default: TO/simple/, as pypiserver serves it; devpi: https://HOST/USER/INDEX/+simple/)",
    )
    parser.add_argument(
        "--signing-key",
        type=flags.path,
        metavar="FILE",
        help="an ed25519 private key (PEM) that signs each wheel's evidence as an in-toto attestation "
        f"(INDEX_DIR/evidence/<wheel>{SUFFIX}; docs/overlay.md, 'Signed evidence'); default: the PEM text in "
        f"${SIGNING_KEY_ENV}, else the evidence is not signed. `python -m release signing-key` prints its fingerprint",
    )
    flags.add_allow_dirty(
        parser,
        help="publish a dirty build (`build --allow-dirty`, version X+fm.N.dirty) too; refused without it "
        "(exit 2), as its requirements file would pin it: only for an index no user installs from",
    )


def run(args: argparse.Namespace, layout: Layout) -> int:
    options = PublishOptions(
        dist=flags.absolute(args.dist),
        index=flags.absolute(args.index),
        python=flags.interpreter(args.python) if args.python else None,
        allow_dirty=args.allow_dirty,
        signing_key=flags.absolute(args.signing_key) if args.signing_key else None,
    )
    if args.simple_url and not args.to:
        raise BadInputError("--simple-url is the page of the server --to uploads to: give --to too")
    # A reader of the checkout, as `check` is: the records every wheel is held to are one read of it, under the lock.
    with repo_lock(layout, "publish", shared=True):
        checkout = Checkout.load(layout)
    if args.to:
        return publish_to_server(checkout, options, ServerTarget(args.to, args.simple_url))
    return publish_wheels(checkout, options)
