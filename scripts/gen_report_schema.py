"""Write ``loadgen/report/report_schema.json`` from the tables the JSON summary is made of.

The schema is generated (``loadgen.report.schema.report_schema``): the step columns and the knee's
latencies come from the catalogue of measures (``loadgen.measures``) through ``STEP_COLUMNS`` and
``LATENCIES``. Run it after adding a metric or a column; ``tests/unit/loadgen/test_measures_catalogue.py`` fails
while the committed file is not current.

    python scripts/gen_report_schema.py [--check]
"""

from __future__ import annotations

import argparse
import sys

from loadgen.report.schema import schema_text
from loadgen.report.tables import SCHEMA_PATH


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file is not current")
    args = parser.parse_args(argv)
    text = schema_text()
    current = SCHEMA_PATH.read_text(encoding="utf-8") if SCHEMA_PATH.exists() else ""
    if args.check:
        if current != text:
            print(f"{SCHEMA_PATH}: not current; run python scripts/gen_report_schema.py", file=sys.stderr)
            return 1
        return 0
    if current != text:
        SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
