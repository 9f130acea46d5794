"""The Flask app: an app factory and blueprints grouped by role (as in Flask's tutorial)."""
from empeval.server.web.app import create_app

__all__ = ["create_app"]
