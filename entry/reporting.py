"""Reports of a study in the store, or of an export file: the glue between the store's export and analysis.

A Likert study's report is analysis.report's; a pairwise (A/B) study's is written here from
analysis.pairwise (tables) and analysis.pairwise_report (document blocks), in the same layout: report.md,
report.html (self-contained), tables/*.csv under the output folder. Studies linked by `compare_with` show each
other: the A/B report puts the Likert study's means beside its A/B table, and the Likert report ends with a
section naming the A/B studies linked to it.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from sqlalchemy import Engine, select

from empeval.server.annotation.export import export_rows
from empeval.server.annotation.pairwise_export import pairwise_export_rows
from empeval.server.errors import BadInput
from empeval.server.store.engine import unit_of_work
from empeval.server.store.models import Study
from empeval.server.store.queries import study_by_name

if TYPE_CHECKING:
    from empeval.analysis.document import Block

# The pairwise report's CSV tables: file stem -> PairwiseTables attribute.
PAIRWISE_TABLES = {"ab_table": "ab", "choice_agreement": "agreement", "position_bias": "position",
                   "control_pairs": "controls", "ranking": "ranking", "likert_beside_ab": "likert"}


def study_meta(engine: Engine, name: str) -> dict:
    """What the report needs from the study's configuration: the criteria in the study file's order, and for
    the methods paragraph the design, how raters were recruited (the [recruitment] section's platform: local
    volunteers unless it says prolific or mturk) and what they were paid."""
    with unit_of_work(engine) as session:
        config = study_by_name(session, name).config
    pay = config.pay
    recruitment = getattr(config, "recruitment", None)
    return {"name": name, "k": config.design.ratings_per_response, "criteria": list(config.criterion_keys),
            "items_per_assignment": config.design.items_per_assignment,
            "platform": getattr(recruitment, "platform", "local"),
            "pay_per_assignment": pay.per_assignment, "currency": pay.currency,
            "platform_fee": pay.platform_fee if pay.per_assignment is not None else None}


def export_criteria_order() -> list[str]:
    """The criteria order of a report read from an export file, which does not carry its study's order: the
    default study file's (Rashkin et al. 2019: empathy, relevance, fluency); other criteria follow sorted."""
    from empeval.server.store.study_config import DEFAULT_CRITERIA

    return [criterion.key for criterion in DEFAULT_CRITERIA]


def write_study_report(engine: Engine, name: str, out_dir: Path, *, include_late: bool = True,
                       exclude_flagged: bool = True, seed: int = 0, latex: bool = False, judge: str | None = None,
                       judge_version: str | None = None, allow_missing: bool = False) -> dict[str, Path]:
    """Export the study's ratings (a pairwise study's choices) and write its report into out_dir; returns the
    written paths. Late ratings are left out of the analysis when include_late is False, and the report says
    how many. A pairwise study goes to write_pairwise_study_report; a Likert study that pairwise studies name in
    `compare_with` gets a closing section about them. With latex, booktabs tables go to out_dir/latex/.

    With `judge` (a judge that scored the study with `empeval judge`; `judge_version`, default its latest), the
    Likert report gains the model-assisted section (analysis.judged_report): cross-prediction-powered for a
    learned judge, PPI++ otherwise. BadInput, before anything is written, when the judge failed on an item and
    not `allow_missing` (which drops those items and counts them in the report)."""
    from empeval.analysis.report import write_report

    with unit_of_work(engine) as session:
        pairwise = study_by_name(session, name).config.is_pairwise
    if pairwise:
        if judge is not None:
            raise BadInput(f"study {name!r} is a pairwise (A/B) study: --judge adds model-assisted estimates of "
                           "Likert means, so it goes with a Likert study's report")
        return write_pairwise_study_report(engine, name, out_dir, include_late=include_late,
                                           exclude_flagged=exclude_flagged, seed=seed, latex=latex)
    request = _judge_request(engine, name, judge, judge_version, allow_missing) if judge is not None else None
    rows = export_rows(engine, name)
    if not rows:
        raise BadInput(f"study {name!r} has no ratings yet: nothing to report. Invite annotators "
                       f"(empeval annotators invite NAME --study {name}) and run the report once they have "
                       "submitted work")
    refusals: tuple[type[Exception], ...] = ()
    if request is not None:  # imported only then: the model-assisted analysis loads ppi_py and numba
        from empeval.analysis.judged_report import JudgeCoverageError

        refusals = (JudgeCoverageError,)
    try:
        paths = write_report(pd.DataFrame(rows), out_dir, study_meta=study_meta(engine, name),
                             include_late=include_late, exclude_flagged=exclude_flagged, seed=seed, latex=latex,
                             judge=request)
    except refusals as error:
        raise BadInput(str(error)) from None
    linked = _linked_pairwise_studies(engine, name)
    if linked:
        _append_section(paths, _linked_pairwise_blocks(engine, name, linked))
    return paths


