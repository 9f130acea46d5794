"""Where the one task UI (tasks/webapp, built by npm) puts its two bundles: the local one served by the
app, and the Mephisto one served by the crowd runner."""
from __future__ import annotations

from pathlib import Path

WEBAPP_DIR = Path(__file__).resolve().parent / "webapp"
LOCAL_BUNDLE_DIR = WEBAPP_DIR / "dist" / "local"
MEPHISTO_BUNDLE = WEBAPP_DIR / "dist" / "mephisto" / "task.js"
