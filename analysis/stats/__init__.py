"""Statistics, apart from any kind of study: agreement coefficients with their CIs (agreement, coefficients,
agreement_reading), bootstrap intervals (bootstrap), significance with corrections and effect sizes (significance,
conclusions), the crossed mixed model and the rater-aware check (crossed, rater_aware), Bradley-Terry and
Davidson rankings (bradley_terry), win/tie/loss tests (preferences), power (power), re-running an analysis without
flagged annotators (exclusions), prediction-powered inference (ppi/) and the BLAS thread guard (threads). Each
module has its test module under tests/analysis/stats/ (test_<module>.py)."""