def _judge_request(engine: Engine, study: str, judge: str, version: str | None, allow_missing: bool):
    """The stored scores of `judge` for the study (server.backend.judges.scores), with their folds when it is a
    learned judge, and the design's record of which contexts people rate (human_sample), as the report's
    JudgeRequest."""
    from empeval.analysis.judged_report import JudgeRequest
    from empeval.server.backend.judges.scores import human_sample, judge_scores
    from empeval.server.store.models import JudgeScore

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
        version = _latest_version(engine, study, judge)
    return JudgeRequest(name=judge, scores=scores, version=version, cross_fitted=cross_fitted,
                        allow_missing=allow_missing, design_sample=human_sample(engine, study))


def _latest_version(engine: Engine, study: str, judge: str) -> str | None:
    """The judge version judge_scores reads by default: the one that scored the study's items most recently."""
    from sqlalchemy import func

    from empeval.server.store.models import JudgeScore, StudyItem

    with unit_of_work(engine) as session:
        study_id = study_by_name(session, study).id
        in_study = select(StudyItem.response_id).where(StudyItem.study_id == study_id).scalar_subquery()
        row = session.execute(select(JudgeScore.judge_version, func.max(JudgeScore.created_at).label("latest"))
                              .where(JudgeScore.judge == judge, JudgeScore.response_id.in_(in_study))
                              .group_by(JudgeScore.judge_version)
                              .order_by(func.max(JudgeScore.created_at).desc(), JudgeScore.judge_version.desc())
                              ).first()
    return row[0] if row is not None else None


def write_export_report(path: Path, name: str, out_dir: Path, *, include_late: bool = True,
                        exclude_flagged: bool = True, seed: int = 0, likert_export: Path | None = None,
                        latex: bool = False) -> dict[str, Path]:
    """The report of an export file (CSV or JSONL; no store needed): a collaborator's export, or a test
    fixture. A judgment table (a pairwise study's export, told by its `preferred` column) gets the pairwise
    report, with `likert_export` (a linked Likert study's export) beside its A/B table; the anchor, which the
    file does not hold, is the system every pair has, when there is one. An export's criteria are shown in the
    default study order (export_criteria_order); its optional `comment` column is listed in the report."""
    from empeval.analysis.comments import with_export_comments
    from empeval.analysis.load import read_export
    from empeval.analysis.report import write_report

    if is_judgment_export(path):
        from empeval.analysis.pairwise_schema import JudgmentError, read_judgments

        try:
            judgments = read_judgments(path)
        except JudgmentError as err:
            raise BadInput(str(err)) from err
        likert = read_export(likert_export) if likert_export is not None else None
        return write_pairwise_report(judgments, out_dir, name=name, focus=common_system(judgments), likert=likert,
                                     likert_name=likert_export.name if likert_export is not None else None,
                                     include_late=include_late, exclude_flagged=exclude_flagged, seed=seed,
                                     latex=latex)
    if likert_export is not None:
        raise BadInput(f"{path} is a Likert export: a linked Likert export goes beside a pairwise (A/B) one only")
    ratings = with_export_comments(read_export(path), _raw_export(path))
    return write_report(ratings, out_dir, study_meta={"name": name, "criteria": export_criteria_order()},
                        include_late=include_late, exclude_flagged=exclude_flagged, seed=seed, latex=latex)


def _raw_export(path: Path) -> pd.DataFrame:
    """An export file's rows as they are, every column kept (read_export keeps the contract's columns only)."""
    if Path(path).suffix.lower() == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    return pd.read_json(path, lines=True, dtype=False)


