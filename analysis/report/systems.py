"""Systems as a report shows them: by their display name, in one order.

A study's meta may carry ``systems`` (the system keys in the study file's order), ``display_names`` (system key ->
the name a paper uses, e.g. ``{"moel": "MoEL"}``: ``display_name`` in the systems config) and ``system_order``
("study", the default, or "mean": best mean over the criteria first). A report renames its systems once, on the
table it reads (``renamed``), so every table, figure, CSV and sentence names a system the same way, and orders them
with ``system_order`` everywhere: the main table, the figures, the side-by-side tables, the A/B tables.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

ORDERS = ("study", "mean")


def display_names(meta: Mapping | None) -> dict[str, str]:
    """``meta["display_names"]`` as a mapping of system key to display name, blank names left out (the key is
    shown). Two systems given the same display name keep it with their key in parentheses, so no two systems of a
    report read alike.

    >>> display_names({"display_names": {"moel": "MoEL", "mime": "MIME", "gold": " "}})
    {'moel': 'MoEL', 'mime': 'MIME'}
    >>> display_names({"display_names": {"a": "Ours", "b": "Ours"}})
    {'a': 'Ours (a)', 'b': 'Ours (b)'}
    """
    given = (meta or {}).get("display_names") or {}
    if not isinstance(given, Mapping):
        raise ValueError(f"meta display_names must map system keys to names, got {type(given).__name__}")
    names = {str(key): str(name).strip() for key, name in given.items() if name is not None and str(name).strip()}
    counts = pd.Series(list(names.values()), dtype=object).value_counts()
    shared = set(counts.index[counts > 1])
    return {key: f"{name} ({key})" if name in shared else name for key, name in names.items()}


def shown(system: str, names: Mapping[str, str]) -> str:
    """The name a report shows for ``system``: its display name, else its key."""
    return names.get(system, system)


def renamed(frame: pd.DataFrame, names: Mapping[str, str], columns: Iterable[str] = ("system",)) -> pd.DataFrame:
    """``frame`` with the system keys of ``columns`` (those it has) replaced by their display names; ``frame``
    itself when there is nothing to rename."""
    present = [column for column in columns if column in frame.columns]
    if not names or not present:
        return frame
    return frame.assign(**{column: frame[column].map(lambda s: names.get(s, s) if isinstance(s, str) else s)
                           for column in present})


def order_option(meta: Mapping | None) -> str:
    """The order the meta asks for (``system_order``), "study" when it does not say; ValueError for another."""
    order = str((meta or {}).get("system_order") or "study")
    if order not in ORDERS:
        raise ValueError(f"meta system_order is {order!r}; it must be one of {', '.join(ORDERS)}")
    return order


def system_order(present: Iterable[str], *, declared: Sequence[str] | None = None,
                 means: pd.DataFrame | None = None, by_mean: bool = False) -> list[str]:
    """The one order of a report's systems: with ``by_mean``, best mean over the criteria first (``means``: a
    system, criterion, mean table; ties and systems without a mean by name); else the study file's order
    (``declared``, display names where the report shows them), then any other system by name.

    >>> system_order(["moel", "gold", "mime"], declared=["mime", "moel", "gold"])
    ['mime', 'moel', 'gold']
    >>> means = pd.DataFrame({"system": ["moel", "gold", "mime"], "criterion": "empathy", "mean": [3.1, 4.2, 3.1]})
    >>> system_order(["moel", "gold", "mime"], declared=["mime", "moel", "gold"], means=means, by_mean=True)
    ['gold', 'mime', 'moel']
    >>> system_order(["b", "a", "c"], declared=["c"])
    ['c', 'a', 'b']
    """
    present = list(dict.fromkeys(str(s) for s in present))
    if by_mean and means is not None and not means.empty:
        overall = means.groupby("system")["mean"].mean()
        return sorted(present, key=lambda s: (0, -overall[s], s) if s in overall.index and pd.notna(overall[s])
                      else (1, 0.0, s))
    ordered = [s for s in dict.fromkeys(declared or ()) if s in present]
    return ordered + sorted(s for s in present if s not in ordered)


def in_system_order(frame: pd.DataFrame, systems: Sequence[str], columns: Sequence[str] = ("system",)) -> pd.DataFrame:
    """``frame``'s rows sorted by the place of ``columns``' systems in ``systems`` (a stable sort: rows that tie keep
    their order, so a table already in criterion order stays in it when ``criterion`` leads ``columns``). A column
    named ``criterion`` is kept as it is; unknown systems go last."""
    if frame.empty:
        return frame
    rank = {s: i for i, s in enumerate(systems)}
    keys = [frame[column] if column == "criterion" else frame[column].map(lambda s: rank.get(s, len(rank)))
            for column in columns]
    order = pd.DataFrame({f"k{i}": key.to_numpy() for i, key in enumerate(keys)}, index=frame.index)
    if "criterion" in columns:
        position = {c: i for i, c in enumerate(dict.fromkeys(frame["criterion"]))}  # the order the frame has
        order[f"k{list(columns).index('criterion')}"] = frame["criterion"].map(position).to_numpy()
    return frame.loc[order.sort_values(list(order.columns), kind="stable").index].reset_index(drop=True)
