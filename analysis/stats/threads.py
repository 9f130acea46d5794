"""Keep BLAS single-threaded around the small matrix work of this package.

The matrices here are small (hundreds of rows): multithreaded BLAS only adds start-up and synchronisation
cost, which on small shared machines was measured at 10-50x slower for the mixed model's solves (at 2k ratings
8.15 s instead of 0.16 s). The limit applies only inside the ``with`` block, or the call of a function decorated
with ``blas_single_threaded``: the public entry points that do such work carry it, so that the limit holds
whoever calls them (a report, a notebook, a test). Nested uses cost nothing: only the outermost sets the limit.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_LIMITED: contextvars.ContextVar[bool] = contextvars.ContextVar("empeval_blas_single_threaded", default=False)


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    if _LIMITED.get():  # an outer block holds the limit already (threadpoolctl's probe costs milliseconds)
        yield
        return
    try:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn
    except ImportError:  # pragma: no cover - without it the work is only slower
        yield
        return
    token = _LIMITED.set(True)
    try:
        with threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        _LIMITED.reset(token)


def blas_single_threaded(function: F) -> F:
    """Run ``function`` inside ``single_threaded_blas``: the decorator of the entry points whose linear algebra
    is small enough that BLAS threads only slow it down."""

    @functools.wraps(function)
    def limited(*args: Any, **kwargs: Any) -> Any:
        with single_threaded_blas():
            return function(*args, **kwargs)

    return limited  # type: ignore[return-value]
