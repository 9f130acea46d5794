"""Every study kind's tasks part, registered by importing it: one line per kind."""
# ruff: noqa: I001 (registration order, not the alphabet: the default kind first, then the kinds as they came)
import empeval.tasks.kinds.likert  # noqa: F401
import empeval.tasks.kinds.pairwise  # noqa: F401
import empeval.tasks.kinds.best_worst  # noqa: F401
import empeval.tasks.kinds.chat  # noqa: F401
import empeval.tasks.kinds.acute  # noqa: F401
