"""Every study kind's annotation part, registered by importing it: one line per kind."""
# ruff: noqa: I001 (registration order, not the alphabet: the default kind first, then the kinds as they came)
import empeval.server.annotation.kinds.likert  # noqa: F401
import empeval.server.annotation.kinds.pairwise  # noqa: F401
import empeval.server.annotation.kinds.best_worst  # noqa: F401
import empeval.server.annotation.kinds.chat  # noqa: F401
import empeval.server.annotation.kinds.acute  # noqa: F401
