"""Who a request works for (its tenant, the unit of fairness: docs/behaviour.md, "Fair
sharing") and how urgent it is (its priority)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from enum import IntEnum

from adapters.callers import Waiting

OWN_NAMESPACE_KIND = "workspace:"


class Priority(IntEnum):
    """Lower is served first: an agent is waiting on a search; a write can wait a batch."""

    SEARCH = 0
    WRITE = 1


@dataclass(frozen=True, slots=True)
class Work:
    """`waiting`: where the request's work waits (adapters/callers.py), told when it
    joins the model's queue and when its text is embedded; None: nobody asks."""

    tenant: str
    priority: Priority
    waiting: Waiting | None = field(default=None, compare=False)


# Work nobody in particular asked for (tests, tools): one tenant, a write's priority.
UNATTRIBUTED = Work("", Priority.WRITE)


def search_tenant(namespaces: Sequence[str]) -> str:
    """The tenant of a search: the caller's own `workspace:` namespace, else the first."""
    for name in namespaces:
        if name.startswith(OWN_NAMESPACE_KIND):
            return name
    return namespaces[0] if namespaces else ""


def tenant_kind(tenant: str) -> str:
    """A bounded label for metrics, never the name itself: the namespace's kind, or `other`."""
    kind, _, _ = tenant.partition(":")
    return kind if kind in ("workspace", "team", "org") else "other"
