"""The exceptions a model provider raises: one hierarchy, each says whether a retry may help."""

from __future__ import annotations


class ProviderError(Exception):
    """A model provider failed; ``retryable`` says whether trying again may succeed."""

    retryable: bool

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class ProviderTimeout(ProviderError):
    """The provider did not answer within its ``timeout_s``; always retryable."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message, retryable=retryable)


class WorkDropped(ProviderError):
    """Work that was not worth waiting for any more was dropped before it ran: speculative
    work (``serve.priority_pool.Urgency.AHEAD``) that waited for a worker longer than its
    priority's ``budget_s``. Never retried: the caller goes on without the result, as it
    would without a speculative pass (``waited_s``: how long it had waited)."""

    def __init__(self, message: str, *, waited_s: float = 0.0) -> None:
        super().__init__(message, retryable=False)
        self.waited_s = waited_s


class ProviderUnavailable(ProviderError):
    """The provider cannot serve: not loaded, or its library or weights are missing."""


def missing_gpu_library(library: str) -> ProviderUnavailable:
    """The error of a GPU backend whose library is not installed."""
    return ProviderUnavailable(f"{library} is not installed: install the 'gpu' extra on a GPU node")
