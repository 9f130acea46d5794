"""The researcher's side: study progress (dashboard and JSON), the tidy export, and signing in to /admin.

The dashboard is reached by signing in: the form at /admin, or `/admin#<admin token>` (the part after `#`
never reaches the server; the page's script posts it to /admin/session and cleans the address bar). Either
way the token is traded for the admin session cookie (see server.web.auth). The old `/admin?token=...` still
signs in, then redirects to /admin; scripts send `Authorization: Bearer <admin token>`.
"""
from __future__ import annotations

from collections import defaultdict
from statistics import median

import numpy as np
import pandas as pd
from flask import Blueprint, Response, current_app, jsonify, redirect, render_template, request
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.exceptions import BadRequest, Forbidden, TooManyRequests

from server.annotation.export import export_rows, rows_to_csv, rows_to_jsonl
from server.annotation.pairwise_export import judgments_to_csv, pairwise_export_rows
from server.store.models import Study
from server.store.queries import assignment_counts, study_by_name
from server.web import openapi
from server.web.auth import (
    admin_required,
    bearer_token,
    check_admin_token,
    clear_admin_cookie,
    has_admin_session,
    require_admin,
    set_admin_cookie,
)

blueprint = Blueprint("admin", __name__, template_folder="templates")

def _engine():
    return current_app.extensions["empeval.engine"]


def alpha_so_far(rows: list[dict], criterion: str, scale: tuple[int, int] = (1, 5)) -> float | None:
    """Krippendorff's alpha (ordinal) over the non-control items rated so far, computed by analysis/ (the
    same code the report uses); None while it is undefined (no pairable item, no variation)."""
    from analysis.agreement import reliability_counts
    from analysis.coefficients import krippendorff_alpha

    scores = pd.DataFrame([{"item": r["item_id"], "score": r["score"]} for r in rows
                           if r["criterion"] == criterion and not r["is_control"]], columns=["item", "score"])
    if scores.empty:
        return None
    counts, values = reliability_counts(scores, scale=scale)
    alpha = float(krippendorff_alpha(counts, values, level="ordinal"))
    return None if np.isnan(alpha) else alpha


def study_progress(name: str) -> dict:
    """Whether it is open or closed, items done, assignments by status, ratings per annotator, seconds per item,
    alpha so far."""
    engine = _engine()
    with Session(engine) as session:
        study = study_by_name(session, name)
        statuses = assignment_counts(session, study.id)
        config = study.config
        status = study.status
    if config.is_pairwise:
        return _pairwise_progress(engine, name, status, statuses, config.pairwise.judgments_per_pair
                                  if config.pairwise else None)
    rows = export_rows(engine, name)
    criteria = config.criterion_keys
    scale = (config.scale.min, config.scale.max)
    per_annotator: dict[str, int] = defaultdict(int)
    seconds = [r["seconds_on_item"] for r in rows if r["seconds_on_item"] is not None and r["criterion"] == criteria[0]]
    for row in rows:
        per_annotator[row["annotator"]] += 1
    items_rated = {r["item_id"] for r in rows}
    k = config.design.ratings_per_response
    return {
        "study": name,
        "status": status,
        "assignments": statuses,
        "items_rated": len(items_rated),
        "ratings": len(rows),
        "ratings_per_response": k,
        "ratings_per_annotator": dict(sorted(per_annotator.items())),
        "median_seconds_per_item": median(seconds) if seconds else None,
        "alpha_ordinal": {c: alpha_so_far(rows, c, scale) for c in criteria},
    }


def _pairwise_progress(engine, name: str, status: str, statuses: dict[str, int], k: int | None) -> dict:
    """A pairwise study's progress, counted in judgments (one per pair an annotator compared, every criterion
    answered) from its judgment table. The Likert keys the dashboard shows carry the pairwise counts (ratings:
    judgments, items_rated: (context, pair) judged, k per pair); an ordinal alpha of A/B choices is not
    defined, so none is given."""
    rows = pairwise_export_rows(engine, name)
    judgments = {(r["assignment_id"], r["context_id"], r["pair"]): r["annotator"] for r in rows}
    per_annotator: dict[str, int] = defaultdict(int)
    for annotator in judgments.values():
        per_annotator[annotator] += 1
    judged = {(context, pair) for _, context, pair in judgments}
    return {
        "study": name, "kind": "pairwise", "status": status, "assignments": statuses,
        "judgments": len(judgments), "choices": len(rows), "pairs_judged": len(judged),
        "judgments_per_pair": k, "judgments_per_annotator": dict(sorted(per_annotator.items())),
        "items_rated": len(judged), "ratings": len(judgments), "ratings_per_response": k,
        "ratings_per_annotator": dict(sorted(per_annotator.items())),
        "median_seconds_per_item": None, "alpha_ordinal": {},
    }


