"""The one reader of every file the tool reads, and of every wheel member: bounded, or bad input.

A path on the command line, or a file found in a directory the command reads, may be anything:
`/dev/zero` (endless bytes), a FIFO (an open that waits for a writer forever), a directory, a link
to any of those. Every such input is opened here without blocking (O_NONBLOCK: a FIFO opens at
once), proven a regular file by fstat on the very descriptor that is then read (no window between
the check and the read), and refused above `limit` bytes, by its size and again while it is read
(a file that grows is cut off, never read whole). Refusals are the caller's error class: exit 2.
The checkout's own files (a series, train.toml, the scan data) are read the same way: one committed
as a FIFO or a link to /dev/zero is refused, and `present` (not `is_file`) says whether one is there.
A wheel member is read by `read_member`: its declared size first, then at most the bound while inflating.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import zipfile
from pathlib import Path

from release.core.errors import BadInputError

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# Our overlay wheels are a few hundred kB and vLLM's release wheels under 500 MB: a file above this is
# no wheel that `publish` or a `wheel:` source takes.
WHEEL_LIMIT = 1 << 30
# The tool's own text files (a patch, a series, train.toml, the scan data, a ls-remote listing) are
# kilobytes; one of 16 MiB is no such file, and is refused before it is read whole.
TEXT_LIMIT = 16 << 20
# A wheel member the tool reads (a vendored module, METADATA, RECORD, _build_info.json) is at most a few
# MB: vLLM's largest RECORD is under 1 MB. A member that declares more, or inflates past it, is refused.
MEMBER_LIMIT = 64 << 20


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def present(path: Path) -> bool:
    """Is anything at `path` (a file, a link, even a dangling one, a FIFO)? Then it is read, and the
    reader refuses what is no regular file: `is_file()` would take a FIFO or a link to /dev/zero
    committed in a file's place for an absent file, and go on without it."""
    return os.path.lexists(path)


def resolves_inside(path: Path, folder: Path) -> bool:
    """Does `path`, every link on the way resolved, stay inside `folder` (itself resolved)?

    O_NOFOLLOW guards only the last component: a linked directory above it (`tests -> /secret`)
    or a `..` would read elsewhere. A path a file names (`Upstream-Test:`) is checked with this."""
    return path.resolve().is_relative_to(folder.resolve())


def size_text(size: int) -> str:
    return f"{size / (1 << 20):.0f} MiB" if size >= 1 << 20 else f"{size} bytes"


def open_regular(
    path: Path,
    limit: int,
    *,
    follow_links: bool = True,
    error: type[BadInputError] = BadInputError,
    what: str = "",
    hint: str | None = None,
) -> io.BufferedReader:
    """`path` open for reading, proven a regular file of at most `limit` bytes (else `error`).

    `follow_links=False` also refuses a link in the last component (O_NOFOLLOW): a source that never
    reads through links. `what` starts the message ("DIST: "), so the refusal says whose input it is;
    `hint`, where given, replaces the error class's own.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else NOFOLLOW))
    except OSError as exc:
        if exc.errno == errno.ENOENT and not Path(path).is_symlink():
            raise error(f"{what}{path} is missing", hint) from None
        raise error(f"{what}cannot read {path} as a regular file ({exc.strerror})", hint) from None
    try:
        status = os.fstat(fd)
        mode, size = status.st_mode, status.st_size
        if not stat.S_ISREG(mode):
            raise error(f"{what}{path} is {_kind(mode)}, not a regular file; only regular files are read", hint)
        if size > limit:
            raise error(f"{what}{path} is {size_text(size)}, over the {size_text(limit)} such a file may have", hint)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(
    path: Path,
    limit: int,
    *,
    follow_links: bool = True,
    error: type[BadInputError] = BadInputError,
    what: str = "",
    hint: str | None = None,
) -> bytes:
    """The bytes of `path`, read through `open_regular`: never more than `limit`."""
    with open_regular(path, limit, follow_links=follow_links, error=error, what=what, hint=hint) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise error(f"{what}{path} grew past the {size_text(limit)} such a file may have while it was read", hint)
    return data


def read_text(
    path: Path,
    limit: int = TEXT_LIMIT,
    *,
    follow_links: bool = True,
    error: type[BadInputError] = BadInputError,
    what: str = "",
    hint: str | None = None,
) -> str:
    """The text of `path` (UTF-8, its bytes as they are: a CR stays a CR), read through `read_regular`."""
    data = read_regular(path, limit, follow_links=follow_links, error=error, what=what, hint=hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{what}{path} is not UTF-8 text", hint) from None


def read_member(
    archive: zipfile.ZipFile,
    member: str | zipfile.ZipInfo,
    *,
    limit: int = MEMBER_LIMIT,
    error: type[BadInputError] = BadInputError,
    what: str = "",
) -> bytes:
    """The bytes of one member of `archive`, at most `limit`: the size the zip declares is checked first,
    and the inflated bytes again while they are read (a zip may lie), so a small wheel whose member
    inflates to GiBs is `error`, never a MemoryError. Zip errors (bad CRC, corrupt data) are the caller's.
    """
    info = member if isinstance(member, zipfile.ZipInfo) else archive.getinfo(member)
    name = ascii(info.filename)
    if info.file_size > limit:
        raise error(
            f"{what}member {name} declares {size_text(info.file_size)}, over the {size_text(limit)} a member may have"
        )
    with archive.open(info) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise error(f"{what}member {name} inflates past the {size_text(limit)} a member may have")
    return data
