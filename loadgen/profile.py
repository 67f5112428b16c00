"""Workload profiles: the TOML schema, its validation, and the typed ``Profile`` the rest of the engine uses.

A profile is read and validated once, at the edge; everything after that works on frozen, picklable
dataclasses. Any problem in the file becomes a ``ProfileError`` whose ``str`` is one line naming the file,
the line, the key and what to do, e.g.::

    profiles/x.toml:12: [[bucket]] #2 "long" key 'input': expected a positive integer or a distribution table, got "abc"

Schema (every key below is the complete list; any other key is an error)::

    name = "chat"                      # optional, default: the file name without .toml
    description = "..."                # optional

    [target]
    api = "chat"                       # "chat" (/v1/chat/completions) | "completions" (/v1/completions)
    model = "auto"                     # "auto" = discover from /v1/models, or a served model name
    prefix_role = "system"             # chat: the shared prefix is a system message, or "user": it opens the
                                       #   first user message (for chat templates without a system role)

    [[prefix_group]]                   # zero or more
    name = "docs"
    prefix_tokens = 2048               # length of each shared prefix
    count = 4                          # distinct prefixes in the group (a hit request picks one at random)

    [[bucket]]                         # one or more; each session/request draws one bucket by weight
    name = "short"                     # optional, default "bucket<N>"; unique
    weight = 1.0                       # >= 0, default 1; the weights must not all be 0
    input = 512                        # prompt tokens beyond the shared prefix (and, in sessions, beyond the
                                       #   history): a distribution (see loadgen.distributions)
    output = { min = 128, max = 512 }  # max_tokens: a distribution
    prefix_group = "docs"              # optional: a [[prefix_group]] name
    cache = "hit"                      # optional, needs prefix_group, default "hit": "hit" reuses one of the
                                       #   group's prefixes; "miss" sends a unique prefix of the same length

    [session]                          # optional: multi-turn sessions (the history is resent each turn)
    turns = { min = 3, max = 8 }       # turns per session: a distribution (>= 1)
    think_time_s = { median = 2.0, sigma = 0.5 }   # pause before each next turn: a distribution (>= 0)
    max_context_tokens = 32768         # optional: end the session before a turn would exceed this

    [sampling]                         # optional; sent in the request body
    temperature = 0.7
    top_p = 0.95
    ignore_eos = true                  # vLLM / SGLang extension: generate exactly max_tokens
    stop = ["\\n\\n"]                  # a string or a list of strings

    [slo]                              # optional; maps 1:1 to loadgen.snapshot.SLO
    ttft_p95_ms = 1000
    ttft_p99_ms = 2000
    decode_p50_tok_s = 20              # at least
    itl_p99_ms = 150
    e2e_p95_s = 30
    max_error_rate = 0.01              # 0..1

    [ramp]                             # optional; maps to loadgen.engine.RampPlan
    mode = "closed"                    # "closed" (levels = concurrency) | "open" (levels = req/s)
    levels = [1, 2, 4, 8]              # either explicit levels ...
    start = 1                          # ... or start/stop with factor (geometric) and/or step (linear):
    stop = 256                         #   next = max(level * factor, level + step), up to stop inclusive
                                       #   (closed: rounded half up, at least +1)
    factor = 2.0
    step = 4
    step_seconds = 30                  # default 30
    warmup_seconds = 5                 # default 5, < step_seconds
    early_stop = true                  # default false: stop at the first step that breaks the SLO

    [pricing]                          # optional
    usd_per_1m_input = 0.2
    usd_per_1m_output = 0.6
    usd_per_1m_cache_read = 0.05
    gpu_usd_per_hour = 3.5             # or price the hardware: cost per 1M output tokens from throughput
    gpus = 1

Line numbers: syntax errors take tomllib's line. For semantic errors the key's line is found by scanning the
source text for the table header (the N-th ``[[bucket]]`` for bucket N) and then the first ``key =`` line
before the next header (or a ``[table.key]`` sub-table header). This is a heuristic: it is right for
ordinary files, and falls back to the table header's line, then line 1.

Built-in profiles live in ``profiles/*.toml``, installed as the package ``loadgen.builtin_profiles``.
"""

