"""A server that answers raters never loads pandas, numpy or the statistics: a fresh process makes the app on a
study, a rater claims and submits an assignment through it, and only then are the loaded modules counted. The
study's progress page (alpha so far) and its decision look load them when asked, and still work."""
from __future__ import annotations

import json
import subprocess
import sys

from empeval.server.annotation.annotators import invite
from tests.rate_one import rate_one_script

# The statistics' modules by full name: empeval.analysis itself is light and the app uses it.
SERVE_A_RATER = rate_one_script({"pandas", "numpy", "pyarrow", "scipy", "statsmodels",
                                 "empeval.analysis.stats.sequential"})


def test_a_rater_is_served_without_pandas_numpy_or_the_statistics(study_engine):
    url = study_engine.url.render_as_string(hide_password=False)
    _, token = invite(study_engine, "rita", "pilot")
    done = subprocess.run([sys.executable, "-c", SERVE_A_RATER, url, token], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["status"] == 200 and answer["ratings"] == answer["expected"] > 0
    assert answer["loaded"] == []


def test_the_lazily_loaded_parts_still_answer(study_engine):
    """What moved out of the start (alpha so far, the decision look, the flagged raters) is loaded when asked."""
    from empeval.server.annotation.kinds import annotation_kind
    from empeval.server.annotation.kinds.likert import alpha_so_far

    assert alpha_so_far([(1, "empathy", 3), (1, "empathy", 3), (2, "empathy", 1), (2, "empathy", 1)],
                        "empathy") == 1.0
    look = annotation_kind("likert").decision_look()
    assert look.model_assisted and callable(look.look)
    assert annotation_kind("pairwise").decision_look().judged_by.name == "PAIR_DIFFERENCES"
