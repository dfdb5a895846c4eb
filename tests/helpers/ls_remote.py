"""A recorded `git ls-remote --tags` of a vLLM-like remote: the tag tests of tests/unit and tests/cli read it."""

# Recorded in the real format: "<sha>\trefs/tags/<name>", annotated tags followed by their
# peeled "^{}" line. Includes what must not be chosen: rc and dev pre-releases, a wheel
# build tag of a release we have (0.20.0-1) and of the newest (0.22.0-1), non-version tags.
LS_REMOTE = """\
1111111111111111111111111111111111111111\trefs/tags/v0.19.1
2222222222222222222222222222222222222222\trefs/tags/v0.20.0
a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2a2\trefs/tags/v0.20.0^{}
2020202020202020202020202020202020202020\trefs/tags/0.20.0-1
3333333333333333333333333333333333333333\trefs/tags/v0.20.1rc1
4444444444444444444444444444444444444444\trefs/tags/v0.20.1
5555555555555555555555555555555555555555\trefs/tags/v0.20.1.post1
b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5\trefs/tags/v0.20.1.post1^{}
6666666666666666666666666666666666666666\trefs/tags/v0.21.0rc1
7777777777777777777777777777777777777777\trefs/tags/v0.21.0rc2
8888888888888888888888888888888888888888\trefs/tags/v0.21.0
c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8c8\trefs/tags/v0.21.0^{}
9999999999999999999999999999999999999999\trefs/tags/0.22.0-1
aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\trefs/tags/v0.23.0rc1
bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\trefs/tags/v0.23.0.dev0
cccccccccccccccccccccccccccccccccccccccc\trefs/tags/nightly
dddddddddddddddddddddddddddddddddddddddd\trefs/tags/v0.10.1.1
"""
