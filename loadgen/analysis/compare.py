"""``ramp compare A.jsonl B.jsonl [C ...] [--vary KEY ...] [--force] [--format text|json]``: the command.

Reads the records (a missing file, a file that is not a record, a record with no finished step: one line
naming the file, exit 2), checks ``--vary`` against the conditions the runs have, builds the comparison
(``loadgen.analysis.comparison``) and prints it: the terminal text (``loadgen.analysis.compare_text``) or
JSON. A refused comparison (the runs differ in more than what is varied, no ``--force``) exits 2 with every
difference named.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from loadgen.analysis.compare_text import format_comparison, format_refusal
from loadgen.analysis.comparison import as_json, build
from loadgen.analysis.conditions import unknown_vary, vary_names
from loadgen.analysis.runs import AnalysisError, load_run

__all__ = ["EXIT_OK", "EXIT_USAGE", "FORMATS", "compare_main", "run_label"]

EXIT_OK, EXIT_USAGE = 0, 2
FORMATS = ("text", "json")


def run_label(n: int) -> str:
    """A, B, ... Z, then R27, R28 ..."""
    return chr(ord("A") + n) if n < 26 else f"R{n + 1}"


def _fail(message: str) -> int:
    print(f"ramp compare: {message}", file=sys.stderr)
    return EXIT_USAGE


def compare_main(
    paths: Sequence[str], vary: Sequence[str] = (), force: bool = False, fmt: str = "text"
) -> int:
    """``ramp compare``: 0 when compared, 2 when refused or the input is bad (one line naming the file)."""
    if len(paths) < 2:
        return _fail("give two records or more: ramp compare A.jsonl B.jsonl [C.jsonl ...] [--vary KEY]")
    try:
        runs = [load_run(path, run_label(n)) for n, path in enumerate(paths)]
    except AnalysisError as exc:
        return _fail(str(exc))
    unknown = unknown_vary(runs, vary)
    if unknown:
        return _fail(f"--vary {unknown[0]}: not a condition; one of: {', '.join(vary_names(runs))}, tag:KEY")
    comparison = build(runs, vary, force)
    if fmt == "json":
        print(json.dumps(as_json(comparison), indent=2, ensure_ascii=False))
    elif comparison.refused:
        print(format_refusal(comparison), file=sys.stderr)
    else:
        print(format_comparison(comparison))
    return EXIT_USAGE if comparison.refused else EXIT_OK
