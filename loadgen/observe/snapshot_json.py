"""A ``Snapshot`` as JSON and back, for ``ramp attach`` (``loadgen.observe.share`` writes, ``loadgen.observe.remote``
reads): the one definition of the shared snapshot's wire form.

``plain`` turns a snapshot into JSON values field by field (dataclasses as objects, tuples as arrays,
non-finite floats as the strings "inf", "-inf", "nan"), every string passed through ``text`` (the share
scrubs secrets there). ``from_plain`` is its strict inverse, driven by the dataclasses' own annotations: an
int is an int (never a bool), a Literal one of its values, a nested object a dict of known fields; a field
the peer left out takes its default (an older ramp), one it added is ignored (a newer ramp); anything else
is a ``SnapshotFormatError`` naming the field's path. Strings past ``MAX_TEXT`` characters are cut: what a
peer sends is data to draw, bounded, never markup (the console draws every string as text).
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar, Union

from loadgen.snapshot import Snapshot, StepSummary

__all__ = [
    "FORMAT",
    "MAX_TEXT",
    "SnapshotFormatError",
    "SnapshotReader",
    "from_plain",
    "plain",
    "snapshot_from_plain",
]

FORMAT = 1  # the wire form's version: a reader refuses another one by name
MAX_TEXT = 4096  # characters of one string (the longest the engine makes is an error message's ~300)
MAX_JSON_DEPTH = 4  # a field typed ``object``: how deep its JSON may nest
NON_FINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}

T = TypeVar("T")


class SnapshotFormatError(ValueError):
    """What a peer sent is not a snapshot: the message names the field (``windows.step.ok: not an int``)."""


def plain(value: object, text: Callable[[str], str] = str) -> object:
    """``value`` (a snapshot, or any part of one) as JSON values; every string through ``text``."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), text) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {text(str(key)): plain(item, text) for key, item in value.items()}
    if isinstance(value, tuple | list):
        return [plain(item, text) for item in value]
    raise TypeError(f"not a snapshot value: {type(value).__name__}")


def snapshot_from_plain(data: object) -> Snapshot:
    """The ``Snapshot`` in ``data`` (as ``plain`` made it). A live view of a peer: never a replay's step."""
    snapshot = from_plain(Snapshot, data, "snapshot")
    return dataclasses.replace(snapshot, selected=None)


class SnapshotReader:
    """``snapshot_from_plain`` for the snapshots of one run, one after another: each finished step (most of
    a long run's snapshot, never changed once finished) is decoded once and known again by ``step_key``."""

    def __init__(self) -> None:
        self._steps: dict[str, StepSummary] = {}

    def read(self, data: object) -> Snapshot:
        if not isinstance(data, dict):
            raise SnapshotFormatError("snapshot: not an object")
        items = data.get("steps", [])
        if not isinstance(items, list):
            raise SnapshotFormatError("snapshot.steps: not an array")
        known: dict[str, StepSummary] = {}
        steps = []
        for i, item in enumerate(items):
            key = step_key(item)
            step = self._steps.get(key) if key else None
            if step is None:
                step = from_plain(StepSummary, item, f"snapshot.steps[{i}]")
            if key:
                known[key] = step
            steps.append(step)
        self._steps = known  # only the steps of the latest snapshot
        snapshot = snapshot_from_plain({key: value for key, value in data.items() if key != "steps"})
        return dataclasses.replace(snapshot, steps=tuple(steps))


def step_key(item: object) -> str:
    """What tells a finished step from another without reading its histograms (the bulk): every field but
    those (its number, its window on the monotonic clock, counts, verdict...) and whether it carries its bars
    (the share leaves them out past its size limit); "" for anything that is not a step's shape."""
    if not isinstance(item, dict):
        return ""
    stats = item.get("stats")
    if not isinstance(stats, dict):
        return ""
    hist = stats.get("hist")
    bars = isinstance(hist, dict) and any(isinstance(v, dict) and v.get("bins") for v in hist.values())
    figures = {key: value for key, value in stats.items() if key not in ("hist", "by_class")}
    rest = {key: value for key, value in item.items() if key != "stats"}
    return json.dumps([rest, figures, bars], separators=(",", ":"))


