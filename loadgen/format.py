"""How numbers read, for every face: the console, the headless line, the report's table, SLO verdicts.

A leaf: pure functions from numbers to short strings, no project imports. One function, one look, the
same on every face. A missing value (``None``, NaN) always reads "n/a", never a zero.

Two looks, named apart:

* the compact look (the default, what the console shows): three significant figures with SI suffixes
  and the unit glued on where it is short: ``1.23k``, ``812 ms``, ``1.24 s``, ``12.3%``;
* the wide look (``*_wide``: the report's step table, where columns have room and readers compare rows
  digit by digit): thousands separators, never a suffix, a space before the unit: ``12,345``,
  ``1,234 ms``, ``98.8 %``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = [
    "FIRST_WAIT_SAID_S",
    "NA",
    "csv_text",
    "fmt_count",
    "fmt_duration",
    "fmt_first_wait",
    "fmt_gauge",
    "fmt_gib",
    "fmt_ms",
    "fmt_ms_short",
    "fmt_ms_wide",
    "fmt_num_trimmed",
    "fmt_num_wide",
    "fmt_pct",
    "fmt_pct_wide",
    "fmt_points_wide",
    "fmt_range",
    "fmt_rate",
    "fmt_seconds",
    "fmt_setting",
    "fmt_si",
    "fmt_signed",
    "fmt_value",
    "fmt_usd",
    "fmt_value_short",
    "na",
]

NA = "n/a"

_SI_SUFFIXES = ((1e9, "G"), (1e6, "M"), (1e3, "k"))


def na(reason: str | None = None) -> str:
    """'n/a', with the reason when one is known."""
    return f"{NA} ({reason})" if reason else NA


def _round_sig(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}")


def _sig(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant figures, in plain (not exponent) notation."""
    rounded = _round_sig(value, digits)  # first, so that 999.96 carries into 1000 before we count decimals
    if rounded == 0:
        return "0"
    magnitude = int(math.floor(math.log10(abs(rounded))))
    return f"{rounded:.{max(0, digits - 1 - magnitude)}f}"


def _trim(text: str) -> str:
    return text[:-2] if text.endswith(".0") else text


# ---- the compact look ----------------------------------------------------------------------------------


def fmt_count(count: int | None) -> str:
    """A whole count, digits grouped: 12,345 (the same in both looks)."""
    return NA if count is None else f"{count:,}"


def fmt_si(value: float | None, digits: int = 3) -> str:
    """1234.5 -> '1.23k', 12.345 -> '12.3', 0.01234 -> '0.0123'."""
    if value is None or math.isnan(value):
        return NA
    value = _round_sig(value, digits)
    for scale, suffix in _SI_SUFFIXES:
        if abs(value) >= scale:
            return _sig(value / scale, digits) + suffix
    return _sig(value, digits)


def fmt_ms(ms: float | None) -> str:
    """A latency given in milliseconds: '0.42 ms', '81.2 ms', '812 ms', '1.24 s', '62.5 s'."""
    if ms is None or math.isnan(ms):
        return NA
    ms = _round_sig(ms, 3)
    if abs(ms) >= 1000:
        return f"{_sig(ms / 1000)} s"
    # Below a millisecond a third digit is noise and only widens the line.
    return f"{_sig(ms, 2 if abs(ms) < 1 else 3)} ms"


def fmt_ms_short(ms: float) -> str:
    """An axis label: '10ms', '250ms', '1s', '1.5s'."""
    if abs(ms) >= 1000:
        return f"{_trim(_sig(ms / 1000, 2))}s"
    return f"{_trim(_sig(ms, 2))}ms"


def fmt_value(value: float | None, unit: str) -> str:
    """A histogram value in its display unit ("ms", "tok/s", "tokens")."""
    if unit == "ms":
        return fmt_ms(value)
    if value is None:
        return NA
    return f"{fmt_si(value)} {unit}"


def fmt_value_short(value: float, unit: str) -> str:
    """A compact axis label for a histogram value."""
    if unit == "ms":
        return fmt_ms_short(value)
    text = fmt_si(value, 2)
    suffix = text[-1] if text[-1].isalpha() else ""
    return _trim(text.removesuffix(suffix)) + suffix


