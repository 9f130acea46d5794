"""Every study kind's store part, registered by importing it: one line per kind, the default kind first."""
# ruff: noqa: I001 (registration order, not the alphabet: the default kind first, then the kinds as they came)
import empeval.server.store.kinds.likert  # noqa: F401
import empeval.server.store.kinds.pairwise  # noqa: F401
import empeval.server.store.kinds.best_worst  # noqa: F401
import empeval.server.store.kinds.chat  # noqa: F401
import empeval.server.store.kinds.acute  # noqa: F401