from __future__ import annotations

import difflib
import hashlib
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from loadgen.config import SLO, SLO_KEYS, RampPlan
from loadgen.distributions import Distribution, DistributionError, parse_distribution

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

APIS = ("chat", "completions")
CACHE_CLASSES = ("hit", "miss")
RAMP_MODES = ("closed", "open")
PREFIX_ROLES = ("system", "user")
MAX_RAMP_LEVELS = 1000


class ProfileError(Exception):
    """A profile that cannot be used. ``str(err)`` is one line: ``file:line: where key 'k': what to do``."""

    def __init__(
        self, message: str, *, path: str = "", line: int | None = None, key: str | None = None
    ) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.key = key


# ---------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class PrefixGroup:
    name: str
    prefix_tokens: int
    count: int = 1


@dataclass(frozen=True, slots=True)
class Bucket:
    name: str
    weight: float
    input: Distribution  # prompt tokens beyond the prefix (and the session history)
    output: Distribution  # max_tokens
    prefix_group: str | None = None
    cache: str | None = None  # "hit" | "miss" | None (no prefix group)

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "weight": self.weight,
            "input": self.input.to_dict(),
            "output": self.output.to_dict(),
            "prefix_group": self.prefix_group,
            "cache": self.cache,
        }


@dataclass(frozen=True, slots=True)
class SessionSpec:
    turns: Distribution
    think_time_s: Distribution
    max_context_tokens: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "turns": self.turns.to_dict(),
            "think_time_s": self.think_time_s.to_dict(),
            "max_context_tokens": self.max_context_tokens,
        }


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    ignore_eos: bool | None = None
    stop: tuple[str, ...] = ()

    def extra_body(self) -> tuple[tuple[str, object], ...]:
        """Pairs merged into the request JSON (``RequestSpec.extra_body``); unset keys are left out."""
        pairs: list[tuple[str, object]] = []
        if self.temperature is not None:
            pairs.append(("temperature", self.temperature))
        if self.top_p is not None:
            pairs.append(("top_p", self.top_p))
        if self.ignore_eos is not None:
            pairs.append(("ignore_eos", self.ignore_eos))
        if self.stop:
            pairs.append(("stop", self.stop))
        return tuple(pairs)

    def to_dict(self) -> dict[str, object]:
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "ignore_eos": self.ignore_eos,
            "stop": list(self.stop),
        }


