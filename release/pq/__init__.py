"""The patch editing loop (`python -m release pq`): the queue as git commits, and back.

`pq import` gives a git work tree laid out with upstream paths: the pinned tag's pristine
subtree (recovered from vendor/ by undoing the series, no network) as one commit, then one
commit per patch of patches/series, in order, with the mail's author, date and message. The
maintainer edits, adds, reorders and drops commits with plain git; `pq new SLUG` writes the
message template of a new patch; `pq export` turns the commits back into patches/ (Electron's
format-patch flags, a stable name per patch, patches/series) and rebuilds vendor/ as pristine +
the new series, in one journaled swap under the repository lock.

A patch keeps its file name through the loop by a `Patch-Name:` line that import adds to its
commit message and export strips again (gbp's `Gbp-Pq: Name`, Electron's `Patch-Filename:`),
so an unchanged queue exports byte for byte.

Where it sits among the layers, and what it may import: docs/architecture.md, "Layers".
"""