def is_judgment_export(path: Path) -> bool:
    """Whether an export file holds a pairwise study's judgments rather than Likert ratings: its first record
    (the CSV header, or the first JSON line) has the judgment table's `preferred` column."""
    import json

    with Path(path).open(encoding="utf-8") as lines:
        first = next((line for line in lines if line.strip()), "")
    if Path(path).suffix.lower() == ".csv":
        return "preferred" in [column.strip().strip('"') for column in first.split(",")]
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return False  # the reader of either kind names the bad line
    return isinstance(record, dict) and "preferred" in record


def common_system(judgments: pd.DataFrame) -> str | None:
    """The system in every real pair of a judgment table when there is exactly one and more than one pair (a
    study with an anchor: "ours vs each baseline"), else None."""
    real = judgments.loc[~judgments["is_control"].astype(bool)]
    pairs = {tuple(pair.split("|", 1)) for pair in real["pair"].unique()}
    if len(pairs) < 2:
        return None
    shared = set.intersection(*(set(pair) for pair in pairs))
    return shared.pop() if len(shared) == 1 else None


def write_pairwise_study_report(engine: Engine, name: str, out_dir: Path, *, include_late: bool = True,
                                exclude_flagged: bool = True, seed: int = 0, latex: bool = False) -> dict[str, Path]:
    """The report of a pairwise (A/B) study in the store: its judgment table, with its anchor as "ours", and
    the Likert study it names in `compare_with` (its ratings, without the raters its quality checks flag unless
    exclude_flagged is False, as in its own report) beside the A/B table."""
    with unit_of_work(engine) as session:
        config = study_by_name(session, name).config
        linked = config.compare_with
        linked_is_likert = bool(linked) and not study_by_name(session, linked).config.is_pairwise
    rows = pairwise_export_rows(engine, name)
    if not rows:
        raise BadInput(f"study {name!r} has no choices yet")
    likert = None
    note = ""
    if linked and linked_is_likert:
        likert_rows = export_rows(engine, linked)
        if likert_rows:
            likert = pd.DataFrame(likert_rows)
        else:
            note = f"The linked Likert study {linked!r} has no ratings yet."
    elif linked:
        note = f"The linked study {linked!r} is pairwise too: only a Likert study's means go beside the A/B table."
    anchor = config.pairwise.anchor if config.pairwise is not None else ""
    meta = {"k": config.pairwise.judgments_per_pair if config.pairwise is not None else None,
            "ties": config.pairwise.ties if config.pairwise is not None else None,
            "items_per_assignment": config.design.items_per_assignment}
    return write_pairwise_report(pd.DataFrame(rows), out_dir, name=name, focus=anchor or None, likert=likert,
                                 likert_name=linked if likert is not None else None, note=note, meta=meta,
                                 include_late=include_late, exclude_flagged=exclude_flagged, seed=seed, latex=latex)