@blueprint.get("/admin")
def dashboard():
    if bearer_token() is None and not has_admin_session():
        legacy = request.args.get("token")
        if not legacy:
            return render_template("admin_login.html")
        return _sign_in(legacy, by_form=True)  # an old /admin?token= link: sign in, then drop it from the address
    require_admin()
    with Session(_engine()) as session:
        names = session.scalars(select(Study.name).order_by(Study.created_at)).all()
    studies = [study_progress(name) for name in names]
    return render_template("admin.html", studies=studies)


@blueprint.post("/admin/session")
def sign_in():
    """Trade the admin token for the admin session cookie: from the sign-in form (field `token`), or from the
    page's script as `Authorization: Bearer` (the `/admin#<token>` form)."""
    token = bearer_token()
    if token is not None:
        return _sign_in(token, by_form=False)
    return _sign_in(request.form.get("token", "").strip(), by_form=True)


def _sign_in(token: str, *, by_form: bool):
    try:
        if not token:
            raise Forbidden("enter the admin token (`empeval admin-token` prints it)")
        check_admin_token(token)
    except (Forbidden, TooManyRequests) as error:
        if not by_form:
            raise
        headers = [(k, v) for k, v in error.get_headers() if k.lower() != "content-type"]  # Retry-After of a 429
        return render_template("admin_login.html", error=error.description), error.code, headers
    response = redirect("/admin", code=303) if by_form else jsonify(status="signed in")
    set_admin_cookie(response)
    return response


@blueprint.post("/admin/logout")
def sign_out():
    response = redirect("/admin", code=303)
    clear_admin_cookie(response)
    return response


@blueprint.get("/api/studies/<name>/progress")
@admin_required
def progress(name: str):
    return study_progress(name)


@blueprint.get("/api/studies/<name>/export")
@admin_required
def export(name: str):
    fmt = request.args.get("format", "csv")
    if fmt not in ("csv", "jsonl"):
        raise BadRequest(f"format must be csv or jsonl, got {fmt!r}")
    with Session(_engine()) as session:
        pairwise = study_by_name(session, name).config.is_pairwise
    if pairwise:  # the judgment table (analysis.pairwise_schema), one row per choice and criterion
        judgments = pairwise_export_rows(_engine(), name)
        if fmt == "csv":
            return Response(judgments_to_csv(judgments), mimetype="text/csv",
                            headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})
        return Response(rows_to_jsonl(judgments), mimetype="application/x-ndjson")
    rows = export_rows(_engine(), name)
    if fmt == "csv":
        return Response(rows_to_csv(rows), mimetype="text/csv",
                        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'})
    return Response(rows_to_jsonl(rows), mimetype="application/x-ndjson")


_ERR = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
_ADMIN: list[dict[str, list[str]]] = [{"adminToken": []}, {"adminCookie": []}]
_LIMITED = {"429": {"description": "too many failed token checks from this address (see Retry-After)", **_ERR}}
_NAME = [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]
openapi.register_paths({
    "/api/studies/{name}/progress": {"get": {
        "summary": "Progress of a study: assignments by status, ratings per annotator, alpha so far",
        "security": _ADMIN, "parameters": _NAME,
        "responses": {"200": {"description": "progress",
                              "content": {"application/json": {"schema": {"type": "object"}}}},
                      "401": {"description": "no token", **_ERR}, "403": {"description": "wrong token", **_ERR},
                      "404": {"description": "no such study", **_ERR}, **_LIMITED}}},
    "/api/studies/{name}/export": {"get": {
        "summary": "All ratings of a study, one row per rating (tidy long CSV or JSONL); for a pairwise study "
                   "its judgment table, one row per choice and criterion",
        "security": _ADMIN,
        "parameters": _NAME + [{"name": "format", "in": "query",
                                "schema": {"type": "string", "enum": ["csv", "jsonl"]}}],
        "responses": {"200": {"description": "the export",
                              "content": {"text/csv": {"schema": {"type": "string"}},
                                          "application/x-ndjson": {"schema": {"type": "string"}}}},
                      "400": {"description": "bad format", **_ERR}, "401": {"description": "no token", **_ERR},
                      "403": {"description": "wrong token", **_ERR}, "404": {"description": "no such study", **_ERR},
                      **_LIMITED}}},
})
