"""A script for a fresh interpreter that rates one assignment through the app, for the tests that then count what
that process loaded (tests/test_annotation_only_install.py, tests/annotation/test_rater_path_imports.py).

Arguments: the store's URL and a rater's invite token. It prints one JSON line: the submit's HTTP status, the
ratings stored, the ratings expected (items x criteria) and, in ``loaded``, the modules loaded whose top-level
package or full name is in WATCHED (prepended by ``rate_one_script``)."""
from __future__ import annotations

import textwrap

RATE_ONE = textwrap.dedent("""
    import json, sys
    from empeval.wiring import make_app
    url, token = sys.argv[1], sys.argv[2]
    client = make_app(url).test_client()
    headers = {"Authorization": f"Bearer {token}"}
    assignment = client.get("/api/annotate/next", headers=headers).get_json()["assignment"]
    keys = [c["key"] for c in assignment["criteria"]]
    body = {"submission_id": "rate-one-0001", "ratings": [
        {"item_id": item["item_id"], "scores": {k: 3 for k in keys}} for item in assignment["items"]]}
    answer = client.post(f"/api/assignments/{assignment['assignment_id']}/submit", json=body, headers=headers)
    loaded = sorted(m for m in sys.modules if m in WATCHED or m.split(".")[0] in WATCHED)
    print(json.dumps({"status": answer.status_code, "ratings": answer.get_json().get("ratings"),
                      "expected": len(assignment["items"]) * len(keys), "loaded": loaded}))
""")


def rate_one_script(watched) -> str:
    """RATE_ONE, watching the modules (or top-level packages) named in `watched`."""
    return f"WATCHED = {set(watched)!r}\n" + RATE_ONE
