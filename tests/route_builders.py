"""Flask apps made again and again in one test process reuse their URL builders.

werkzeug compiles two URL-builder functions for each rule whenever a rule is added to an app's map
(`Rule.compile` -> `Rule._compile_builder`: an AST built, walked and compiled to bytecode). The app has 30 rules,
so that is 13 ms of the 19 ms `create_app` costs, and the suite makes a few thousand apps from the same rules.
`install()` keeps, for this process, each builder function werkzeug made, keyed by everything its code is made
from (the rule's text, its parsed parts and whether unknown arguments are appended), and hands the same function
to the next rule with that key. The builder reads the rule's converters through the rule it is bound to, so one
function serves every app. Rules with defaults are compiled as werkzeug does (their code folds the defaults in).
tests/web/test_route_builders.py checks that every route of the app builds the same URLs either way.

Only the test processes do this; `empeval serve` and the CLI run werkzeug as it is.
"""
from __future__ import annotations

from werkzeug.routing import Rule

_compile_builder = Rule._compile_builder
_BUILDERS: dict[tuple, object] = {}


def _cached_compile_builder(self: Rule, append_unknown: bool = True):
    if self.defaults:
        return _compile_builder(self, append_unknown)
    key = (self.rule, tuple(self._trace), append_unknown)
    builder = _BUILDERS.get(key)
    if builder is None:
        builder = _BUILDERS[key] = _compile_builder(self, append_unknown)
    return builder


def install() -> None:
    """Make werkzeug reuse the URL builders it compiled in this process (idempotent)."""
    Rule._compile_builder = _cached_compile_builder


def uninstall() -> None:
    """werkzeug's own compile again (for the test that compares the two)."""
    Rule._compile_builder = _compile_builder
