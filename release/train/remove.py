"""`train remove TAG...`: drop tags from patches/train.toml, all or nothing, never the head."""

from __future__ import annotations

from dataclasses import dataclass

from release.core import log
from release.core.errors import EXIT_OK, BadInputError, UnknownTrainTagError
from release.core.layout import Layout
from release.core.lock import repo_lock
from release.core.versions import canonical_tag
from release.queue.snapshot import Checkout
from release.train.add import save


@dataclass(frozen=True)
class RemoveOptions:
    """What `train remove` was asked: the tags to drop."""

    tags: tuple[str, ...]


def remove_tags(layout: Layout, options: RemoveOptions) -> int:
    """Drop every tag in one write of train.toml, or none (each is checked first), under the repository's lock."""
    with repo_lock(layout, "train remove"):
        return _remove(layout, list(dict.fromkeys(canonical_tag(tag) for tag in options.tags)))


def _remove(layout: Layout, tags: list[str]) -> int:
    checkout = Checkout.load(layout)  # under the lock: the train and the head this removal is checked against
    train = checkout.require_train()
    unknown = [tag for tag in tags if train.get(tag) is None]
    if unknown:
        raise UnknownTrainTagError(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not in the train "
            f"({', '.join(train.tags) or 'empty'}); nothing was removed"
        )
    head = checkout.queue.pin.tag
    if head in tags:
        raise BadInputError(
            f"{head} is the head of the train: vendor/ holds it; nothing was removed",
            hint="rebase vendor/ onto another train tag first (`python -m release rebase TAG`), then remove it",
        )
    for tag in tags:
        train = train.without(tag)
    save(layout, train)
    log.out(f"removed {', '.join(tags)}; the train is {', '.join(train.tags)}")
    return EXIT_OK
