"""Building the app with everything it is configured with from above: the store's URL and the task UI."""
from __future__ import annotations

from typing import Any

from flask import Flask

from server.web import create_app
from tasks.ui import LOCAL_BUNDLE_DIR


def app_config(database_url: str, **extra: Any) -> dict[str, Any]:
    """create_app's configuration: the database and the folder of the task UI's local bundle."""
    return {"DATABASE_URL": database_url, "TASK_UI_DIR": str(LOCAL_BUNDLE_DIR), **extra}


def make_app(database_url: str, **extra: Any) -> Flask:
    """The app on `database_url`, serving the task UI built in tasks/webapp."""
    return create_app(app_config(database_url, **extra))
