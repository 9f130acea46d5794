"""Automatic judges: models that score a study's items (one response to one context, on one criterion) so
that prediction-powered inference (``empeval.analysis.stats.ppi``) can combine their scores on every item with human
ratings on a sample. A judge's score is never an estimate on its own: the analysis corrects it with the
human ratings.

- ``base``: the ``Judge`` interface, what it scores (``JudgedItem``, ``JudgedStudy``) and what it returns
  (``Verdict``: a score, or an error, with the raw output and latency);
- ``rubric``: the rubric prompt built from the study's own criterion definitions and scale labels, and the
  strict parser of a constrained answer;
- ``http_judge`` (``http-judge``), ``learned_judge`` (``learned-judge``), ``length_judge`` (``length-judge``):
  the judge kinds;
- judges of differences (``PairJudge``: for two responses to one context, A's rating minus B's):
  ``pairwise_http_judge`` (``pairwise-http-judge``, asking ``pairwise_prompt``'s question in both orders) and
  ``learned_difference_judge`` (``learned-difference-judge``); ``pair_run`` stores their verdicts in
  ``judge_pair_score`` and ``pair_scores`` reads them back;
- ``study_items``: a study's items and human ratings, read from the store;
- ``run``: ``judge_study``, scoring every item of a study with one judge, batched and resumable, into the
  ``judge_score`` table;
- ``scores``: ``judge_scores``, the reader the report uses (a tidy DataFrame).
"""
