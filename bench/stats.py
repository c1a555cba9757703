"""Medians, ratios and target checks shared by the scenarios."""
import statistics


def median_of(rounds, key):
    return statistics.median(r[key] for r in rounds) if rounds else None


def ratio(numerator, denominator):
    return round(numerator / denominator, 3) if numerator is not None and denominator else None


def target(name, value, *, at_least=None, at_most=None, below=None):
    """A target line: met is None when there is no value to judge."""
    if value is None:
        met = None
    elif at_least is not None:
        met = value >= at_least
    elif at_most is not None:
        met = value <= at_most
    else:
        met = value < below
    return {"name": name, "value": value, "met": met}


def mb(kb):
    return round(kb / 1024, 1) if kb is not None else None
