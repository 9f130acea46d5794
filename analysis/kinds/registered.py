"""Every study kind's analysis part, registered by importing it: one line per kind."""
# ruff: noqa: I001 (registration order, not the alphabet: the default kind first, then the kinds as they came)
import empeval.analysis.kinds.likert.part  # noqa: F401
import empeval.analysis.kinds.pairwise.part  # noqa: F401
import empeval.analysis.kinds.best_worst.part  # noqa: F401
import empeval.analysis.kinds.chat.part  # noqa: F401
import empeval.analysis.kinds.acute.part  # noqa: F401

from empeval.analysis.kinds import put_in_order  # noqa: E402

# The order above, whatever a process imported first (one kind's part may import another's).
put_in_order(("likert", "pairwise", "best_worst", "chat", "acute"))
