"""The researcher sees at a glance which studies are closed: the progress JSON says `status`, the dashboard marks
a closed study (an open one carries no such mark)."""
from __future__ import annotations

from empeval.server.annotation.handout import close_study
from empeval.server.annotation.secrets import admin_token, secret_key
from tests.annotation.conftest import make_study


def test_the_dashboard_and_progress_show_which_study_is_closed(study_store, app):
    make_study(study_store, name="second", count=4, k=1, per_assignment=2, systems=["sys-a", "sys-b"], controls=[])
    close_study(study_store, "pilot")
    admin = app.test_client()
    good = {"Authorization": f"Bearer {admin_token(secret_key(study_store))}"}
    assert admin.get("/api/studies/pilot/progress", headers=good).get_json()["status"] == "closed"
    assert admin.get("/api/studies/second/progress", headers=good).get_json()["status"] == "open"
    page = admin.get("/admin", headers=good).get_data(as_text=True)
    sections = {part.split("<", 1)[0].strip(): part for part in page.split("<h2>")[1:]}
    pilot, second = sections["pilot"], sections["second"]
    assert pilot.startswith("pilot") and '<span class="closed">closed</span>' in pilot
    assert second.startswith("second") and 'class="closed"' not in second
