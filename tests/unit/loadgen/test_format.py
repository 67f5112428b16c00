"""The one set of number formatters (loadgen.format): the compact look the console shows, the wide look of
the report's table, and n/a for every missing value."""

from __future__ import annotations

import math

import pytest

from loadgen.format import (
    fmt_count,
    fmt_duration,
    fmt_gauge,
    fmt_ms,
    fmt_ms_short,
    fmt_ms_wide,
    fmt_num_trimmed,
    fmt_num_wide,
    fmt_pct,
    fmt_pct_wide,
    fmt_rate,
    fmt_seconds,
    fmt_setting,
    fmt_si,
    fmt_value,
    fmt_value_short,
    na,
)

# ---- the compact look (the console) --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "n/a"),
        (0, "0"),
        (12.345, "12.3"),
        (1234.5, "1.23k"),
        (999.96, "1.00k"),
        (2_500_000, "2.50M"),
        (0.01234, "0.0123"),
    ],
)
def test_fmt_si(value: float | None, text: str) -> None:
    assert fmt_si(value) == text


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (None, "n/a"),
        (0.42, "0.42 ms"),
        (81.23, "81.2 ms"),
        (812.4, "812 ms"),
        (999.9, "1.00 s"),
        (1240, "1.24 s"),
        (62500, "62.5 s"),
    ],
)
def test_fmt_ms(ms: float | None, text: str) -> None:
    assert fmt_ms(ms) == text


def test_axis_labels_are_compact() -> None:
    assert fmt_ms_short(100) == "100ms"
    assert fmt_ms_short(1000) == "1s"
    assert fmt_ms_short(1500) == "1.5s"
    assert fmt_value_short(50, "tok/s") == "50"
    assert fmt_value_short(2000, "tok/s") == "2k"


def test_durations_and_percentages() -> None:
    assert fmt_duration(5) == "0:05"
    assert fmt_duration(754.9) == "12:34"
    assert fmt_duration(3723) == "1:02:03"
    assert fmt_duration(None) == "n/a"
    assert fmt_pct(0.1234) == "12.3%"
    assert fmt_pct(0.0005) == "0.05%"  # a small error rate never reads as 0
    assert fmt_pct(0.0) == "0.0%"
    assert fmt_pct(None) == "n/a"
    assert fmt_gauge(61.0) == "61"
    assert fmt_gauge(2.5) == "2.50"
    assert fmt_gauge(None) == "n/a"


def test_missing_values_read_na() -> None:
    assert na() == "n/a"
    assert na("nvml: library not found") == "n/a (nvml: library not found)"
    for fmt in (fmt_si, fmt_ms, fmt_duration, fmt_pct, fmt_gauge, fmt_num_wide, fmt_ms_wide, fmt_pct_wide):
        assert fmt(None) == "n/a" and fmt(math.nan) == "n/a", fmt
    assert fmt_count(None) == fmt_rate(None) == fmt_value(None, "tok/s") == "n/a"


def test_values_in_their_units() -> None:
    assert fmt_value(812.4, "ms") == "812 ms"
    assert fmt_value(1234.5, "tok/s") == "1.23k tok/s"
    assert fmt_rate(12.0) == "12.0 req/s"


# ---- the wide look (the report's table) ----------------------------------------------------------------


def test_the_wide_look() -> None:
    """The report's step table: thousands grouped, no SI suffix, a space before the unit."""
    assert fmt_count(None) == "n/a" and fmt_count(12345) == "12,345" and fmt_count(0) == "0"
    assert fmt_num_wide(None) == "n/a" and fmt_num_wide(12345.4) == "12,345" and fmt_num_wide(45.64) == "45.6"
    assert fmt_num_wide(3.214) == "3.21" and fmt_num_wide(0.0) == "0"
    assert fmt_ms_wide(None) == "n/a" and fmt_ms_wide(812.3) == "812 ms" and fmt_ms_wide(0.853) == "0.85 ms"
    assert (
        fmt_ms_wide(1234.0) == "1,234 ms"
        and fmt_ms_wide(12345.0) == "12.3 s"
        and fmt_ms_wide(12345.0, unit=False) == "12,345"
    )
    assert fmt_num_wide(None) == "n/a" and fmt_num_wide(99.96) == "100" and fmt_num_wide(9.996) == "10.0"
    assert fmt_pct_wide(None) == "n/a" and fmt_pct_wide(0.9876) == "98.8 %"


def test_numbers_in_sentences_and_settings() -> None:
    assert [fmt_num_trimmed(v) for v in (812.3, 12.34, 0.5, 9.996, 1234.0, 0.0)] == [
        "812",
        "12.3",
        "0.5",
        "10",
        "1,234",
        "0",
    ]
    assert [fmt_setting(v) for v in (32, 2.5, 10.0, 0.25)] == ["32", "2.5", "10", "0.25"]
    assert fmt_seconds(3.5) == "3.5 s"
