"""The commit message a new patch starts from (upstream_pr/pull_request.py is an upstream PR's PR.md).

`git commit -t` with it, then answer every `<...>`.

The four questions are vllm-ascend's (Why / How / Related PR / Future plan); the trailers are
DEP-3's plus ours (docs/patch-queue.md, "A patch file"). `Patch.validate_message` refuses a
patch that leaves one out or keeps a `<...>` placeholder, so a message cannot be exported
half-written. Lines starting with '#' are comments that `git commit` drops.
"""

from __future__ import annotations

from datetime import date

from release.pq.names import NAME_TRAILER


def template(name: str, today: date) -> str:
    return f"""<area: what the patch does, in one line (the subject)>

Why: <what goes wrong without this patch, for whom, and how it shows>

How: <what the change does, and why this way>

Related PR: <the upstream pull request (URL), or why there is none yet>

Future plan: <when this patch can go: e.g. retired by `rebase` once upstream releases it>

Origin: <upstream, URL | backport, URL | vendor>
Bug: <id or URL> <title of the user-visible bug it fixes>
Downstream: <why there is no bug behind it: a change we keep downstream>
Depends-On: <what the change relies on (a library's behaviour, another patch), or none>
Risk: <what could break, and what guards it>
Forwarded: <URL of the upstream submission | no | not-needed>
Last-Update: {today.isoformat()}
{NAME_TRAILER}: {name}
# Keep exactly one of Bug: (a user-visible bug: its id or URL, then its title) and
# Downstream: (a change with no bug behind it), and delete the other line.
# {NAME_TRAILER}: is the file name `python -m release pq export` gives the patch; the
# export strips the line. Lines starting with '#' are left out of the message.
# An upstream commit taken with `git am --keep` keeps upstream's own message instead
# (DEP-3's Description:): add `Origin: upstream, URL` (or backport, URL), `Applied-Upstream:
# <first vLLM tag that has it>[, URL]` and Bug: or Downstream:, and no other answer is asked.
"""
