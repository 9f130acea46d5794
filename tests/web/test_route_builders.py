"""The test processes' reuse of werkzeug's URL builders (tests/route_builders.py) builds every route of the app as
werkzeug's own compile does, and is really taken by a second app."""
from __future__ import annotations

from werkzeug.routing import IntegerConverter

from empeval.wiring import make_app
from tests import route_builders


def _built(app) -> dict[tuple[str, str], tuple]:
    """Each rule's URLs for sample values: its arguments only, and with an unknown argument appended."""
    built = {}
    for rule in app.url_map.iter_rules():
        values = {name: 7 if isinstance(rule._converters.get(name), IntegerConverter) else "a b/é"
                  for name in rule.arguments}
        built[rule.endpoint, rule.rule] = (rule.build(values, append_unknown=False),
                                           rule.build({**values, "next": "x y&z"}, append_unknown=True))
    return built


def test_every_route_builds_the_same_urls_with_reused_builders_as_with_werkzeugs_own(study_store):
    url = study_store.url.render_as_string(hide_password=False)
    route_builders.uninstall()
    try:
        own = _built(make_app(url, TESTING=True))
    finally:
        route_builders.install()
    first, second = make_app(url, TESTING=True), make_app(url, TESTING=True)
    assert len(own) >= 20 and _built(first) == own == _built(second)
    # the second app's builders are the first's functions, not compiled again
    shared = {rule.rule: rule._build.__func__ for rule in first.url_map.iter_rules() if not rule.defaults}
    again = {rule.rule: rule._build.__func__ for rule in second.url_map.iter_rules() if not rule.defaults}
    assert shared and all(again[path] is function for path, function in shared.items())
    assert any("/api/assignments/" in path and "<" in path for path in shared)  # routes with arguments among them