@dataclass(frozen=True, slots=True)
class Pricing:
    usd_per_1m_input: float | None = None
    usd_per_1m_output: float | None = None
    usd_per_1m_cache_read: float | None = None
    gpu_usd_per_hour: float | None = None  # per GPU
    gpus: int = 1

    def cost_per_1m_output_tokens(self, out_tok_s: float) -> float | None:
        """Hardware cost of 1M output tokens at an aggregate throughput; None without a GPU-hour price."""
        if self.gpu_usd_per_hour is None or not out_tok_s or out_tok_s <= 0:
            return None
        usd_per_s = self.gpu_usd_per_hour * self.gpus / 3600.0
        return usd_per_s / out_tok_s * 1e6

    def cost_usd(self, input_tokens: int, output_tokens: int, cached_tokens: int = 0) -> float | None:
        """Per-token price of a workload; cached input is billed at the cache-read price when one is set."""
        if self.usd_per_1m_input is None and self.usd_per_1m_output is None:
            return None
        in_price = self.usd_per_1m_input or 0.0
        cache_price = in_price if self.usd_per_1m_cache_read is None else self.usd_per_1m_cache_read
        uncached = max(0, input_tokens - cached_tokens)
        total = (
            uncached * in_price
            + cached_tokens * cache_price
            + output_tokens * (self.usd_per_1m_output or 0.0)
        )
        return total / 1e6

    def to_dict(self) -> dict[str, object]:
        return {
            "usd_per_1m_input": self.usd_per_1m_input,
            "usd_per_1m_output": self.usd_per_1m_output,
            "usd_per_1m_cache_read": self.usd_per_1m_cache_read,
            "gpu_usd_per_hour": self.gpu_usd_per_hour,
            "gpus": self.gpus,
        }


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    description: str
    source: str  # path of the file it was read from
    content_hash: str  # sha256 hex of the file's bytes: two records with the same hash ran the same workload
    api: str  # "chat" | "completions"
    model: str  # "auto" = discover
    buckets: tuple[Bucket, ...]
    prefix_groups: tuple[PrefixGroup, ...] = ()
    session: SessionSpec | None = None
    sampling: Sampling = field(default_factory=Sampling)
    slo: SLO = field(default_factory=SLO)
    ramp: RampPlan | None = None
    pricing: Pricing | None = None
    ramp_mode: str = "closed"  # what the ramp levels mean: concurrency ("closed") or req/s ("open")
    prefix_role: str = "system"  # chat API: the prefix is a "system" message or opens the first "user" one

    def ramp_plan(self) -> RampPlan | None:
        return self.ramp

    def prefix_group(self, name: str) -> PrefixGroup:
        for group in self.prefix_groups:
            if group.name == name:
                return group
        raise KeyError(name)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready description for run records."""
        ramp = None
        if self.ramp is not None:
            ramp = {
                "mode": self.ramp_mode,
                "levels": list(self.ramp.levels),
                "step_s": self.ramp.step_s,
                "warmup_s": self.ramp.warmup_s,
                "early_stop": self.ramp.early_stop,
            }
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "content_hash": self.content_hash,
            "api": self.api,
            "model": self.model,
            "prefix_role": self.prefix_role,
            "buckets": [b.to_dict() for b in self.buckets],
            "prefix_groups": [
                {"name": g.name, "prefix_tokens": g.prefix_tokens, "count": g.count}
                for g in self.prefix_groups
            ],
            "session": None if self.session is None else self.session.to_dict(),
            "sampling": self.sampling.to_dict(),
            "slo": {k: getattr(self.slo, k) for k in SLO_KEYS},
            "ramp": ramp,
            "pricing": None if self.pricing is None else self.pricing.to_dict(),
        }



# ---------------------------------------------------------------------------------------------- finding files


def _builtin_dir() -> Path:
    try:
        from importlib.resources import files

        folder = files("loadgen.builtin_profiles")
        path = Path(str(folder))
        if path.is_dir():
            return path
    except (ModuleNotFoundError, TypeError, ValueError):
        pass
    # Not installed (running from a checkout): the repo's profiles/ folder beside loadgen/.
    return Path(__file__).resolve().parent.parent / "profiles"


def builtin_profile_names() -> list[str]:
    return sorted(p.stem for p in _builtin_dir().glob("*.toml"))


def builtin_profile_path(name: str) -> Path:
    path = _builtin_dir() / f"{name}.toml"
    if not path.is_file():
        raise ProfileError(
            f"no built-in profile named '{name}'; built-ins: {', '.join(builtin_profile_names())}"
        )
    return path


def builtin_profile_text(name: str) -> str:
    return builtin_profile_path(name).read_text(encoding="utf-8")


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


def load_profile(name_or_path: str) -> Profile:
    """Load a built-in profile by name ("chat") or a profile file by path; raise ``ProfileError``."""
    looks_like_path = name_or_path.endswith(".toml") or os.sep in name_or_path or "/" in name_or_path
    path = Path(name_or_path).expanduser()
    if looks_like_path or path.is_file():
        if not path.is_file():
            raise ProfileError(f"{name_or_path}: no such profile file", path=name_or_path)
        display = name_or_path
    else:
        if name_or_path not in builtin_profile_names():
            raise ProfileError(
                f"unknown profile '{name_or_path}': not a file and not a built-in "
                f"({', '.join(builtin_profile_names())}); pass a built-in name or a path to a .toml file"
            )
        path = builtin_profile_path(name_or_path)
        display = _display(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProfileError(f"{display}: cannot read: {exc.strerror or exc}", path=display) from None
    return parse_profile(data, source=str(path.resolve()), display=display, default_name=path.stem)


def parse_profile(
    data: bytes | str, *, source: str = "<string>", display: str | None = None, default_name: str = "profile"
) -> Profile:
    """Validate TOML text (bytes or str) as a profile. ``display`` is the path shown in errors."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    shown = display or source
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ProfileError(
            f"{shown}:{line}: not UTF-8 text (byte {exc.start}); save the file as UTF-8",
            path=shown,
            line=line,
        ) from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        if m:
            line = int(m.group(1))
            what = msg[: m.start()].strip()
            detail = f"TOML syntax error: {what} (column {m.group(2)}); fix the TOML syntax"
        else:
            line = max(1, text.count("\n"))
            detail = f"TOML syntax error: {msg}; fix the TOML syntax"
        raise ProfileError(f"{shown}:{line}: {detail}", path=shown, line=line) from None
    reader = _Reader(shown, text)
    return reader.profile(
        doc, source=source, content_hash=hashlib.sha256(raw).hexdigest(), default_name=default_name
    )


