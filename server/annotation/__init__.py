"""Annotation: handing out assignments, taking submissions, exporting ratings. Plain functions over the
store; the web layer only validates transport and calls these."""
