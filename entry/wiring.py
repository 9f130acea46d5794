"""Building the app with everything it is configured with from above: the store's URL, the signing secret's
file and the task UI."""
from __future__ import annotations

import os
from typing import Any

from flask import Flask

from empeval.server.web import create_app
from empeval.tasks.ui import LOCAL_BUNDLE_DIR


def app_config(database_url: str, *, secret_file: str | os.PathLike[str] | None = None, **extra: Any) -> dict[str, Any]:
    """create_app's configuration: the database, the file of the signing secret (None: $EMPEVAL_SECRET_FILE, else
    the database's default, see server.annotation.secrets) and the folder of the task UI's local bundle."""
    config: dict[str, Any] = {"DATABASE_URL": database_url, "TASK_UI_DIR": str(LOCAL_BUNDLE_DIR), **extra}
    if secret_file is not None:
        config["SECRET_FILE"] = str(secret_file)
    return config


def make_app(database_url: str, *, secret_file: str | os.PathLike[str] | None = None, **extra: Any) -> Flask:
    """The app on `database_url`, serving the task UI built in tasks/webapp."""
    return create_app(app_config(database_url, secret_file=secret_file, **extra))
