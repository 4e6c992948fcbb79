"""The ids a namespace created by this process has never held: a commit with one of them
skips the store's lookup (docs/behaviour.md "Commits").

Only where this process is the store's one writer (the embedded store's lock on its data
directory). Each id is remembered before its write is sent, in a Bloom filter: a false
"maybe held" costs the lookup it would have made anyway, never a wrong answer.
"""

from __future__ import annotations

import hashlib

# 2^23 bits (1 MiB) and 4 probes: about 1 false "maybe held" in 500 at 500,000 ids written.
BITS = 1 << 23
PROBES = 4


class NewIds:
    """The namespaces created anew by this process, and the ids sent to them since."""

    def __init__(self, enabled: bool, bits: int = BITS) -> None:
        self.enabled = enabled
        self._bits = bits
        self._filter = bytearray(bits // 8)
        self._fresh: set[str] = set()

    def started(self, namespace: str) -> None:
        """`namespace` was created anew (empty)."""
        if self.enabled:
            self._fresh.add(namespace)

    def forget(self, namespace: str) -> None:
        """`namespace` was deleted; created again, it is `started` again."""
        self._fresh.discard(namespace)

    def never_held(self, namespace: str, memory_id: str) -> bool:
        """True only if `namespace` cannot hold `memory_id`: the lookup would find nothing."""
        if namespace not in self._fresh:
            return False
        return not all(
            self._filter[bit >> 3] & (1 << (bit & 7)) for bit in self._probes(namespace, memory_id)
        )

    def sending(self, namespace: str, memory_id: str) -> None:
        """`memory_id` is about to be written to `namespace` (whatever the write's outcome)."""
        if namespace in self._fresh:
            for bit in self._probes(namespace, memory_id):
                self._filter[bit >> 3] |= 1 << (bit & 7)

    def _probes(self, namespace: str, memory_id: str) -> list[int]:
        digest = hashlib.blake2b(
            f"{namespace}\0{memory_id}".encode(), digest_size=4 * PROBES
        ).digest()
        return [
            int.from_bytes(digest[4 * n : 4 * n + 4], "little") % self._bits for n in range(PROBES)
        ]
