"""The JSON Schema of ``ramp report --format json``, built from the tables that make the summary.

Owns ``report_schema()``: the schema as a dict, every step column (``STEP_COLUMNS``: name, JSON type,
description), the run's conditions (``RUN_COLUMNS``, ``CONDITION_COLUMNS``), the best step's keys
(``BEST_KEYS``) and the knee's latencies (``LATENCIES``) read from their declarations, so that a metric added
to the catalogue (``loadgen.measures``) reaches the schema with no edit here. ``report_schema.json`` beside
this module is its output, written by ``scripts/gen_report_schema.py``; a unit test holds the committed
file equal to it.
"""

from __future__ import annotations

import json

from loadgen.analysis.curves import LATENCIES
from loadgen.analysis.steprows import CONDITION_COLUMNS, RUN_COLUMNS, STEP_COLUMNS, Column

__all__ = ["BEST_KEYS", "report_schema", "schema_text"]

JsonSchema = dict[str, object]

# The best step's figures in the summary: step columns, as they are named there.
BEST_KEYS = ("step", "level", "rate_rps", "out_tok_s", "ttft_p95_ms", "itl_p99_ms", "e2e_p95_ms",
             "decode_p50_tok_s", "error_rate")  # fmt: skip
_ANY = ["string", "number", "integer", "boolean", "null"]
_NULLABLE_NUMBER = {"type": ["number", "null"]}


def _column(column: Column) -> JsonSchema:
    kind: object = [column.kind, "null"] if column.nullable else column.kind
    return {"type": kind, "description": column.doc}


def _one_of_null(ref: str) -> JsonSchema:
    return {"oneOf": [{"type": "null"}, {"$ref": f"#/$defs/{ref}"}]}


def _record() -> JsonSchema:
    properties: JsonSchema = {
        "record": {"type": "string", "description": "the record file, as given"},
        "label": {"type": "string", "description": "A, B, ... in the order given"},
        "conditions": {"$ref": "#/$defs/conditions"},
        "slo": {
            "type": ["object", "null"],
            "description": "the SLO's clauses as the record header has them (null: none)",
        },
        "pricing": {
            "type": ["object", "null"],
            "description": "the run's pricing as the record header has it",
        },
        "best_step": {
            "type": ["integer", "null"],
            "description": "step number (1-based) of the best step under the SLO; null: none met it",
        },
        "best": _one_of_null("best"),
        "knee": _one_of_null("knee"),
        "end": {
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["state", "message"],
            "properties": {"state": {"type": "string"}, "message": {"type": "string"}},
            "description": "how the run ended; null: interrupted before its end line",
        },
        "truncated": {"type": "boolean", "description": "the record's last line was cut short and skipped"},
        "marks": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["elapsed_s", "note"],
                "properties": {"elapsed_s": _NULLABLE_NUMBER, "note": {"type": "string"}},
            },
        },
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}},
        "repeats": {"type": "array", "items": {"$ref": "#/$defs/repeat"}},
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def _conditions() -> JsonSchema:
    docs = [(name, doc) for name, doc, _read in RUN_COLUMNS if name != "record"] + list(CONDITION_COLUMNS)
    properties = {name: {"type": _ANY, "description": doc} for name, doc in docs}
    return {
        "type": "object",
        "description": "the run's conditions, as the CSV's run columns",
        "required": sorted(properties),
        "properties": properties,
        "patternProperties": {"^(tag|server_config)_": {"type": _ANY}},
        "additionalProperties": False,
    }


def _best() -> JsonSchema:
    columns = {column.name: column for column in STEP_COLUMNS}
    properties = {key: _column(columns[key]) for key in BEST_KEYS}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": list(properties),
        "properties": properties,
    }


def _knee() -> JsonSchema:
    properties: JsonSchema = {
        "level": {"type": "string"},
        "steps": {"type": "array", "items": {"type": "integer"}},
        "out_tok_s": _NULLABLE_NUMBER,
        **{latency.key: _NULLABLE_NUMBER for latency in LATENCIES},
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "description": "where latency starts to grow faster than throughput (Kneedle on TTFT p95 against out tok/s)",
        "required": list(properties),
        "properties": properties,
    }


def _step() -> JsonSchema:
    return {
        "type": "object",
        "description": "one step, as a CSV row's step columns",
        "required": [column.name for column in STEP_COLUMNS],
        "properties": {column.name: _column(column) for column in STEP_COLUMNS},
        "patternProperties": {"^server_": _NULLABLE_NUMBER},
        "additionalProperties": False,
    }


def _repeat() -> JsonSchema:
    spread = {
        "type": ["object", "null"],
        "additionalProperties": False,
        "required": ["median", "min", "max", "n"],
        "properties": {
            "median": {"type": "number"},
            "min": {"type": "number"},
            "max": {"type": "number"},
            "n": {"type": "integer"},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["level", "n", "left_out", "figures"],
        "properties": {
            "level": {"type": "string"},
            "n": {"type": "integer"},
            "left_out": {"type": "integer"},
            "figures": {"type": "object", "additionalProperties": spread},
        },
    }


def report_schema() -> JsonSchema:
    """The schema of the JSON summary (draft 2020-12), from the tables it is made of."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "llm-ramp report summary (ramp report --format json)",
        "description": (
            "One object per record given, each with its conditions, verdict, knee and one object per step. "
            "Values are the record's own, unrounded; null = not known (never a fake 0). report_schema "
            "changes only when a key changes meaning or goes away; new keys may appear in conditions "
            "(tag_*, server_config_*) and steps (server_*)."
        ),
        "type": "object",
        "additionalProperties": False,
        "required": ["report_schema", "generator", "records"],
        "properties": {
            "report_schema": {"const": 1},
            "generator": {"type": "string", "description": "llm-ramp VERSION that wrote the report"},
            "records": {"type": "array", "items": {"$ref": "#/$defs/record"}},
        },
        "$defs": {
            "record": _record(),
            "conditions": _conditions(),
            "best": _best(),
            "knee": _knee(),
            "step": _step(),
            "repeat": _repeat(),
        },
    }


def schema_text() -> str:
    """``report_schema()`` as ``report_schema.json`` holds it: 2-space indent, a newline at the end."""
    return json.dumps(report_schema(), indent=2, ensure_ascii=False) + "\n"
