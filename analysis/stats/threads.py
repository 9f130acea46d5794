"""Keep BLAS single-threaded around the small matrix work of this package.

The matrices here are small (hundreds of rows): multithreaded BLAS only adds start-up and synchronisation
cost, which on small shared machines was measured at 10-50x slower for the mixed model's solves. The limit
applies only inside the ``with`` block.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:  # pragma: no cover - without it the work is only slower
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
