"""Seeded random distributions for token counts, session turns and think times, parsed from profile values.

A profile writes a distribution either as a bare number (fixed) or as an inline table. The kind is named
with ``dist = "..."`` or inferred from the keys:

    input = 512                                   # fixed
    input = { fixed = 512 }                       # fixed
    input = { min = 128, max = 1024 }             # uniform (integers inclusive for token counts)
    input = { mean = 500, std = 120, min = 16, max = 2048 }          # normal, clamped to [min, max]
    input = { median = 450, sigma = 0.8, min = 16, max = 8192 }      # lognormal (median = e^mu)
    input = { mean = 500, sigma = 0.8 }                              # lognormal given its mean
    input = { values = [128, 512, 2048], weights = [5, 3, 1] }       # empirical (weights optional)

``sigma`` is the standard deviation of the logarithm (shape); a lognormal given its ``mean`` uses
``mu = ln(mean) - sigma**2 / 2`` so that the unclamped mean is the one written. Samples are clamped to
``[min, max]`` (clamped, not re-drawn: cheap and deterministic). Token counts are then rounded and clamped to
>= 1 (``sample_tokens``); durations are clamped to >= 0 (``sample_seconds``).

Parsing raises ``DistributionError`` with a message that says what to write; the profile loader adds the
file, line and key.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

KINDS = ("fixed", "uniform", "normal", "lognormal", "empirical")
_KEYS: dict[str, frozenset[str]] = {
    "fixed": frozenset({"dist", "fixed", "value"}),
    "uniform": frozenset({"dist", "min", "max"}),
    "normal": frozenset({"dist", "mean", "std", "min", "max"}),
    "lognormal": frozenset({"dist", "mean", "median", "sigma", "min", "max"}),
    "empirical": frozenset({"dist", "values", "weights"}),
}


class DistributionError(ValueError):
    """A distribution value that cannot be used; the message says what to write instead."""


def _clamp(x: float, lo: float | None, hi: float | None) -> float:
    if lo is not None and x < lo:
        return lo
    if hi is not None and x > hi:
        return hi
    return x


@dataclass(frozen=True, slots=True)
class Fixed:
    value: float

    def sample(self, rng: random.Random) -> float:
        return self.value

    def mean(self) -> float:
        return self.value

    def to_dict(self) -> dict[str, object]:
        return {"dist": "fixed", "value": self.value}


@dataclass(frozen=True, slots=True)
class Uniform:
    min: float
    max: float
    integer: bool = True  # token counts: every integer in [min, max] equally likely

    def sample(self, rng: random.Random) -> float:
        if self.integer:
            return float(rng.randint(int(self.min), int(self.max)))
        return rng.uniform(self.min, self.max)

    def mean(self) -> float:
        return (self.min + self.max) / 2

    def to_dict(self) -> dict[str, object]:
        return {"dist": "uniform", "min": self.min, "max": self.max}


@dataclass(frozen=True, slots=True)
class Normal:
    mu: float
    std: float
    min: float | None = None
    max: float | None = None

    def sample(self, rng: random.Random) -> float:
        return _clamp(rng.gauss(self.mu, self.std), self.min, self.max)

    def mean(self) -> float:
        return self.mu

    def to_dict(self) -> dict[str, object]:
        return {"dist": "normal", "mean": self.mu, "std": self.std, "min": self.min, "max": self.max}


@dataclass(frozen=True, slots=True)
class LogNormal:
    mu: float  # mean of the logarithm
    sigma: float  # standard deviation of the logarithm
    min: float | None = None
    max: float | None = None

    def sample(self, rng: random.Random) -> float:
        return _clamp(rng.lognormvariate(self.mu, self.sigma), self.min, self.max)

    def mean(self) -> float:
        return math.exp(self.mu + self.sigma**2 / 2)

    def median(self) -> float:
        return math.exp(self.mu)

    def to_dict(self) -> dict[str, object]:
        return {
            "dist": "lognormal",
            "median": self.median(),
            "mean": self.mean(),
            "sigma": self.sigma,
            "min": self.min,
            "max": self.max,
        }


@dataclass(frozen=True, slots=True)
class Empirical:
    values: tuple[float, ...]
    weights: tuple[float, ...]
    cum_weights: tuple[float, ...]  # cumulative, so a draw is one bisect

    def sample(self, rng: random.Random) -> float:
        x = rng.random() * self.cum_weights[-1]
        return self.values[bisect.bisect_right(self.cum_weights, x)]

    def mean(self) -> float:
        return sum(v * w for v, w in zip(self.values, self.weights, strict=True)) / self.cum_weights[-1]

    def to_dict(self) -> dict[str, object]:
        return {"dist": "empirical", "values": list(self.values), "weights": list(self.weights)}


Distribution = Fixed | Uniform | Normal | LogNormal | Empirical


def sample_tokens(dist: Distribution, rng: random.Random) -> int:
    """A token count: rounded, never below 1."""
    return max(1, int(round(dist.sample(rng))))


def sample_seconds(dist: Distribution, rng: random.Random) -> float:
    """A duration in seconds, never below 0."""
    return max(0.0, dist.sample(rng))


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _show(v: object) -> str:
    if isinstance(v, str):
        s = '"' + v + '"'
    else:
        s = repr(v)
    return s if len(s) <= 48 else s[:45] + "..."


def parse_distribution(value: object, *, integer: bool = True) -> Distribution:
    """Turn a profile value into a distribution.

    ``integer=True`` is for token counts and turns (values >= 1, integer bounds); ``integer=False`` is for
    durations in seconds (values >= 0).
    """
    floor = 1.0 if integer else 0.0
    what = "a positive integer" if integer else "a number of seconds >= 0"
    if _is_number(value):
        assert isinstance(value, (int, float))
        _need_min(value, floor, what, "value")
        if integer and value != int(value):
            raise DistributionError(f"expected {what} or a distribution table, got {_show(value)}")
        return Fixed(float(value))
    if not isinstance(value, Mapping):
        raise DistributionError(f"expected {what} or a distribution table, got {_show(value)}")
    return _parse_table(value, integer=integer, floor=floor, what=what)


def _parse_table(value: Mapping[str, object], *, integer: bool, floor: float, what: str) -> Distribution:
    kind = value.get("dist")
    if kind is None:
        kind = _infer_kind(value)
    elif kind not in KINDS:
        raise DistributionError(f"dist = {_show(kind)} is not a distribution; use one of {', '.join(KINDS)}")
    assert isinstance(kind, str)
    unknown = sorted(set(value) - _KEYS[kind])
    if unknown:
        raise DistributionError(
            f"{kind} distribution has unknown key {_show(unknown[0])}; allowed: {', '.join(sorted(_KEYS[kind]))}"
        )

    lo = _opt_number(value, "min", floor, what, integer)
    hi = _opt_number(value, "max", floor, what, integer)
    if lo is not None and hi is not None and lo > hi:
        raise DistributionError(f"min ({_fmt(lo)}) is greater than max ({_fmt(hi)})")

    if kind == "fixed":
        raw = value.get("fixed", value.get("value"))
        if raw is None:
            raise DistributionError("a fixed distribution needs 'fixed = N'")
        return parse_distribution(raw, integer=integer)
    if kind == "uniform":
        if lo is None or hi is None:
            raise DistributionError("a uniform distribution needs both 'min' and 'max'")
        return Uniform(lo, hi, integer=integer)
    if kind == "normal":
        mean = _req_number(value, "mean", kind)
        std = _req_number(value, "std", kind)
        if std < 0:
            raise DistributionError(f"'std' must be >= 0, got {_fmt(std)}")
        return Normal(mean, std, lo, hi)
    if kind == "lognormal":
        return _lognormal(value, lo, hi)
    return _empirical(value, integer=integer, floor=floor, what=what)


def _lognormal(value: Mapping[str, object], lo: float | None, hi: float | None) -> LogNormal:
    sigma = _req_number(value, "sigma", "lognormal")
    if sigma < 0:
        raise DistributionError(f"'sigma' must be >= 0, got {_fmt(sigma)}")
    if ("mean" in value) == ("median" in value):
        raise DistributionError(
            "a lognormal distribution needs exactly one of 'median' or 'mean' (with 'sigma')"
        )
    centre_key = "median" if "median" in value else "mean"
    centre = _req_number(value, centre_key, "lognormal")
    if centre <= 0:
        raise DistributionError(f"'{centre_key}' must be > 0, got {_fmt(centre)}")
    mu = math.log(centre) if centre_key == "median" else math.log(centre) - sigma**2 / 2
    return LogNormal(mu, sigma, lo, hi)


def _empirical(value: Mapping[str, object], *, integer: bool, floor: float, what: str) -> Empirical:
    values = value.get("values")
    if not isinstance(values, list) or not values:
        raise DistributionError(
            "an empirical distribution needs 'values = [...]' (a non-empty list of numbers)"
        )
    for v in values:
        if not _is_number(v):
            raise DistributionError(f"'values' must hold numbers, got {_show(v)}")
        _need_min(v, floor, what, "values")
        if integer and v != int(v):
            raise DistributionError(f"'values' must hold {what}s, got {_show(v)}")
    weights = value.get("weights")
    if weights is None:
        weights = [1.0] * len(values)
    if not isinstance(weights, list) or len(weights) != len(values):
        raise DistributionError(f"'weights' must be a list of {len(values)} numbers, one per value")
    for w in weights:
        if not _is_number(w) or w < 0:
            raise DistributionError(f"'weights' must hold numbers >= 0, got {_show(w)}")
    if sum(weights) <= 0:
        raise DistributionError("'weights' sum to 0: give at least one value a positive weight")
    w = tuple(float(x) for x in weights)
    return Empirical(tuple(float(v) for v in values), w, tuple(itertools.accumulate(w)))


def _infer_kind(value: Mapping[str, object]) -> str:
    keys = set(value)
    if keys & {"fixed", "value"}:
        return "fixed"
    if "values" in keys:
        return "empirical"
    if "sigma" in keys or "median" in keys:
        return "lognormal"
    if "std" in keys or "mean" in keys:
        return "normal"
    if keys == {"min", "max"}:
        return "uniform"
    raise DistributionError(
        "cannot tell the distribution from keys "
        + (", ".join(sorted(keys)) or "(none)")
        + "; write dist = one of "
        + ", ".join(KINDS)
        + " (e.g. { min = 128, max = 1024 } or { median = 500, sigma = 0.8 })"
    )


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else repr(x)


def _need_min(v: float, floor: float, what: str, key: str) -> None:
    if v < floor:
        raise DistributionError(
            f"'{key}' must be {what}, got {_fmt(v)}" if key != "value" else f"expected {what}, got {_fmt(v)}"
        )


def _opt_number(
    value: Mapping[str, object], key: str, floor: float, what: str, integer: bool
) -> float | None:
    if key not in value:
        return None
    v = value[key]
    if not _is_number(v):
        raise DistributionError(f"'{key}' must be a number, got {_show(v)}")
    assert isinstance(v, (int, float))
    _need_min(v, floor, what, key)
    if integer and v != int(v):
        raise DistributionError(f"'{key}' must be an integer, got {_show(v)}")
    return float(v)


_EXAMPLES = {
    "normal": "{ mean = 500, std = 100, min = 1, max = 2000 }",
    "lognormal": "{ median = 500, sigma = 0.8, min = 16, max = 8192 }",
}


def _req_number(value: Mapping[str, object], key: str, kind: str) -> float:
    if key not in value:
        raise DistributionError(f"a {kind} distribution needs '{key}', e.g. {_EXAMPLES[kind]}")
    v = value[key]
    if not _is_number(v):
        raise DistributionError(f"'{key}' must be a number, got {_show(v)}")
    assert isinstance(v, (int, float))
    return float(v)