# ---------------------------------------------------------------------------------------------- locating keys

_HEADER_RE = re.compile(r"^\s*(\[\[|\[)\s*([^\[\]]+?)\s*(\]\]|\])\s*(#.*)?$")


def _norm_name(name: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in name.split("."))


@dataclass(frozen=True, slots=True)
class _Where:
    table: str | None  # None = top level
    index: int | None = None  # for arrays of tables, 0-based
    label: str = "top level"


class _Locator:
    """Finds the line of a key by scanning the source: a heuristic, see the module docstring."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers: list[tuple[int, str, bool]] = []  # (0-based line, name, is_array)
        for i, line in enumerate(self.lines):
            m = _HEADER_RE.match(line)
            if m and (m.group(1) == "[[") == (m.group(3) == "]]"):
                self.headers.append((i, _norm_name(m.group(2)), m.group(1) == "[["))

    def _table_start(self, where: _Where) -> int | None:
        if where.table is None:
            return None
        seen = 0
        for i, name, _ in self.headers:
            if name == where.table:
                if where.index is None or seen == where.index:
                    return i
                seen += 1
        return None

    def _region_end(self, start: int) -> int:
        for i, _, _ in self.headers:
            if i > start:
                return i
        return len(self.lines)

    def _find_key(self, begin: int, end: int, key: str) -> int | None:
        pattern = re.compile(r"^\s*(\"|')?" + re.escape(key) + r"(\"|')?\s*(=|\.)")
        for i in range(begin, end):
            if pattern.match(self.lines[i]):
                return i
        return None

    def line(self, where: _Where, key: str | None) -> int:
        start = self._table_start(where)
        if where.table is not None and start is None:
            return 1
        begin = 0 if start is None else start + 1
        if key is None:
            return begin if start is not None else 1
        head = key.split(".")[0]
        found = self._find_key(begin, self._region_end(start if start is not None else -1), head)
        if found is not None:
            return found + 1
        # [table.key] sub-table after this table's header
        sub = f"{where.table}.{head}" if where.table else head
        for i, name, _ in self.headers:
            if i >= begin and name == sub:
                return i + 1
        return start + 1 if start is not None else 1


# ---------------------------------------------------------------------------------------------- validation


def _show(v: object) -> str:
    if isinstance(v, str):
        s = '"' + v + '"'
    elif isinstance(v, bool):
        s = "true" if v else "false"
    elif isinstance(v, dict):
        s = "a table"
    elif isinstance(v, list):
        s = "a list" if len(repr(v)) > 40 else repr(v)
    else:
        s = repr(v)
    return s if len(s) <= 48 else s[:45] + "..."


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class _Reader:
    def __init__(self, shown: str, text: str) -> None:
        self.shown = shown
        self.locator = _Locator(text)

    def fail(self, where: _Where, key: str | None, msg: str) -> NoReturn:
        line = self.locator.line(where, key)
        at = where.label if key is None else f"{where.label} key '{key}'"
        raise ProfileError(f"{self.shown}:{line}: {at}: {msg}", path=self.shown, line=line, key=key)

    # -- typed getters ---------------------------------------------------------------------------

    def check_keys(self, where: _Where, table: Mapping[str, object], allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for key in table:
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"did you mean '{close[0]}'? " if close else ""
                self.fail(where, key, f"unknown key; {hint}allowed: {', '.join(allowed)}")

    def string(
        self,
        where: _Where,
        table: Mapping[str, object],
        key: str,
        default: str | None,
        choices: tuple[str, ...] = (),
    ) -> str | None:
        if key not in table:
            return default
        v = table[key]
        if not isinstance(v, str) or not v.strip():
            expect = " | ".join(f'"{c}"' for c in choices) if choices else "a non-empty string"
            self.fail(where, key, f"expected {expect}, got {_show(v)}")
        if choices and v not in choices:
            self.fail(where, key, f"expected one of {' | '.join(repr(c) for c in choices)}, got {_show(v)}")
        return v

    def number(
        self,
        where: _Where,
        table: Mapping[str, object],
        key: str,
        default: float | None,
        *,
        minimum: float = 0.0,
        exclusive: bool = False,
        maximum: float | None = None,
        integer: bool = False,
    ) -> float | None:
        if key not in table:
            return default
        v = table[key]
        kind = "an integer" if integer else "a number"
        bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
        if maximum is not None:
            bound += f" and <= {maximum:g}"
        if not _is_number(v) or (integer and not isinstance(v, int)):
            self.fail(where, key, f"expected {kind} {bound}, got {_show(v)}")
        assert isinstance(v, (int, float))
        if v < minimum or (exclusive and v == minimum) or (maximum is not None and v > maximum):
            self.fail(where, key, f"expected {kind} {bound}, got {_show(v)}")
        return v

    def integer(
        self, where: _Where, table: Mapping[str, object], key: str, default: int | None, *, minimum: int = 1
    ) -> int | None:
        v = self.number(where, table, key, default, minimum=minimum, integer=True)
        return None if v is None else int(v)

    def boolean(
        self, where: _Where, table: Mapping[str, object], key: str, default: bool | None
    ) -> bool | None:
        if key not in table:
            return default
        v = table[key]
        if not isinstance(v, bool):
            self.fail(where, key, f"expected true or false, got {_show(v)}")
        return v

    def dist(self, where: _Where, table: Mapping[str, object], key: str, *, integer: bool) -> Distribution:
        try:
            return parse_distribution(table[key], integer=integer)
        except DistributionError as exc:
            self.fail(where, key, str(exc))

    def section(self, doc: Mapping[str, object], key: str) -> dict[str, object] | None:
        if key not in doc:
            return None
        v = doc[key]
        if not isinstance(v, dict):
            self.fail(_Where(None), key, f"expected a [{key}] table, got {_show(v)}")
        return v

    def array_of_tables(self, doc: Mapping[str, object], key: str) -> list[dict[str, object]]:
        if key not in doc:
            return []
        v = doc[key]
        if isinstance(v, dict):
            line_where = _Where(key, None, f"[{key}]")
            self.fail(
                line_where, None, f"write [[{key}]] (double brackets: one table per {key}), not [{key}]"
            )
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            self.fail(_Where(None), key, f"expected [[{key}]] tables, got {_show(v)}")
        return v

    # -- sections --------------------------------------------------------------------------------

    def profile(
        self, doc: dict[str, object], *, source: str, content_hash: str, default_name: str
    ) -> Profile:
        top = _Where(None)
        self.check_keys(
            top,
            doc,
            (
                "name",
                "description",
                "target",
                "prefix_group",
                "bucket",
                "session",
                "sampling",
                "slo",
                "ramp",
                "pricing",
            ),
        )
        name = self.string(top, doc, "name", default_name) or default_name
        description = self.string(top, doc, "description", "") or ""

        target = self.section(doc, "target") or {}
        tw = _Where("target", None, "[target]")
        self.check_keys(tw, target, ("api", "model", "prefix_role"))
        api = self.string(tw, target, "api", "chat", APIS) or "chat"
        model = self.string(tw, target, "model", "auto") or "auto"
        prefix_role = self.string(tw, target, "prefix_role", "system", PREFIX_ROLES) or "system"

        groups = self.prefix_groups(self.array_of_tables(doc, "prefix_group"))
        buckets = self.buckets(self.array_of_tables(doc, "bucket"), groups)
        ramp_table = self.section(doc, "ramp")
        ramp = self.ramp(ramp_table)
        ramp_mode = (
            self.string(_Where("ramp", None, "[ramp]"), ramp_table or {}, "mode", "closed", RAMP_MODES)
            or "closed"
        )

        return Profile(
            name=name,
            description=description,
            source=source,
            content_hash=content_hash,
            api=api,
            model=model,
            prefix_role=prefix_role,
            buckets=buckets,
            prefix_groups=groups,
            session=self.session(self.section(doc, "session")),
            sampling=self.sampling(self.section(doc, "sampling")),
            slo=self.slo(self.section(doc, "slo")),
            ramp=ramp,
            pricing=self.pricing(self.section(doc, "pricing")),
            ramp_mode=ramp_mode,
        )

    def prefix_groups(self, tables: list[dict[str, object]]) -> tuple[PrefixGroup, ...]:
        out: list[PrefixGroup] = []
        for i, t in enumerate(tables):
            label = f"[[prefix_group]] #{i + 1}"
            if isinstance(t.get("name"), str):
                label += f' "{t["name"]}"'
            w = _Where("prefix_group", i, label)
            self.check_keys(w, t, ("name", "prefix_tokens", "count"))
            if "name" not in t:
                self.fail(
                    w, None, "missing key 'name': every [[prefix_group]] needs a name that buckets refer to"
                )
            name = self.string(w, t, "name", None)
            assert name is not None
            if any(g.name == name for g in out):
                self.fail(
                    w,
                    "name",
                    f'a [[prefix_group]] named "{name}" already exists; give each group its own name',
                )
            if "prefix_tokens" not in t:
                self.fail(
                    w, None, "missing key 'prefix_tokens' (the length of each shared prefix, in tokens)"
                )
            prefix_tokens = self.integer(w, t, "prefix_tokens", None)
            count = self.integer(w, t, "count", 1)
            assert prefix_tokens is not None and count is not None
            out.append(PrefixGroup(name, prefix_tokens, count))
        return tuple(out)

    def buckets(self, tables: list[dict[str, object]], groups: tuple[PrefixGroup, ...]) -> tuple[Bucket, ...]:
        if not tables:
            self.fail(
                _Where(None),
                None,
                "no [[bucket]]: add at least one [[bucket]] with 'input' and 'output' token counts",
            )
        out: list[Bucket] = []
        for i, t in enumerate(tables):
            label = f"[[bucket]] #{i + 1}"
            if isinstance(t.get("name"), str):
                label += f' "{t["name"]}"'
            w = _Where("bucket", i, label)
            self.check_keys(w, t, ("name", "weight", "input", "output", "prefix_group", "cache"))
            name = self.string(w, t, "name", f"bucket{i + 1}") or f"bucket{i + 1}"
            if any(b.name == name for b in out):
                self.fail(
                    w, "name", f'a [[bucket]] named "{name}" already exists; give each bucket its own name'
                )
            weight = self.number(w, t, "weight", 1.0)
            for key in ("input", "output"):
                if key not in t:
                    self.fail(
                        w,
                        None,
                        f"missing key '{key}': give a token count or a distribution table, e.g. {key} = 512",
                    )
            input_dist = self.dist(w, t, "input", integer=True)
            output_dist = self.dist(w, t, "output", integer=True)
            group = self.string(w, t, "prefix_group", None)
            if group is not None and not any(g.name == group for g in groups):
                defined = ", ".join(g.name for g in groups) or "none"
                self.fail(
                    w,
                    "prefix_group",
                    f'no [[prefix_group]] named "{group}" (defined: {defined}); add it or fix the name',
                )
            cache = self.string(w, t, "cache", None, CACHE_CLASSES)
            if cache is not None and group is None:
                self.fail(
                    w, "cache", "cache = hit/miss needs a prefix_group (the prefix that hits or misses)"
                )
            if group is not None and cache is None:
                cache = "hit"
            assert weight is not None
            out.append(Bucket(name, float(weight), input_dist, output_dist, group, cache))
        if sum(b.weight for b in out) <= 0:
            self.fail(
                _Where("bucket", 0, "[[bucket]] #1"),
                "weight",
                "all bucket weights are 0: give at least one bucket a weight > 0",
            )
        return tuple(out)

    def session(self, t: dict[str, object] | None) -> SessionSpec | None:
        if t is None:
            return None
        w = _Where("session", None, "[session]")
        self.check_keys(w, t, ("turns", "think_time_s", "max_context_tokens"))
        if "turns" not in t:
            self.fail(w, None, "missing key 'turns': turns per session, a number or a distribution table")
        turns = self.dist(w, t, "turns", integer=True)
        think = (
            self.dist(w, t, "think_time_s", integer=False)
            if "think_time_s" in t
            else parse_distribution(0, integer=False)
        )
        max_ctx = self.integer(w, t, "max_context_tokens", None)
        return SessionSpec(turns, think, max_ctx)

    def sampling(self, t: dict[str, object] | None) -> Sampling:
        if t is None:
            return Sampling()
        w = _Where("sampling", None, "[sampling]")
        self.check_keys(w, t, ("temperature", "top_p", "ignore_eos", "stop"))
        temperature = self.number(w, t, "temperature", None, maximum=2.0)
        top_p = self.number(w, t, "top_p", None, exclusive=True, maximum=1.0)
        ignore_eos = self.boolean(w, t, "ignore_eos", None)
        stop: tuple[str, ...] = ()
        if "stop" in t:
            v = t["stop"]
            if isinstance(v, str):
                v = [v]
            if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
                self.fail(
                    w, "stop", f"expected a string or a list of non-empty strings, got {_show(t['stop'])}"
                )
            stop = tuple(v)
        return Sampling(temperature, top_p, ignore_eos, stop)

    def slo(self, t: dict[str, object] | None) -> SLO:
        if t is None:
            return SLO()
        w = _Where("slo", None, "[slo]")
        self.check_keys(w, t, SLO_KEYS)
        values: dict[str, float | None] = {}
        for key in SLO_KEYS:
            maximum = 1.0 if key == "max_error_rate" else None
            values[key] = self.number(w, t, key, None, exclusive=key != "max_error_rate", maximum=maximum)
        return SLO(**values)

    def ramp(self, t: dict[str, object] | None) -> RampPlan | None:
        if t is None:
            return None
        w = _Where("ramp", None, "[ramp]")
        self.check_keys(
            w,
            t,
            (
                "mode",
                "levels",
                "start",
                "stop",
                "factor",
                "step",
                "step_seconds",
                "warmup_seconds",
                "early_stop",
            ),
        )
        mode = self.string(w, t, "mode", "closed", RAMP_MODES) or "closed"
        closed = mode == "closed"
        step_s = self.number(w, t, "step_seconds", 30.0, exclusive=True)
        warmup_s = self.number(w, t, "warmup_seconds", 5.0)
        assert step_s is not None and warmup_s is not None
        if warmup_s >= step_s:
            self.fail(
                w,
                "warmup_seconds",
                f"warm-up ({warmup_s:g} s) must be shorter than step_seconds ({step_s:g} s)",
            )
        early_stop = self.boolean(w, t, "early_stop", False)
        unit = "concurrency (a positive integer)" if closed else "rate in req/s (a number > 0)"
        geometric_keys = [k for k in ("start", "stop", "factor", "step") if k in t]
        if "levels" in t:
            if geometric_keys:
                self.fail(w, geometric_keys[0], "give either 'levels' or start/stop/factor/step, not both")
            raw = t["levels"]
            if not isinstance(raw, list) or not raw:
                self.fail(
                    w, "levels", f"expected a non-empty list of levels, each a {unit}, got {_show(raw)}"
                )
            for v in raw:
                bad = not _is_number(v) or v <= 0 or (closed and not isinstance(v, int))
                if bad:
                    self.fail(w, "levels", f'each level must be a {unit} in mode = "{mode}", got {_show(v)}')
            levels = tuple(int(v) if closed else float(v) for v in raw)
        elif geometric_keys:
            levels = self._ramp_series(w, t, closed, unit)
        else:
            self.fail(w, None, "give 'levels = [1, 2, 4, 8]' or start/stop with factor and/or step")
        return RampPlan(
            levels=levels,
            step_s=float(step_s),
            warmup_s=float(warmup_s),
            early_stop=bool(early_stop),
            mode="closed" if closed else "open",
        )

    def _ramp_series(self, w: _Where, t: dict[str, object], closed: bool, unit: str) -> tuple[float, ...]:
        for key in ("start", "stop"):
            if key not in t:
                self.fail(w, None, f"missing key '{key}': a {unit}")
        start = self.number(w, t, "start", None, exclusive=True, integer=closed)
        stop = self.number(w, t, "stop", None, exclusive=True, integer=closed)
        factor = self.number(w, t, "factor", None, minimum=1.0, exclusive=True)
        step = self.number(w, t, "step", None, exclusive=True)
        assert start is not None and stop is not None
        if stop < start:
            self.fail(w, "stop", f"stop ({stop:g}) is below start ({start:g})")
        if factor is None and step is None:
            self.fail(w, None, "give 'factor' (geometric, e.g. 2) and/or 'step' (linear) beside start/stop")
        levels: list[float] = []
        level: float = start
        while level <= stop * (1 + 1e-9):
            levels.append(level if closed else float(level))
            if len(levels) > MAX_RAMP_LEVELS:
                self.fail(
                    w,
                    "factor" if factor else "step",
                    f"more than {MAX_RAMP_LEVELS} levels: use a larger factor or step",
                )
            nxt = level * factor if factor is not None else level
            if step is not None:
                nxt = max(nxt, level + step)
            if closed:
                # Each level is the previous one times the factor, rounded half up; concurrency must move.
                nxt = max(int(math.floor(nxt + 0.5)), int(level) + 1)
            else:
                nxt = round(nxt, 6)
            level = nxt
        return tuple(levels)

    def pricing(self, t: dict[str, object] | None) -> Pricing | None:
        if t is None:
            return None
        w = _Where("pricing", None, "[pricing]")
        keys = ("usd_per_1m_input", "usd_per_1m_output", "usd_per_1m_cache_read", "gpu_usd_per_hour", "gpus")
        self.check_keys(w, t, keys)
        gpus = self.integer(w, t, "gpus", 1)
        assert gpus is not None
        return Pricing(
            usd_per_1m_input=self.number(w, t, "usd_per_1m_input", None),
            usd_per_1m_output=self.number(w, t, "usd_per_1m_output", None),
            usd_per_1m_cache_read=self.number(w, t, "usd_per_1m_cache_read", None),
            gpu_usd_per_hour=self.number(w, t, "gpu_usd_per_hour", None),
            gpus=gpus,
        )


def context_overflow(
    profile: Profile, max_model_len: int, draws: int = 20_000, seed: int = 0
) -> tuple[float, int] | None:
    """The share of requests whose prompt + max_tokens would exceed ``max_model_len`` (a server rejects
    them, vLLM with HTTP 400), estimated by drawing from the profile, and the largest ask seen; None for a
    session profile (its context grows turn by turn: see its ``max_context_tokens``) or when none overflow.
    """
    import random

    if profile.session is not None or max_model_len <= 0 or not profile.buckets:
        return None
    rng = random.Random(seed)
    prefixes = {g.name: g.prefix_tokens for g in profile.prefix_groups}
    weights = [b.weight for b in profile.buckets]
    over = largest = 0
    for bucket in rng.choices(profile.buckets, weights=weights, k=draws):
        ask = prefixes.get(bucket.prefix_group or "", 0) + int(bucket.input.sample(rng))
        ask += int(bucket.output.sample(rng))
        largest = max(largest, ask)
        over += ask > max_model_len
    return (over / draws, largest) if over else None
