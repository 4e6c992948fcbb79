"""Texts of one batch split into groups of about the same length, one model call each.

The model pads every text of a call to its longest, so a batch is cut where padding would add
more than `SLACK` of the texts' own length (characters standing in for tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Sequence
from typing import TypeVar

SLACK = 1.25  # padded length at most this many times the texts' own
# Characters every text costs besides its own (the special tokens, the call).
FIXED_CHARS = 20
Found = TypeVar("Found")  # what the model gives for one text: a vector, an `Embedding`


def length_groups(texts: Sequence[str], slack: float = SLACK) -> list[list[int]]:
    """Indices of `texts`, shortest first, cut into groups of about the same length."""
    groups: list[list[int]] = []
    group: list[int] = []
    total = 0
    for index in sorted(range(len(texts)), key=lambda i: len(texts[i])):
        size = len(texts[index]) + FIXED_CHARS
        if group and size * (len(group) + 1) > (total + size) * slack:
            groups.append(group)
            group, total = [], 0
        group.append(index)
        total += size
    if group:
        groups.append(group)
    return groups


def encode_by_length(
    encode: Callable[[list[int]], list[Found]], texts: Sequence[str]
) -> list[Found]:
    """`encode(group)` for each length group of `texts`' indices, one call each, the results
    in `texts`' order."""
    found: list[Found | None] = [None] * len(texts)
    for group in length_groups(texts):
        for index, result in zip(group, encode(group), strict=True):
            found[index] = result
    return [result for result in found if result is not None]
