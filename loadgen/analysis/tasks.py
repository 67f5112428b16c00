"""Verifiable tasks (``[quality] tasks = true``, ``--quality-tasks``): probe prompts whose answer a rule
checks, so a real model's answers can be judged right or wrong under load without a reference answer.

Four kinds, taken in turn, each drawn from the run's probe seed and the task's number (the same tasks in
every run with that seed):

- ``arithmetic``: ``Compute 37 * 12 + 5`` — right when the answer's last integer is the one answer;
- ``copy``: repeat a random 16-character string — right when the answer is that string exactly (surrounding
  blanks, quotes, backticks and a final full stop aside);
- ``json``: a JSON object with given keys, types and values — right when the answer (code fences aside)
  parses to a value that matches the task's small schema (``matches``: a hand check of JSON Schema's
  ``type``, ``required``, ``properties``, ``items``, ``enum``, ``additionalProperties``);
- ``tool_call``: call the ``set_timer`` tool offered with the request — right when the reply calls it with
  arguments that parse and match the tool's parameter schema, with the minutes asked for. The Completions
  API offers no tools: there, the tasks of that kind are skipped (``kinds_for``).

Pure: no I/O. A task probe's index is ``TASK_BASE`` + its number (``loadgen.workload.probes``), so that the
run's ``QualityBook`` (``loadgen.analysis.quality``) tells it from a probe compared with a reference.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from loadgen.tool_messages import calls_of

TaskKind = Literal["arithmetic", "copy", "json", "tool_call"]
KINDS: tuple[TaskKind, ...] = ("arithmetic", "copy", "json", "tool_call")
TASK_BASE = 1 << 20  # a probe index at or above this is a verifiable task (its number: index - TASK_BASE)
TASKS = 8  # distinct tasks in a run, taken in turn: two of each kind
TASK_MAX_TOKENS = 96  # room for a JSON object or a tool call's arguments, whatever the probes' max_tokens
TOOL_NAME = "set_timer"
TOOL_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {"minutes": {"type": "integer"}, "label": {"type": "string"}},
    "required": ["minutes", "label"],
}
_COPY_ALPHABET = string.ascii_letters + string.digits
_WORDS = ("amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper")
_INTEGER = re.compile(r"-?\d[\d,]*")


@dataclass(frozen=True, slots=True)
class Task:
    """One verifiable task: its kind, the prompt sent, and what the rule checks the answer against (the
    integer, the string, the JSON schema; for a tool call, the minutes asked for)."""

    kind: TaskKind
    prompt: str
    expected: str = ""  # arithmetic: the integer; copy: the string; tool_call: the minutes
    schema_json: str = ""  # json: the schema the answer must match (JSON text: the task stays hashable)

    @property
    def tool(self) -> dict[str, object]:
        """The function tool a ``tool_call`` task offers, in chat's shape."""
        return {
            "type": "function",
            "function": {"name": TOOL_NAME, "description": "start a timer", "parameters": TOOL_SCHEMA},
        }


