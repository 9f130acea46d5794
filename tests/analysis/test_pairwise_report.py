"""The report's pairwise section (analysis.kinds.pairwise.blocks): every table of pairwise_tables appears, with its
caption, its figures taken from the tables, and untrusted names escaped by the document model."""
from __future__ import annotations

import pandas as pd

from empeval.analysis.kinds.likert.load import tidy_from_export
from empeval.analysis.kinds.pairwise.blocks import ab_display, pairwise_blocks
from empeval.analysis.kinds.pairwise.schema import judgment_rows
from empeval.analysis.kinds.pairwise.tables import pairwise_tables
from empeval.analysis.report.document import Document, Table, to_html, to_markdown
from empeval.analysis.simulate.likert import simulate_study
from empeval.analysis.simulate.pairwise import simulate_pairwise_study


def test_the_section_shows_every_table_with_its_caption_and_figures():
    study = simulate_pairwise_study(n_contexts=12, k=2, anchor="moel", n_random_clickers=1, seed=2)
    likert = tidy_from_export(simulate_study(n_contexts=12, seed=2).export)
    tables = pairwise_tables(study.judgments, focus="moel", likert=likert, n_boot=30)
    blocks = pairwise_blocks(tables)
    captions = [block.caption for block in blocks if isinstance(block, Table)]
    assert captions[0] == tables.ab_caption and tables.position_caption in captions
    assert tables.ranking_caption in captions and len(captions) == 6  # ab, likert, ranking, agreement, bias, controls
    text = to_markdown(Document("report", blocks))
    first = tables.ab.iloc[0]
    assert (f"| {first['criterion']} | moel vs {first['system_b']} | {first['win_pct']:.1f} | {first['lose_pct']:.1f} "
            f"| {first['tie_pct']:.1f} |") in text
    top = tables.ranking.iloc[0]
    assert f"| {top['criterion']} | 1 | {top['system']} | {top['strength']:.2f} [{top['ci_low']:.2f}, " in text
    kappa = tables.agreement.iloc[0]
    assert f"| Fleiss' kappa | {kappa['estimate']:.2f} [{kappa['ci_low']:.2f}, {kappa['ci_high']:.2f}] |" in text


def test_p_values_and_missing_figures_read_as_the_report_writes_them():
    ab = pd.DataFrame([{"criterion": "empathy", "system_a": "moel", "system_b": "gold", "judgments": 30,
                        "win_pct": 10.0, "lose_pct": 80.0, "tie_pct": 10.0, "contexts_won": 1, "contexts_lost": 25,
                        "contexts_even": 4, "p_adj": 0.00002, "significant": True}])
    row = ab_display(ab).iloc[0]
    assert (row["p adj."], row["sig."], row["contexts (won / lost / even)"]) == ("< 0.001", "yes", "1 / 25 / 4")


def test_a_study_without_real_pairs_says_so_and_names_are_escaped():
    controls_only = judgment_rows([(1, "control-generic", "moel", "right")], is_control=True,
                                  control_target="empathy")
    blocks = pairwise_blocks(pairwise_tables(pd.DataFrame(controls_only), control_systems={"control-generic"}))
    assert "No judgments of real pairs" in to_markdown(Document("report", blocks))
    hostile = judgment_rows([(1, "<b>x</b>", "moel", "left"), (2, "moel", "<b>x</b>", "right")])
    html = to_html(Document("report", pairwise_blocks(pairwise_tables(pd.DataFrame(hostile), n_boot=10))))
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
