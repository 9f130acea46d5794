"""Simulated studies with known truth, for checks, power planning and the notebooks: Likert ratings (likert), A/B
judgments (pairwise) and judges' scores beside human ratings (judges)."""
