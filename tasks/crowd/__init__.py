"""Crowd runs with Mephisto 1.1.1 (in its own Python 3.10 virtualenv; see ../shared/notes)."""
