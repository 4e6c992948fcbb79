"""Namespace name to collection name, injectively.

The name with `:` as `~` after `prefix` where that fits Qdrant's 255 characters, else a hash of
it; only characters safe in a URL path segment. See docs/backends.md, "Qdrant server".
"""

from __future__ import annotations

import hashlib

from adapters.base import DEFAULT_PREFIX

MAX_COLLECTION_NAME = 255
_FORBIDDEN = frozenset('<>:"/\\|?*')


def collection_name(namespace: str, prefix: str = DEFAULT_PREFIX) -> str:
    short = prefix + namespace.replace(":", "~")
    if len(short) <= MAX_COLLECTION_NAME:
        return short
    return prefix + "~" + hashlib.sha256(namespace.encode()).hexdigest()


def is_valid_collection_name(name: str) -> bool:
    """The Qdrant server's own rule for collection names."""
    return 0 < len(name) <= MAX_COLLECTION_NAME and not any(
        ch in _FORBIDDEN or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name
    )


def memories_store_name(prefix: str = DEFAULT_PREFIX) -> str:
    """The shared layout's one memories collection. No `~`, so never a namespace's name."""
    return prefix + "memories"


def records_store_name(prefix: str = DEFAULT_PREFIX) -> str:
    """The shared layout's namespace records collection (a server only)."""
    return prefix + "namespaces"


def is_namespace_collection(name: str, prefix: str = DEFAULT_PREFIX) -> bool:
    """A collection of the per-namespace (`collections`) layout: prefix, then a `~` somewhere."""
    return name.startswith(prefix) and "~" in name[len(prefix) :]
