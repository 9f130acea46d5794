"""Reports of a study in the store, or of an export file: the entry point hands the store's inputs to the analysis.

The store's side (server.annotation.export.report_inputs: the study's export rows, what its report needs of its
configuration, the studies linked to it) and, with a judge, its scores (server.backend.judges.scores) become a
ReportRequest; the study kind's analysis part writes the report (analysis.report.study). An export file is read by
the kind that recognises its columns.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd
from sqlalchemy import Engine, select

from empeval.analysis.kinds import LinkedStudy, ReportRefused, ReportRequest
from empeval.analysis.report.study import EXPORT_CRITERIA_ORDER, export_kind, report_study
from empeval.server.annotation.export import report_inputs
from empeval.server.annotation.study_log import REPORT, record_release
from empeval.server.backend.registry import display_names
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work


def write_study_report(engine: Engine, name: str, out_dir: Path, *, include_late: bool = True,
                       exclude_flagged: bool = True, seed: int = 0, latex: bool = False, judge: str | None = None,
                       judge_version: str | None = None, allow_missing: bool = False,
                       systems_config: Path | None = None, system_order: str = "study",
                       generalize: str = "items", n_boot: int | None = None) -> dict[str, Path]:
    """Write the report of the study `name` into out_dir (see analysis.report.study); returns the written paths.
    Late answers are left out when include_late is False, and the report says how many. With latex, booktabs
    tables go to out_dir/latex/.

    With `judge` (a judge that scored the study with `empeval judge`; `judge_version`, default its latest), the
    report gains the model-assisted section (analysis.report.judged): cross-prediction-powered for a learned judge,
    PPI++ otherwise. BadInput, before anything is written, when the judge failed on an item and not `allow_missing`
    (which drops those items and counts them in the report), or when the study has no answers yet.

    Systems are named as `display_name` in `systems_config` (default: the built-in systems.toml) says, and listed in
    the study file's order, or by mean with system_order "mean" (analysis.report.systems).

    `generalize` ("items", "raters" or "both"; analysis.stats.generalize) says what the intervals and p-values of the
    system means and differences generalise to; the report's captions and methods say it. `n_boot`: bootstrap
    resamples (None: the kind's default, ReportRequest.n_boot)."""
    inputs = report_inputs(engine, name)
    meta = {**inputs.meta, "display_names": display_names(systems_config), "system_order": system_order,
            "generalize": generalize}
    judged = _judge_request(engine, name, judge, judge_version, allow_missing) if judge is not None else None
    if not inputs.rows:
        raise BadInput(f"study {name!r} has no {inputs.counted} yet: nothing to report. Invite annotators "
                       f"(empeval annotators invite NAME --study {name}) and run the report once they have "
                       "submitted work")
    request = ReportRequest(
        name=name, kind=inputs.kind, table=pd.DataFrame(inputs.rows), meta=meta,
        linked=[LinkedStudy(linked.name, linked.kind, linked.names_this,
                            pd.DataFrame(linked.rows) if linked.rows else None) for linked in inputs.linked],
        judge=judged, include_late=include_late, exclude_flagged=exclude_flagged, seed=seed, latex=latex, n_boot=n_boot,
        tables={table: pd.DataFrame(rows, columns=list(columns)) for table, (columns, rows) in inputs.tables.items()})
    written = _report(request, out_dir)
    # Logged once written, with whose answers it holds: a later withdrawal names this folder (study_log).
    record_release(engine, name, REPORT, where=str(Path(out_dir).resolve()))
    return written


def write_export_report(path: Path, name: str, out_dir: Path, *, include_late: bool = True,
                        exclude_flagged: bool = True, seed: int = 0, likert_export: Path | None = None,
                        latex: bool = False, generalize: str = "items", n_boot: int | None = None) -> dict[str, Path]:
    """The report of an export file (CSV or JSONL; no store needed): a collaborator's export, or a test fixture.
    The file's kind is recognised by its columns; `likert_export` (a linked Likert study's export) goes beside the
    report of a study of another kind. An export's criteria are shown in the default study order
    (EXPORT_CRITERIA_ORDER). `generalize` and `n_boot` as for write_study_report."""
    kind = export_kind(path)
    table = _read(kind, path)
    if table.empty:
        raise BadInput(f"{path} holds a header and no rows: nothing to report. Export the study again once raters "
                       "have submitted work")
    linked = []
    if likert_export is not None:
        likert = export_kind(likert_export)
        if likert is kind:
            raise BadInput(f"{path} is a {kind.label} export: a linked export goes beside a study of another kind")
        likert_table = _read(likert, likert_export)  # no rows: as a linked study in the store with none yet
        linked.append(LinkedStudy(likert_export.name, likert.name, False, None if likert_table.empty else likert_table))
    request = ReportRequest(name=name, kind=kind.name, table=table,
                            meta={"criteria": list(EXPORT_CRITERIA_ORDER), "generalize": generalize}, linked=linked,
                            include_late=include_late, exclude_flagged=exclude_flagged, seed=seed, latex=latex,
                            n_boot=n_boot)
    return _report(request, out_dir)


def _read(kind, path: Path) -> pd.DataFrame:
    try:
        return kind.read_export(path)
    except UnicodeDecodeError as error:
        raise BadInput(f"{path}: not a text file in UTF-8 (byte {error.start} of a line); an export is CSV or JSON "
                       "lines written by `empeval export`") from None
    except ValueError as error:
        raise BadInput(str(error)) from None


def _report(request: ReportRequest, out_dir: Path) -> dict[str, Path]:
    """Write the report; what the analysis refuses (a judge that failed on items, only late answers, a folder holding
    other files) is BadInput, and so is a folder that cannot be written (read-only, a file in the way, a full disk):
    the previous report stays as it was either way (analysis.report.folder)."""
    try:
        return report_study(request, out_dir)
    except ReportRefused as error:
        raise BadInput(str(error)) from None
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        raise BadInput(f"cannot write the report to {out_dir}: {error.strerror or error}{where}") from None


def _judge_request(engine: Engine, study: str, judge: str, version: str | None, allow_missing: bool):
    """The stored scores of `judge` for the study (server.backend.judges.scores), with their folds when it is a
    learned judge, and the design's record of which contexts people rate (human_sample), as the report's
    JudgeRequest. For a study whose people choose between two responses (A/B: ``judge_input``), `judge` is a judge
    of differences and its verdicts on the study's pairs are the request's `pair_scores`; a pair whose verdicts
    failed on contexts people judged gets no model-assisted numbers and a row note saying so (whatever
    `allow_missing`: dropping those contexts would leave the labelled sample the design drew)."""
    from empeval.analysis.kinds import JudgeRequest
    from empeval.server.annotation.decisions import JudgeInput, judge_input
    from empeval.server.backend.judges.pair_scores import judge_pair_scores, pair_judges
    from empeval.server.backend.judges.scores import human_sample, judge_scores, latest_version
    from empeval.server.store.models import JudgeScore
    from empeval.server.store.queries import study_by_name

    with unit_of_work(engine) as session:
        judged_by = judge_input(study_by_name(session, study).config)
    if judged_by == JudgeInput.PAIR_DIFFERENCES:  # people choose between two responses: a judge of differences
        verdicts = judge_pair_scores(engine, study, judge, version=version)
        return JudgeRequest(name=judge, scores=pd.DataFrame(), version=verdicts.attrs["version"],
                            allow_missing=allow_missing, design_sample=human_sample(engine, study),
                            pair_scores=verdicts, pair_judge=judge)
    with unit_of_work(engine) as session:
        kinds = set(session.scalars(select(JudgeScore.judge_kind).where(JudgeScore.judge == judge).distinct()))
        if not kinds:
            known = sorted(session.scalars(select(JudgeScore.judge).distinct()))
            raise BadInput(f"judge {judge!r} has scored nothing in this store; judges with scores: "
                           f"{', '.join(known) or 'none'} (score the study first: empeval judge {study} --judges "
                           f"{judge})")
    cross_fitted = kinds == {"learned-judge"}
    scores = judge_scores(engine, study, judge, version=version, folds=cross_fitted)
    if version is None:
        version = latest_version(engine, study, judge)
    # A judge of differences beside it (the one that compared the study's pairs most recently), if any: its
    # verdicts are the paired differences' predictor (analysis.stats.ppi.differences).
    found = pair_judges(engine, study)
    return JudgeRequest(name=judge, scores=scores, version=version, cross_fitted=cross_fitted,
                        allow_missing=allow_missing, design_sample=human_sample(engine, study),
                        pair_scores=judge_pair_scores(engine, study, found[0]) if found else None,
                        pair_judge=found[0] if found else None)


