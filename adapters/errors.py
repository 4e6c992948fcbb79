"""The only exceptions an adapter lets out: each converts its SDK's into these, which the HTTP
layer maps to the contract's error codes without knowing the backend."""

from __future__ import annotations


class BackendError(Exception):
    """Something went wrong in the backend that is not the caller's fault."""


class BackendUnavailable(BackendError):
    """The backend cannot be reached or did not answer in time (HTTP 503)."""


class StorageFull(BackendUnavailable):
    """The data volume has no room for writes; reads still work (HTTP 503). The message says
    how much is free and how much writes need, never a path."""


class StorageDamaged(BackendUnavailable):
    """Stored data could not be read: damaged files or records (HTTP 503), for the namespaces
    (or store) concerned only. The message names no file; the cause, logged, does."""

    def __init__(self, message: str, namespaces: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.namespaces = namespaces

    def __reduce__(self) -> tuple[type[StorageDamaged], tuple[str, tuple[str, ...]]]:
        return (type(self), (str(self), self.namespaces))  # crosses to the server process


class BackendMisconfigured(BackendError):
    """The backend answers, but not as configured (wrong key, index, dimension, metric):
    `start()` ends start-up with one clear line; retrying cannot help."""


class BackendRejected(BackendError):
    """The backend refuses this input for a reason the caller can fix (HTTP 400), such as a
    memory larger than its per-record limit."""


class NamespaceGone(BackendError):
    """The namespace's storage vanished under a write (deleted concurrently): HTTP 404."""


class NamespaceConflict(BackendError):
    """Storage for a namespace is held by a different namespace name (a hash collision of
    the long-name mapping); never silently merged."""
