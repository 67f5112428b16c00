"""The ``[tools]`` table and its ``[[tools.function]]`` entries → ``Tools``: OpenAI function tools offered
with every request, the ``tool_choice``, and the canned result a multi-turn session answers a tool call with.

    [tools]
    choice = "auto"                    # "auto" | "none" | "required" | one function's name (forces it)
    result = '{"temperature": 21}'     # what a session's ``tool`` message answers each call with
    max_rounds = 3                     # tool rounds in a row a session answers before its next user turn

    [[tools.function]]                 # one or more
    name = "get_weather"               # letters, digits, _ and -, at most 64 (OpenAI's rule)
    description = "The weather in a city"
    parameters = { type = "object", properties = { city = { type = "string" } }, required = ["city"] }

Only chat-like APIs (chat, responses) carry tools: a completions profile with ``[tools]`` is refused.
"""

from __future__ import annotations

import json
import re

from loadgen.config import Api
from loadgen.profile.fields import FieldReader, Where, show_value
from loadgen.profile.model import TOOL_CHOICES, ToolFunction, Tools

TOOLS_KEYS = ("choice", "result", "max_rounds", "function")
FUNCTION_KEYS = ("name", "description", "parameters")
MAX_TOOL_ROUNDS = 32
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def read_tools(reader: FieldReader, t: dict[str, object] | None, api: Api) -> Tools | None:
    if t is None:
        return None
    w = Where("tools", None, "[tools]")
    reader.check_keys(w, t, TOOLS_KEYS)
    if api == "completions":
        reader.fail(w, None, 'tools need a chat-like API: set [target] api = "chat" or "responses"')
    functions = _functions(reader, t.get("function"))
    names = [f.name for f in functions]
    choice = reader.string(w, t, "choice", "auto") or "auto"
    if choice not in TOOL_CHOICES and choice not in names:
        allowed = " | ".join(f'"{c}"' for c in (*TOOL_CHOICES, *names))
        reader.fail(w, "choice", f"expected {allowed}, got {show_value(choice)}")
    result = reader.string(w, t, "result", '{"ok": true}') or '{"ok": true}'
    rounds = reader.integer(w, t, "max_rounds", 3)
    assert rounds is not None
    if rounds > MAX_TOOL_ROUNDS:
        reader.fail(w, "max_rounds", f"expected an integer >= 1 and <= {MAX_TOOL_ROUNDS}, got {rounds}")
    return Tools(functions, choice, result, rounds)


def _functions(reader: FieldReader, v: object) -> tuple[ToolFunction, ...]:
    w = Where("tools", None, "[tools]")
    if v is None:
        reader.fail(w, None, "no [[tools.function]]: add at least one, with a name and its parameters")
    if isinstance(v, dict):
        reader.fail(w, "function", "write [[tools.function]] (double brackets: one table per function)")
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        reader.fail(w, "function", f"expected [[tools.function]] tables, got {show_value(v)}")
    out: list[ToolFunction] = []
    for i, f in enumerate(v):
        fw = Where.item("tools.function", i, f)
        reader.check_keys(fw, f, FUNCTION_KEYS)
        if "name" not in f:
            reader.fail(fw, None, "missing key 'name': the function's name, e.g. name = \"get_weather\"")
        name = reader.string(fw, f, "name", None)
        assert name is not None
        if not _NAME.match(name):
            reader.fail(fw, "name", f"{show_value(name)}: use letters, digits, _ and - only, at most 64")
        if any(o.name == name for o in out):
            reader.fail(fw, "name", f'a function named "{name}" already exists; give each its own name')
        description = f.get("description", "")
        if not isinstance(description, str):
            reader.fail(fw, "description", f"expected a string, got {show_value(description)}")
        out.append(ToolFunction(name, description, _parameters(reader, fw, f)))
    return tuple(out)


def _parameters(reader: FieldReader, fw: Where, f: dict[str, object]) -> str:
    """The function's JSON-Schema parameters as JSON text: a table whose ``type`` is "object"."""
    params = f.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(params, dict):
        reader.fail(fw, "parameters", f"expected a JSON-Schema table, got {show_value(params)}")
    if params.get("type") != "object":
        reader.fail(
            fw, "parameters", 'expected a JSON-Schema object: add type = "object" (and its properties)'
        )
    properties = params.get("properties", {})
    if not isinstance(properties, dict):
        reader.fail(fw, "parameters", f"'properties' must be a table, got {show_value(properties)}")
    try:
        return json.dumps(params, separators=(",", ":"), sort_keys=True)
    except (TypeError, ValueError) as exc:  # a TOML date/time has no JSON form
        reader.fail(fw, "parameters", f"not representable as JSON: {exc}")
