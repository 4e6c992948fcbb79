"""The only exceptions an adapter lets out.

Handlers never see a backend SDK's exception types: every adapter converts
what its SDK raises into one of these, so the HTTP layer can map them to the
contract's error codes without knowing which backend is configured.
"""

from __future__ import annotations


class BackendError(Exception):
    """Something went wrong in the backend that is not the caller's fault."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached or did not answer in time (HTTP 503)."""


class BackendMisconfigured(BackendError):
    """The backend answers, but not as configured (wrong key, index, dimension, metric).

    Raised by `start()` to end start-up with one clear line; retrying cannot help.
    """


class BackendRejected(BackendError):
    """The backend refuses this input for a reason the caller can fix (HTTP 400).

    Example: a memory larger than the backend's per-record limit.
    """


class NamespaceGone(BackendError):
    """The namespace's storage vanished under a write (deleted concurrently): HTTP 404."""


class NamespaceConflict(BackendError):
    """Storage for a namespace is held by a different namespace name.

    Only possible on a hash collision of the long-name mapping; never silently merged.
    """