def from_plain(kind: type[T], data: object, path: str) -> T:
    """``data`` as an instance of the dataclass ``kind``; SnapshotFormatError names what is wrong."""
    if not isinstance(data, dict):
        raise SnapshotFormatError(f"{path}: not an object")
    hints = _hints(kind)
    values: dict[str, object] = {}
    for f in dataclasses.fields(kind):  # type: ignore[arg-type]  # T is a dataclass: its callers say
        if f.name in data:
            values[f.name] = _value(hints[f.name], data[f.name], f"{path}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise SnapshotFormatError(f"{path}.{f.name}: missing")
    return kind(**values)


_HINTS: dict[type, dict[str, Any]] = {}  # each dataclass's resolved annotations, read once


def _hints(kind: type) -> dict[str, Any]:
    hints = _HINTS.get(kind)
    if hints is None:
        hints = _HINTS[kind] = typing.get_type_hints(kind)
    return hints


def _value(hint: Any, data: object, path: str) -> object:
    """``data`` as the annotation ``hint`` says (the annotations the snapshot's dataclasses use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        choices = [a for a in args if a is not type(None)]
        if len(choices) != 1:
            raise SnapshotFormatError(f"{path}: unsupported annotation {hint}")
        return _value(choices[0], data, path)
    if origin is Literal:
        if isinstance(data, str) and data in args:
            return data
        raise SnapshotFormatError(f"{path}: not one of {', '.join(map(str, args))}")
    if origin is tuple:
        return _tuple(args, data, path)
    if origin in (Mapping, dict):
        if not isinstance(data, dict):
            raise SnapshotFormatError(f"{path}: not an object")
        return {
            _value(args[0], key, f"{path} key"): _value(args[1], item, f"{path}.{key}")
            for key, item in data.items()
        }
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_plain(hint, data, path)
    return _scalar(hint, data, path)


def _tuple(args: tuple[Any, ...], data: object, path: str) -> tuple[object, ...]:
    if not isinstance(data, list):
        raise SnapshotFormatError(f"{path}: not an array")
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_value(args[0], item, f"{path}[{i}]") for i, item in enumerate(data))
    if len(data) != len(args):
        raise SnapshotFormatError(f"{path}: {len(data)} items, not {len(args)}")
    return tuple(
        _value(hint, item, f"{path}[{i}]") for i, (hint, item) in enumerate(zip(args, data, strict=True))
    )


def _any_json(data: object, path: str, depth: int = 0) -> object:
    """A field typed ``object`` (a step's ``diagnosis``, ``ttft_split``): any JSON value, strings bounded as
    above, nested at most ``MAX_JSON_DEPTH`` deep."""
    if depth > MAX_JSON_DEPTH:
        raise SnapshotFormatError(f"{path}: nested too deep")
    if isinstance(data, str):
        return _scalar(str, data, path)
    if data is None or isinstance(data, bool | int | float):
        return data
    if isinstance(data, list):
        return [_any_json(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(data)]
    if isinstance(data, dict):
        return {str(k): _any_json(v, f"{path}.{k}", depth + 1) for k, v in data.items()}
    raise SnapshotFormatError(f"{path}: not a JSON value")


def _scalar(hint: Any, data: object, path: str) -> object:
    if hint is object:
        return _any_json(data, path)
    if hint is str:
        if isinstance(data, str):
            return data if len(data) <= MAX_TEXT else data[: MAX_TEXT - 1] + "…"
        raise SnapshotFormatError(f"{path}: not a string")
    if hint is bool:
        if isinstance(data, bool):
            return data
        raise SnapshotFormatError(f"{path}: not true or false")
    if hint is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        raise SnapshotFormatError(f"{path}: not an integer")
    if hint is float:
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data)
        if isinstance(data, str) and data in NON_FINITE:
            return NON_FINITE[data]
        raise SnapshotFormatError(f"{path}: not a number")
    raise SnapshotFormatError(f"{path}: unsupported annotation {hint}")