def write_pairwise_report(judgments: pd.DataFrame, out_dir: Path, *, name: str, focus: str | None = None,
                          likert: pd.DataFrame | None = None, likert_name: str | None = None, note: str = "",
                          meta: dict[str, Any] | None = None, include_late: bool = True,
                          exclude_flagged: bool = True, seed: int = 0, n_boot: int = 1000,
                          latex: bool = False) -> dict[str, Path]:
    """Analyse a judgment table (analysis.pairwise_tables, `focus` as "ours") and write report.md, report.html
    and tables/*.csv (PAIRWISE_TABLES) under out_dir; `likert` (a linked Likert study's export or tidy table)
    goes beside the A/B table, its flagged raters left out when exclude_flagged. With latex, the A/B table also
    goes to latex/ab_table.tex (booktabs) when there are real pairs. Returns the paths: "markdown", "html", one
    "table_<name>" per CSV written and "latex_ab_table" when written."""
    from empeval.analysis.document import Document, Heading, Paragraph, to_html, to_markdown
    from empeval.analysis.pairwise import pairwise_tables
    from empeval.analysis.pairwise_report import pairwise_blocks
    from empeval.analysis.pairwise_schema import validate_judgments

    table = validate_judgments(judgments)
    late = int(table.loc[table["late"], ["assignment_id"]].drop_duplicates().shape[0])
    if not include_late and late and table["late"].all():
        raise BadInput(f"all {late} assignment(s) of {name!r} were submitted late: nothing to report without them "
                       "(leave out --without-late)")
    likert_tidy, excluded = _likert_ratings(likert, include_late=include_late, exclude_flagged=exclude_flagged)
    tables = pairwise_tables(table, focus=focus, include_late=include_late, n_boot=n_boot, seed=seed,
                             likert=likert_tidy)

    out_dir = Path(out_dir)
    (out_dir / "tables").mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    for stem, attribute in PAIRWISE_TABLES.items():
        frame = getattr(tables, attribute)
        if frame is not None:
            path = out_dir / "tables" / f"{stem}.csv"
            frame.to_csv(path, index=False)
            paths[f"table_{stem}"] = path

    document = Document(title=f"Human evaluation report: {name} (pairwise A/B)")
    document.add(Paragraph(_pairwise_summary(table, focus, include_late, late)))
    if likert_name is not None:
        flagged = (f" (without the {len(excluded)} rater(s) its quality checks flag, as in its own report: "
                   f"{', '.join(excluded)})" if excluded else "")
        document.add(Paragraph(f"Linked Likert study: **{likert_name}** (compare_with). Its means{flagged} stand "
                               "beside the A/B table below."))
    if note:
        document.add(Paragraph(note))
    document.add(*pairwise_blocks(tables, title="Results"))
    document.add(Heading("Methods"))
    document.add(Paragraph(_pairwise_methods(table, meta or {}, n_boot=n_boot)))
    markdown_path, html_path = out_dir / "report.md", out_dir / "report.html"
    markdown_path.write_text(to_markdown(document), encoding="utf-8")
    html_path.write_text(to_html(document), encoding="utf-8")
    if latex and not tables.ab.empty:
        from empeval.analysis.latex import booktabs
        from empeval.analysis.pairwise_report import ab_display

        (out_dir / "latex").mkdir(exist_ok=True)
        paths["latex_ab_table"] = out_dir / "latex" / "ab_table.tex"
        paths["latex_ab_table"].write_text(booktabs(ab_display(tables.ab), caption=tables.ab_caption,
                                                    label="tab:ab"), encoding="utf-8")
    return {"markdown": markdown_path, "html": html_path, **paths}


def pairwise_summary_lines(ab: pd.DataFrame) -> list[str]:
    """The A/B table in a few terminal lines: per criterion and pair, win / lose / tie % and the decision."""
    lines = []
    for row in ab.itertuples(index=False):
        p = "< 0.001" if row.p_adj < 0.001 else f"{row.p_adj:.3f}"
        decision = f"p adj. {p}" + (" *" if row.significant else "")
        lines.append(f"  {row.criterion:<10} {row.system_a} vs {row.system_b}: win {row.win_pct:.1f}%  "
                     f"lose {row.lose_pct:.1f}%  tie {row.tie_pct:.1f}%  ({decision})")
    return lines


def likert_summary_lines(means: pd.DataFrame, criteria: Sequence[str] = ()) -> list[str]:
    """The Likert report's system means (tables/system_means.csv) in a line per criterion, best first; the
    criteria in the order of `criteria` (the study's), any others after them as the table has them."""
    lines = []
    order = {criterion: rank for rank, criterion in enumerate(criteria)}
    ranks = means["criterion"].map(lambda c: order.get(c, len(order)))
    means = means.assign(_rank=ranks).sort_values("_rank", kind="stable")
    for criterion, group in means.groupby("criterion", sort=False):
        ranked = group.sort_values("mean", ascending=False)
        lines.append(f"  {criterion:<10} " + ", ".join(f"{row.system} {row.mean:.2f}"
                                                       for row in ranked.itertuples(index=False)))
    return lines


def _likert_ratings(likert: pd.DataFrame | None, *, include_late: bool,
                    exclude_flagged: bool) -> tuple[pd.DataFrame | None, list[str]]:
    """A linked Likert study's ratings as the tidy table, late ones and flagged raters left out as its own
    report leaves them out; and who was left out."""
    if likert is None:
        return None, []
    from empeval.analysis.exclusions import exclude_annotators
    from empeval.analysis.load import tidy_from_export
    from empeval.analysis.quality import flagged_annotators, rater_quality

    ratings = tidy_from_export(likert) if "item" not in likert.columns else likert
    if not include_late and "late" in ratings.columns:
        ratings = ratings.loc[~ratings["late"].astype(bool)].reset_index(drop=True)
    if not exclude_flagged or ratings.empty:
        return ratings, []
    flagged = flagged_annotators(rater_quality(ratings))
    return exclude_annotators(ratings, flagged), flagged


