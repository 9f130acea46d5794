"""A reduced `make demo`, end to end: sample import, backend responses, a Likert study and its linked A/B and
best-worst studies, the chat study and the ACUTE study over its conversations, their simulated crowds through the
real HTTP API, and the reports."""
from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from empeval.demo import run_demo
from empeval.server.store import make_engine
from empeval.server.store.kinds.acute import AcuteChoice
from empeval.server.store.kinds.best_worst import BestWorstChoice, TupleItem
from empeval.server.store.kinds.chat import ChatRating, ChatTurn
from empeval.server.store.kinds.likert import Rating, StudyItem
from empeval.server.store.kinds.pairwise import Choice, PairItem
from empeval.server.store.models import Annotator, Assignment, Response, Study, System


@pytest.mark.slow
def test_reduced_demo_runs_end_to_end_and_its_report_ranks_gold_first(tmp_path, embedding_cache_dir):
    # 200 bootstrap resamples: the test reads the reports' rankings and tables, not the steadiness of their
    # interval ends (2,000 and 1,000 were a quarter of its CPU)
    result = run_demo(tmp_path / "demo", contexts=12, raters=36, bad_raters=3, cache_dir=embedding_cache_dir,
                      n_boot=200, echo=lambda *_: None)
    engine = make_engine(f"sqlite:///{result.database}")
    with Session(engine) as s:
        stored = s.scalar(select(func.count(Rating.id)))
        open_try_it = s.scalar(select(func.count(Assignment.id)).where(Assignment.status == "open"))
        rated = s.scalar(select(func.count(func.distinct(Rating.annotator_id))))
        answered = dict(s.execute(select(System.name, func.count(Response.id)).join(Response)
                                  .group_by(System.name)).all())
    # the systems answer a seeded draw of the split that the studies draw from (twice the count, 20 more at
    # least), not the whole sample's 668 test contexts: retrieval encodes every context it answers
    assert set(answered.values()) == {max(2 * 12, 12 + 20)} and {"gold", "retrieval", "kemp"} <= set(answered)
    assert result.main.answers == stored > 0 and result.main.counted == "ratings"
    # the raters the demo says worked are those whose ratings the report counts, not every one offered work
    assert result.main.worked == rated and 0 < rated <= result.main.raters == 36
    assert open_try_it > 0  # the try-it-yourself study is left for the person running the demo
    means = pd.read_csv(result.main.report["table_system_means"])
    for criterion in ("empathy", "relevance"):
        by_system = means[means["criterion"] == criterion].set_index("system")["mean"]
        # by the names systems.toml gives them (display_name), as a paper would
        assert set(by_system.index) == {"Gold", "Retrieval", "MoEL", "MIME", "KEMP"}
        # Gold leads relevance clearly; on empathy KEMP is close behind, and which simulated rater gets which
        # assignment follows the HTTP requests' timing, so with 12 contexts KEMP came first in one run of several.
        assert by_system.idxmax() == "Gold" if criterion == "relevance" else "Gold" in by_system.nlargest(2).index
    markdown = result.main.report["markdown"].read_text()
    controls = markdown.split("control last there")[1].split("\n\n")[0]
    assert controls.count("| yes |") == 3 and "| NO |" not in controls
    assert result.main.report["html"].stat().st_size > 50_000
    assert "**demo-ab**, a pairwise (A/B) study" in markdown  # the Likert report names its linked A/B study

    # The A/B study: every assignment judged, on the Likert study's contexts, by other people.
    ab_study = result.study("demo-ab")
    assert (ab_study.kind, ab_study.counted) == ("pairwise", "choices")
    with Session(engine) as s:
        choices = s.scalar(select(func.count(Choice.id)))
        statuses = dict(s.execute(select(Assignment.status, func.count()).join(Study)
                                  .where(Study.name == "demo-ab").group_by(Assignment.status)).all())
        ab_contexts = set(s.scalars(select(PairItem.context_id).join(Study).where(Study.name == "demo-ab",
                                                                                  ~PairItem.is_control)))
        likert_contexts = set(s.scalars(select(Response.context_id).join(StudyItem).join(Study)
                                        .where(Study.name == "demo", ~StudyItem.is_control)))
        raters = {name: set(s.scalars(select(Annotator.display_name).join(Assignment).join(Study)
                                      .where(Study.name == name))) for name in ("demo", "demo-ab")}
    assert statuses == {"submitted": ab_study.submissions}
    assert ab_study.answers == choices > 0
    assert ab_contexts == likert_contexts and len(ab_contexts) == 12
    assert raters["demo"] and raters["demo-ab"] and not raters["demo"] & raters["demo-ab"]
    ab = pd.read_csv(ab_study.report["table_ab_table"])
    assert set(ab["system_a"]) == {"MoEL"} and set(ab["system_b"]) == {"Gold", "Retrieval", "MIME", "KEMP"}
    # contexts x pairs x judgments per pair x criteria, less the real pairs of the raters the A/B rules flagged
    quality = pd.read_csv(ab_study.report["table_rater_quality"])
    flagged = quality.loc[quality["flagged"]]
    assert 0 < len(flagged) < len(quality)  # the demo's careless A/B raters are caught, not everyone
    assert ab["judgments"].sum() == 12 * 4 * 3 * 3 - 3 * flagged["pairs"].sum()
    gold = ab.loc[(ab["system_b"] == "Gold") & (ab["criterion"] == "relevance")].iloc[0]
    assert gold["lose_pct"] > gold["win_pct"] + 20  # gold beats MoEL in A/B as in the Likert means
    beside = pd.read_csv(ab_study.report["table_likert_beside_ab"])
    assert len(beside) == len(ab) and beside["likert_mean_a"].notna().all()
    ab_markdown = ab_study.report["markdown"].read_text()
    assert "Linked Likert study: **demo**" in ab_markdown and ab_study.report["html"].is_file()

    # The best-worst study: the same contexts, its own raters, its scores beside the Likert means.
    bws = result.study("demo-bws")
    assert (bws.kind, bws.counted) == ("best_worst", "choices")
    with Session(engine) as s:
        bws_choices = s.scalar(select(func.count(BestWorstChoice.id)))
        tuple_contexts = set(s.scalars(select(TupleItem.context_id).join(Study).where(Study.name == "demo-bws",
                                                                                      ~TupleItem.is_control)))
        bws_statuses = dict(s.execute(select(Assignment.status, func.count()).join(Study)
                                      .where(Study.name == "demo-bws").group_by(Assignment.status)).all())
        bws_raters = set(s.scalars(select(Annotator.display_name).join(Assignment).join(Study)
                                   .where(Study.name == "demo-bws")))
    assert bws_statuses == {"submitted": bws.submissions}
    assert bws.answers == bws_choices > 0
    assert tuple_contexts == likert_contexts
    assert bws_raters and not bws_raters & (raters["demo"] | raters["demo-ab"])
    scores = pd.read_csv(bws.report["table_bws_scores"])
    assert set(scores["system"]) == {"Gold", "Retrieval", "MoEL", "MIME", "KEMP"}  # by their display names
    # Gold leads relevance in best-worst too, but with 12 contexts the runner-up is close behind at times: which
    # simulated rater gets which tuple follows the HTTP requests' timing (four runs: Gold 23-53, MIME -17 to +17,
    # and MIME first in one fresh clone), so Gold is among the first two, as for the Likert empathy means above.
    assert "Gold" in scores.loc[scores["criterion"] == "relevance"].set_index("system")["score"].nlargest(2).index
    bws_beside = pd.read_csv(bws.report["table_likert_beside_bws"])
    assert len(bws_beside) == 5 * 3 and bws_beside["likert_mean"].notna().all()
    assert "demo-bws" in markdown  # the Likert report names its linked best-worst study too

    # The chat study: simulated speakers talked live with retrieval, its EmoPrepend variant and a control.
    chat = result.study("demo-chat")
    assert (chat.kind, chat.counted, chat.submissions) == ("chat", "ratings", 6)
    with Session(engine) as s:
        turns = dict(s.execute(select(ChatTurn.speaker, func.count()).group_by(ChatTurn.speaker)).all())
        partners = set(s.scalars(select(ChatTurn.system).where(ChatTurn.speaker == "system")))
        chat_ratings = s.scalar(select(func.count(ChatRating.id)))
        stored_for_chat = s.scalar(select(func.count(Response.id)).join(System)
                                   .where(System.name == "retrieval-emoprepend"))
    assert turns["system"] == turns["rater"] >= 6 * 3 * 2 and partners == {"retrieval", "retrieval-emoprepend",
                                                                             "control-generic"}
    assert chat.answers == chat_ratings == 6 * 3 * 3
    assert stored_for_chat == 0  # live partners need no responses generated beforehand
    chat_means = pd.read_csv(chat.report["table_chat_means"])
    assert set(chat_means["system"]) >= {"Retrieval", "Retrieval + EmoPrepend-1"}
    controls = pd.read_csv(chat.report["table_chat_controls"])
    assert "Control: generic" in set(controls.astype(str).stack())

    # The ACUTE-Eval study, created once the chat study's speakers had talked, over their finished conversations.
    acute = result.study("demo-acute")
    assert acute.kind == "acute" and acute.submissions > 0 and acute.answers > 0
    with Session(engine) as s:
        acute_choices = s.scalar(select(func.count(AcuteChoice.id)))
        justified = s.scalar(select(func.count(AcuteChoice.id)).where(func.length(AcuteChoice.justification) >= 10))
    assert acute.answers == acute_choices == justified
    ab = pd.read_csv(acute.report["table_acute_ab_table"])
    assert {"Retrieval", "Retrieval + EmoPrepend-1"} <= set(ab.astype(str).stack())
    assert "demo-acute" in chat.report["markdown"].read_text()  # the chat report shows its linked ACUTE study
    engine.dispose()