def make_task(number: int, seed: int) -> Task:
    """Task ``number`` of a run whose probes use ``seed``: its kind cycles through ``KINDS``."""
    rng = random.Random(f"ramp-task:{seed}:{number}")  # a string seed: the same draw on every platform
    kind = KINDS[number % len(KINDS)]
    if kind == "arithmetic":
        a, b, c = rng.randint(12, 99), rng.randint(12, 99), rng.randint(1, 99)
        return Task(kind, f"Compute {a} * {b} + {c}. Answer with the integer only.", str(a * b + c))
    if kind == "copy":
        text = "".join(rng.choice(_COPY_ALPHABET) for _ in range(16))
        return Task(kind, f"Repeat this string exactly, and nothing else: {text}", text)
    if kind == "json":
        name, count = rng.choice(_WORDS), rng.randint(2, 50)
        schema = {
            "type": "object",
            "required": ["name", "count", "tags"],
            "properties": {
                "name": {"type": "string", "enum": [name]},
                "count": {"type": "integer", "enum": [count]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
        }
        prompt = (
            f'Reply with only a JSON object with the keys "name" (the string "{name}"), "count" (the integer '
            f'{count}) and "tags" (a list of strings).'
        )
        return Task(kind, prompt, schema_json=json.dumps(schema))
    minutes, label = rng.randint(2, 90), rng.choice(_WORDS)
    prompt = f"Set a timer for {minutes} minutes labelled '{label}'. Use the {TOOL_NAME} tool."
    return Task(kind, prompt, str(minutes))


def kinds_for(tools: bool) -> tuple[TaskKind, ...]:
    """The kinds a run can ask: without tools (the Completions API), no tool call."""
    return KINDS if tools else tuple(k for k in KINDS if k != "tool_call")


def task_numbers(tools: bool) -> tuple[int, ...]:
    """The numbers of the ``TASKS`` tasks a run asks, in turn (those of a kind it cannot ask left out)."""
    allowed = kinds_for(tools)
    return tuple(n for n in range(TASKS) if KINDS[n % len(KINDS)] in allowed)


def check(task: Task, answer: str) -> bool:
    """Whether ``answer`` (a probe's text, or its tool calls as ``calls_text`` writes them) does the task."""
    calls = calls_of(answer)
    if task.kind == "tool_call":
        return calls is not None and any(_good_call(task, name, args) for name, args in calls)
    if calls is not None:  # the reply called a tool where text was asked for
        return False
    if task.kind == "arithmetic":
        return check_integer(answer, int(task.expected))
    if task.kind == "copy":
        return check_copy(answer, task.expected)
    return check_json(answer, json.loads(task.schema_json))


def check_integer(answer: str, expected: int) -> bool:
    """The answer's last integer (thousands separators aside) is ``expected``."""
    found = _INTEGER.findall(answer)
    return bool(found) and found[-1].replace(",", "") == str(expected)


def check_copy(answer: str, expected: str) -> bool:
    """The answer is ``expected`` exactly, but for surrounding blanks, quotes, backticks and a full stop."""
    return answer.strip().rstrip(".").strip().strip("`\"'").strip() == expected


def check_json(answer: str, schema: Mapping[str, object]) -> bool:
    """The answer, code fences and text around its outermost braces aside, is JSON that matches ``schema``."""
    start, end = answer.find("{"), answer.rfind("}")
    if start < 0 or end < start:
        return False
    try:
        value = json.loads(answer[start : end + 1])
    except (ValueError, RecursionError):  # not JSON, or nested past the parser (a hostile reply)
        return False
    return matches(value, schema)


def _good_call(task: Task, name: str, arguments: str) -> bool:
    if name != TOOL_NAME:
        return False
    try:
        args = json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser (a hostile reply)
        return False
    return matches(args, TOOL_SCHEMA) and args.get("minutes") == int(task.expected)


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int, float),  # a float only when whole
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def matches(value: object, schema: Mapping[str, object]) -> bool:
    """A hand check of ``value`` against the part of JSON Schema the tasks use: ``type`` (one name),
    ``enum``, an object's ``required``, ``properties`` and ``additionalProperties: false``, an array's
    ``items`` (one schema). A key it does not know is not checked."""
    kind = schema.get("type")
    if isinstance(kind, str):
        wanted = _TYPES.get(kind, (object,))
        is_bool = isinstance(value, bool)
        if not isinstance(value, wanted) or (is_bool and kind not in ("boolean",)):
            return False
        if kind == "integer" and isinstance(value, float) and not value.is_integer():
            return False  # 3.0 is an integer to JSON Schema, 3.5 is not
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(
        value == e and isinstance(value, bool) == isinstance(e, bool) for e in enum
    ):
        return False
    if isinstance(value, dict):
        return _object_matches(value, schema)
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return all(matches(item, items) for item in value)
    return True


def _object_matches(value: Mapping[str, object], schema: Mapping[str, object]) -> bool:
    required = schema.get("required")
    if isinstance(required, list) and any(key not in value for key in required):
        return False
    properties = schema.get("properties")
    props = properties if isinstance(properties, Mapping) else {}
    if schema.get("additionalProperties") is False and any(key not in props for key in value):
        return False
    return all(
        matches(value[key], sub) for key, sub in props.items() if key in value and isinstance(sub, Mapping)
    )
