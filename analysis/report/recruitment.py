"""The methods paragraph's sentence on how raters were recruited and paid, per platform.

``meta`` is the report's study metadata (``analysis.kinds.likert.report.write_report``): ``platform`` ("local",
"prolific" or
"mturk", from the study file's ``[recruitment]`` section; absent for an export read without its study),
``pay_per_assignment``, ``currency``, ``platform_fee`` (a fraction such as 0.2, or an amount per assignment when
above 1) and ``items_per_assignment``. What each platform implies:

- local volunteers: unpaid unless ``pay_per_assignment`` > 0, and never a platform fee;
- Prolific: the pay, and that participants were recruited on Prolific;
- MTurk: the reward per assignment (HIT) and MTurk's fee;
- no platform named: the pay and fee as recorded, naming no platform.
"""

from __future__ import annotations

import numpy as np

PLATFORMS = {"local": "local volunteers", "prolific": "Prolific", "mturk": "Amazon Mechanical Turk (MTurk)"}


def recruitment_sentence(meta: dict, median_seconds: float | None = None) -> str:
    """How raters were recruited and paid, in one or two sentences (see the module docstring)."""
    platform = meta.get("platform")
    pay = meta.get("pay_per_assignment")
    currency = meta.get("currency") or "USD"
    if platform == "local":
        if not pay or pay <= 0:
            return "Annotators were volunteers recruited by the researchers and were not paid."
        return ("Annotators were volunteers recruited by the researchers, paid "
                + _pay_words(pay, currency, meta, median_seconds) + ".")
    if platform == "prolific":
        if pay is None:
            return "Annotators were recruited on Prolific; their pay was not recorded for this report."
        return "Annotators were recruited on Prolific and paid " + _pay_words(pay, currency, meta, median_seconds) + "."
    if platform == "mturk":
        if pay is None:
            return ("Annotators were recruited on Amazon Mechanical Turk (MTurk); the reward per assignment was not "
                    "recorded for this report.")
        return ("Annotators were recruited on Amazon Mechanical Turk (MTurk) with a reward of "
                + _pay_words(pay, currency, meta, median_seconds) + _fee_words(meta, currency, "MTurk's fee") + ".")
    if pay is None:
        return "Pay per assignment was not recorded for this report."
    return ("Annotators were paid " + _pay_words(pay, currency, meta, median_seconds)
            + _fee_words(meta, currency, "the platform fee") + ".")


def _pay_words(pay: float, currency: str, meta: dict, median_seconds: float | None) -> str:
    text = f"{pay:.2f} {currency} per assignment"
    items = meta.get("items_per_assignment")
    if items:
        text += f" of {items} items ({pay / items:.3f} {currency} per item)"
        if median_seconds and np.isfinite(median_seconds) and median_seconds > 0:
            hourly = pay / items / median_seconds * 3600
            text += f", about {hourly:.2f} {currency} per hour at the median {median_seconds:.0f} s per item"
    return text


def _fee_words(meta: dict, currency: str, name: str) -> str:
    fee = meta.get("platform_fee")
    if fee is None:
        return ""
    # A fraction (0.2) is a rate on top of the pay; anything larger is an amount per assignment.
    return f"; {name} was {fee:.0%} on top" if fee <= 1 else f"; {name} was {fee:.2f} {currency} per assignment"
