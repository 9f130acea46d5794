"""Annotation: handing out assignments, taking submissions, exporting answers. Plain functions over the store; the
web layer only validates transport and calls these. What differs from one kind of study to another is the kind's
part (kinds/), registered when this package is imported."""
import empeval.server.annotation.kinds.registered  # noqa: F401 (every kind's annotation part, registered)
