"""Error families.

``UserError``: bad input or configuration; the message names the bad value and the fix.
``RunError``: something failed while running (LLM, retrieval, parsing); ``is_retryable`` says
whether trying again may help.
"""

from __future__ import annotations


class AgentRagError(Exception):
    """Base class of every error agentrag raises on purpose."""


class UserError(AgentRagError):
    """Bad input or configuration. The message says what is wrong and how to fix it."""


class RunError(AgentRagError):
    """A failure while running a stage."""

    is_retryable: bool = False

    def __init__(self, message: str, *, is_retryable: bool | None = None) -> None:
        super().__init__(message)
        if is_retryable is not None:
            self.is_retryable = is_retryable


class LLMError(RunError):
    """The LLM backend failed (after its retry budget, or with a non-retryable status)."""


class RetrievalError(RunError):
    """The retriever or retrieval server failed."""


class ParseError(RunError):
    """Model output could not be parsed into the expected structure."""


__all__ = ["AgentRagError", "UserError", "RunError", "LLMError", "RetrievalError", "ParseError"]
