"""Typed errors: those the evaluator turns into Result statuses, the store's, and
PrecisionWarning."""


class ShadertuneError(Exception):
    """Base of shadertune's own errors."""


class ContextError(ShadertuneError, RuntimeError):
    """No GPU context could be created; the message says what is missing and how to fix it."""


class InvalidConfig(ShadertuneError, ValueError):
    """The config breaks a restriction or a device limit (status 'invalid')."""


class BuildError(ShadertuneError):
    """Compiling or linking the generated kernel failed (status 'compile_failed')."""

    def __init__(self, message: str, source: str | None = None):
        super().__init__(message)
        self.source = source


class RunError(ShadertuneError):
    """Launching or running a built kernel failed (status 'run_failed')."""


class TooSlow(ShadertuneError):
    """A run abandoned part-way: its first passes project a time far over the best
    so far (status 'slow'; the kernel was never verified, so it cannot count)."""

    def __init__(self, message: str, projected_ms: float):
        super().__init__(message)
        self.projected_ms = projected_ms


class StoreError(ShadertuneError):
    """The store cannot be used: wrong schema version, not a store, unreadable, unwritable,
    damaged, busy, or nowhere to put it (raised by shadertune.db; here so that where the
    store lives, a core matter the output writer needs, can raise it too)."""


class PrecisionWarning(UserWarning):
    """A call computed in a narrower type than numpy would use (float64 operands on a
    backend that computes in float32): the result has float32's precision."""
