"""The crossed mixed model says when its solve did not converge: forced by an iteration budget too small for the
conjugate gradients, the fit still returns its estimates, and its note says so; with the default budget the same
design converges and the note is empty. The estimates of the starved solve differ from the converged ones, so a
silent failure would show."""
from __future__ import annotations

import numpy as np

from empeval.analysis.stats.crossed import fit_crossed


def _design(seed: int = 0):
    rng = np.random.default_rng(seed)
    annotator, item = np.repeat(np.arange(20), 30), np.tile(np.arange(30), 20)
    system = (item % 3 == 0).astype(float)
    y = (1.0 + 0.4 * system + rng.normal(0, 0.5, 20)[annotator] + rng.normal(0, 1.0, 30)[item]
         + rng.normal(0, 0.7, 600))
    return y, np.column_stack([np.ones(600), system]), {"annotator": annotator, "item": item}


def test_a_solve_that_runs_out_of_iterations_says_it_did_not_converge():
    y, X, factors = _design()
    starved = fit_crossed(y, X, factors, max_iter=1, reml_max_levels=0)
    converged = fit_crossed(y, X, factors, reml_max_levels=0)
    assert "conjugate gradients did not converge" in starved.note
    assert "did not converge" not in converged.note
    assert np.isfinite(starved.fe_params).all()
    assert not np.allclose(starved.fe_params, converged.fe_params, atol=1e-6)
