"""Simulated studies with known truth, for checks, power planning and the notebooks: Likert ratings (likert), A/B
judgments (pairwise), ACUTE-Eval comparisons of conversations (acute) and judges' scores beside human ratings
(judges)."""
