"""Model-assisted evaluation: an automatic judge scores every item, people rate a random sample of contexts,
and prediction-powered inference (PPI) combines the two into unbiased estimates with valid confidence
intervals, whatever the judge's quality (Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, Science 2023;
PPI++ with power tuning, Angelopoulos, Duchi and Zrnic 2023; cross-prediction, Zrnic and Candès, PNAS 2024).

DataFrame in, tidy DataFrame out, like the rest of ``analysis``. Two input tables:

- human ratings, one row per rating: ``context_id`` (or ``context``), ``system``, ``criterion``,
  ``annotator``, ``score`` (the export's columns; control items, if marked by ``is_control``, are left out);
- judge scores, one row per item: ``context_id``, ``system``, ``criterion``, ``judge_score`` (NaN where the
  judge failed), and optionally ``judge`` when the table holds several judges.

The modules:

- ``empeval.analysis.stats.ppi.tables``: checks of the two tables, the item labels (mean of an item's human ratings),
  the judge's failures, the human-share check a study design calls;
- ``empeval.analysis.stats.ppi.estimates``: per system, human-only, judge-only (biased) and PPI++ means with CIs and the
  effective number of human-rated contexts the judge was worth; paired system differences with PPI++,
  Holm-corrected as ``empeval.analysis.stats.significance`` corrects the Likert comparisons;
- ``empeval.analysis.stats.ppi.agreement``: judge-human agreement against the item label (Spearman, Krippendorff's
  alpha interval with a bootstrap CI) and a calibration table;
- ``empeval.analysis.stats.ppi.crossfit``: a learned judge fitted with K folds over contexts, and cross-prediction-
  powered means and paired differences (Zrnic and Candès 2024);
- ``empeval.analysis.stats.ppi.planner``: the human-rated contexts a target CI half-width needs with a judge of a given
  correlation, beside the human-only figure;
- ``empeval.analysis.stats.ppi.differences``: PPI++ on per-context differences with a judge of differences (a
  pairwise or learned difference judge) as the predictor;
- ``empeval.analysis.stats.ppi.active_draw``: active sampling's draw probabilities (from the judges' uncertainty,
  mixed with uniform), and ``empeval.analysis.stats.ppi.active``: the inverse-probability-weighted estimators that
  go with them (Zrnic and Candès 2024).

The estimand throughout is what the human-only analysis of item means estimates: the mean label (the mean
of k ratings by this study's raters) over the population of contexts the sample was drawn from. A judge can
narrow the interval around it; it cannot change it.
"""
