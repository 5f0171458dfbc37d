"""Serving and attaching: `enginetui serve` (the OpenAI-compatible server), `enginetui attach` (the
dashboard on a running server, through RemoteEngine) and `enginetui serve` as a child process."""