def fmt_duration(seconds: float | None) -> str:
    """Elapsed/remaining time: '0:05', '12:34', '1:02:03'."""
    if seconds is None or math.isnan(seconds):
        return NA
    total = max(0, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


FIRST_WAIT_SAID_S = 5.0  # a request waiting longer than this for its first token is said on the faces


def fmt_first_wait(count: int, wait_s: float) -> str | None:
    """Requests stuck before their first token, once the longest has waited ``FIRST_WAIT_SAID_S``:
    '2 streams waiting for a first token for 5 s'; None before (a normal prefill is not news)."""
    if count <= 0 or wait_s < FIRST_WAIT_SAID_S:
        return None
    streams = "1 stream" if count == 1 else f"{count:,} streams"
    waited = f"{int(wait_s)} s" if wait_s < 120 else fmt_duration(wait_s)
    return f"{streams} waiting for a first token for {waited}"


def fmt_pct(fraction: float | None, digits: int = 1) -> str:
    """A 0..1 fraction as a percentage: 0.1234 -> '12.3%'; small non-zero shares keep two decimals
    (0.0005 -> '0.05%') so an error rate never reads as a flat 0."""
    if fraction is None or math.isnan(fraction):
        return NA
    if 0 < abs(fraction) < 0.01 and digits < 2:
        digits = 2
    return f"{fraction * 100:.{digits}f}%"


def fmt_gauge(value: float | None) -> str:
    """A gauge that is usually a whole number (running requests): 61.0 -> '61', 2.5 -> '2.50'."""
    if value is None or math.isnan(value):
        return NA
    if value == int(value) and abs(value) < 1000:
        return str(int(value))
    return fmt_si(value)


def fmt_rate(rps: float | None) -> str:
    """A request rate with its unit: '12.0 req/s', '1.23k req/s'."""
    return NA if rps is None else f"{fmt_si(rps)} req/s"


def fmt_gib(mib: float | None) -> str:
    """Mebibytes as gibibytes, one decimal, no unit (the caller writes 'GiB' once for a pair)."""
    return NA if mib is None else f"{mib / 1024:.1f}"


def fmt_seconds(seconds: float) -> str:
    """A moment or a span in seconds, one decimal: '3.5 s'."""
    return f"{seconds:.1f} s"


def fmt_setting(value: float) -> str:
    """A setting as it was given (a level, a rate, a window): '32', '2.5', '0.25'; no grouping, no rounding
    beyond six significant figures."""
    return str(value) if isinstance(value, int) else f"{value:g}"


# ---- the wide look -------------------------------------------------------------------------------------


def fmt_num_wide(value: float | None) -> str:
    """Three significant figures, thousands grouped, never a suffix or an exponent: 0.85, 12.3, 812, 12,345."""
    if value is None or math.isnan(value):
        return NA
    # choose the format on the rounded value, so that 99.96 reads "100", not "100.0"
    if abs(round(value, 1)) >= 100 or value == 0:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(round(value, 2)) >= 10 else f"{value:.2f}"


def fmt_ms_wide(value: float | None, unit: bool = True) -> str:
    """Milliseconds: "0.85 ms", "812 ms", "1,234 ms", "12.3 s" (with ``unit``); the number in ms without it."""
    if value is None or math.isnan(value):
        return NA
    if not unit:
        return fmt_num_wide(value)
    if abs(value) >= 10_000:
        return f"{fmt_num_wide(value / 1000)} s"
    return f"{fmt_num_wide(value)} ms"


def fmt_pct_wide(fraction: float | None) -> str:
    """A 0..1 fraction as a percentage, a space before the sign: 0.9876 -> "98.8 %"."""
    if fraction is None or math.isnan(fraction):
        return NA
    return f"{fraction * 100:.1f} %"


def fmt_num_trimmed(value: float) -> str:
    """The wide look without trailing zeros, for a number inside a sentence: 812, 12.3, 0.5, 10, 1,234."""
    text = fmt_num_wide(value)
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_points_wide(fraction: float | None) -> str:
    """A difference of two 0..1 fractions in percentage points: 0.2 -> "20.0 pp"."""
    if fraction is None or math.isnan(fraction):
        return NA
    return f"{fraction * 100:.1f} pp"


def fmt_usd(usd: float | None) -> str:
    """Dollars: cents at least, three significant figures below a dollar (trailing zeros past the cents
    dropped), grouped from $1,000: "$0.000492", "$0.03", "$0.80", "$1.97", "$1,234"; "$0" for nothing."""
    if usd is None or math.isnan(usd):
        return NA
    if usd == 0:
        return "$0"
    value = abs(usd)
    if value >= 1000:
        text = f"{value:,.0f}"
    elif value >= 1:
        text = f"{value:.2f}"
    else:
        whole, _, fraction = _sig(value, 3).partition(".")
        text = f"{whole}.{fraction.rstrip('0').ljust(2, '0')}"
    return f"{'-' if usd < 0 else ''}${text}"


def fmt_signed(value: float | None, look: Callable[[float], str] = fmt_num_wide) -> str:
    """A difference: its sign, then its size in ``look``: "+100", "-50.0", "+10.0 %" (look
    ``fmt_pct_wide``), "-$0.25" (look ``fmt_usd``); no sign on a zero."""
    if value is None or math.isnan(value):
        return NA
    text = look(abs(value))
    if value == 0 or text.strip("0.,$ %p") == "":
        return text
    return ("+" if value > 0 else "-") + text


def fmt_range(
    median: float | None, low: float | None, high: float | None, look: Callable[[float | None], str]
) -> str:
    """A figure over repeats: "1,000 (990–1,030)", the median and the range (min–max) in ``look``."""
    return f"{look(median)} ({look(low)}–{look(high)})"


_FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value: object) -> object:
    """A CSV cell safe to open in a spreadsheet (OWASP's CSV injection advice): a string that starts
    with ``= + - @``, a tab or a carriage return gets a leading ``'`` so it is read as text, not a formula.
    Numbers, and strings that are plain numbers (``-1.5``), are left as they are."""
    if not isinstance(value, str) or not value.startswith(_FORMULA_LEAD):
        return value
    try:
        float(value)
    except ValueError:
        return "'" + value
    return value
