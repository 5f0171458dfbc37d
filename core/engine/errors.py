"""Errors of the EngineCore process boundary."""


class EngineStartupError(RuntimeError):
    """EngineCore could not be started; the message is the child's own error (or why it never answered)."""


class EngineDeadError(RuntimeError):
    """The EngineCore process died or failed while the client was using it."""