def _pairwise_summary(table: pd.DataFrame, focus: str | None, include_late: bool, late: int) -> str:
    real = table.loc[~table["is_control"]]
    shown = table.drop_duplicates(["assignment_id", "context_id", "pair"])
    text = (f"{len(table)} choices ({table['criterion'].nunique()} criteria) on {len(shown)} shown pairs "
            f"({int(shown['is_control'].sum())} of them control pairs) in {table['assignment_id'].nunique()} "
            "assignments by "
            f"{table['annotator'].nunique()} annotators, over {real['context_id'].nunique()} contexts and "
            f"{real['pair'].nunique()} pairs of systems.")
    if focus:
        text += f" Rows read **{focus}** against each other system (Win % is {focus}'s)."
    if late:
        text += (f" {late} assignment(s) were submitted after they had expired; "
                 + ("they are included." if include_late else "they are left out of every table."))
    return text


def _pairwise_methods(table: pd.DataFrame, meta: dict[str, Any], *, n_boot: int) -> str:
    k = meta.get("k")
    ties = meta.get("ties")
    design = []
    if k:
        design.append(f"each pair of responses to a context was judged by {k} different annotators")
    if meta.get("items_per_assignment"):
        design.append(f"assignments held up to {meta['items_per_assignment']} pairs, control pairs included")
    if ties is not None:
        design.append("a tie was " + ("allowed" if ties else "not allowed"))
    sentence = ("Annotators saw a conversation and two responses side by side (A on the left, B on the right; "
                "which system was on which side was counterbalanced and hidden) and chose the better one on each "
                "criterion")
    sentence += ("; " + "; ".join(design) + ".") if design else "."
    return (sentence + " The A/B table counts judgments; its test counts contexts (an exact two-sided sign test "
            "over the contexts one system won on balance, Holm-adjusted over the pairs of each criterion). The "
            f"ranking fits Bradley-Terry (Davidson's model with ties) with {n_boot} bootstrap resamples of "
            "contexts; agreement maps each choice to the system chosen; position bias tests the share of "
            "choices that went to the left; control pairs are scored against their known answer and kept out of "
            "every comparison.")


def _linked_pairwise_studies(engine: Engine, name: str) -> list[str]:
    """The pairwise studies whose `compare_with` names the study `name`, by name."""
    with unit_of_work(engine) as session:
        studies = session.scalars(select(Study).order_by(Study.name)).all()
        return [s.name for s in studies if s.config.is_pairwise and s.config.compare_with == name]


def _linked_pairwise_blocks(engine: Engine, name: str, linked: list[str]) -> list[Block]:
    from empeval.analysis.document import Heading, Paragraph

    blocks: list[Block] = [Heading("Linked pairwise (A/B) studies")]
    for other in linked:
        choices = len(pairwise_export_rows(engine, other))
        blocks.append(Paragraph(
            f"**{other}**, a pairwise (A/B) study, is linked to this one (its compare_with names {name}): "
            f"{choices} choices so far. Its report (empeval report {other}) puts this study's means beside its A/B "
            "table."))
    return blocks


def _append_section(paths: dict[str, Path], blocks: list[Block]) -> None:
    """Add blocks at the end of a written report's Markdown and HTML, rendered by analysis.document as the rest
    was (the same escaping)."""
    from empeval.analysis.document import Document, to_html, to_markdown

    section = Document(title="", blocks=blocks)
    markdown = to_markdown(section).split("\n", 2)[2]  # past the empty title line and its blank line
    with paths["markdown"].open("a", encoding="utf-8") as out:
        out.write("\n" + markdown)
    page = to_html(section)
    body = page.split("<body>\n", 1)[1].rsplit("\n</body>", 1)[0].split("\n", 1)[1]  # past the empty <h1>
    html_path = paths["html"]
    text = html_path.read_text(encoding="utf-8")
    head, tail = text.rsplit("\n</body>", 1)
    html_path.write_text(head + "\n" + body + "\n</body>" + tail, encoding="utf-8")
