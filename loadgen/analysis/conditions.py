"""The conditions a run was measured under, read from its record, and how two or more runs differ in them.

A comparison means something only when everything but the variable under test was the same: the model and
its revision, the runtime and its version, the GPUs (model, count, interconnect), precision, quantization,
KV-cache dtype, parallel layout, speculative decoding, the server's other settings, the profile's content
(distributions, prefixes, sessions, sampling), the API, the arrival pattern and the levels, the window
lengths, warm or cold and the prefix cache's state, the SLO, the seed policy, the client side (workers,
transport, context fitting, the open loop's --max-concurrency cap) and which steps were client-bound. Each is read from the header (the server's
own report in ``server_conditions`` first, then the operator's ``--tag``) or from the steps.

Each condition has the ``--vary`` names that cover it: its key, a short name (``revision`` for
``model_revision``) and groups (``runtime`` covers the version too, ``profile`` every profile path, ``gpu``
model and count; a tag it reads as ``tag:KEY``). A difference the user did not name is what refuses a
comparison. Values are compared as they read (``8`` from the server and ``"8"`` from a tag are the same).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from loadgen.analysis.runs import Run, level_key
from loadgen.format import fmt_setting

__all__ = [
    "CLIENT_BOUND",
    "Condition",
    "Difference",
    "conditions_of",
    "differences",
    "show",
    "unknown_vary",
    "vary_names",
]

UNKNOWN = "unknown"
CLIENT_BOUND = "client_bound"  # the levels a run was client-bound at: a refusal says which run and what to do
PROFILE_PARTS = ("buckets", "prefix_groups", "prefix_role", "session", "sampling")
# A replayed file is compared by its content and options, not by its path
REPLAY_PARTS = ("kind", "content_hash", "format", "dataset", "trace")
# server_conditions keys read under a condition's own name, or that say nothing about the conditions
_SERVER_READ = frozenset(
    {
        "runtime", "version", "model", "model_path", "max_model_len", "gpu_name", "gpu_count", "dtype",
        "quantization", "kv_cache_dtype", "tp_size", "pp_size", "dp_size", "ep_size", "prefix_caching",
        "speculative_algorithm", "speculative_num_draft_tokens", "speculative_draft_model", "reachable",
        "error",
    }
)  # fmt: skip
_REVISION_TAGS = ("revision", "model_revision")


@dataclass(frozen=True, slots=True)
class Condition:
    value: object  # JSON-ready; None: unknown
    vary: str  # the --vary name to suggest for it
    covers: frozenset[str]  # every --vary name that covers it


@dataclass(frozen=True, slots=True)
class Difference:
    key: str  # the condition, or a path inside it ("profile.buckets[0].output.max")
    values: tuple[object, ...]  # one per run, JSON-ready
    varied: bool
    vary: str


def show(value: object, unset: str = UNKNOWN) -> str:
    """A condition's value as it reads in a comparison."""
    if value is None:
        return unset
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return fmt_setting(value)
    if isinstance(value, list | tuple):
        return ", ".join(show(v, unset) for v in value) or "none"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={show(v, unset)}" for k, v in value.items()) or "none"
    return str(value)


# ---- reading one run --------------------------------------------------------------------------------------


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True, slots=True)
class _Sources:
    header: Mapping[str, object]
    server: Mapping[str, object]
    tags: Mapping[str, object]

    def first(self, header: str = "", server: str = "", tags: Sequence[str] = ()) -> object:
        """The header's value, else the server's own report, else the operator's tag."""
        for value in (
            self.header.get(header) if header else None,
            self.server.get(server) if server else None,
        ):
            if value not in (None, ""):
                return value
        return next((self.tags[t] for t in tags if self.tags.get(t) not in (None, "")), None)


def _on_off(value: object) -> object:
    return ("on" if value else "off") if isinstance(value, bool) else value


def _parallel(src: _Sources) -> object:
    sizes = [(name, src.server.get(f"{name}_size")) for name in ("tp", "pp", "dp", "ep")]
    known = [f"{name}={size}" for name, size in sizes if size is not None]
    if known:
        return " ".join(known)
    tp = src.first(tags=("tp",))
    return src.first(tags=("parallel",)) or (None if tp is None else f"tp={tp}")


def _speculative(src: _Sources) -> object:
    algorithm = src.server.get("speculative_algorithm")
    if algorithm in (None, ""):
        drafts = src.server.get("speculative_num_draft_tokens")
        return f"{drafts} draft tokens" if drafts else src.first(tags=("speculative", "spec"))
    parts = [str(algorithm)]
    if src.server.get("speculative_num_draft_tokens"):
        parts.append(f"{src.server['speculative_num_draft_tokens']} draft tokens")
    if src.server.get("speculative_draft_model"):
        parts.append(f"draft {src.server['speculative_draft_model']}")
    return ", ".join(parts)


def _plan(src: _Sources, key: str) -> object:
    return _mapping(src.header.get("plan")).get(key)


def _slo(src: _Sources) -> object:
    clauses = {k: v for k, v in _mapping(src.header.get("slo")).items() if v is not None}
    return show(clauses) if clauses else "none"


def _replayed(src: _Sources) -> Mapping[str, object]:
    """The source the run replayed (``profile_content.replay``: a dataset, trace or request file), or {}."""
    return _mapping(_mapping(src.header.get("profile_content")).get("replay"))


def _seed(src: _Sources) -> object:
    if _replayed(src).get("kind") == "requests":
        return "none: a request file"  # its prompts are in the file, whatever the seed
    source = src.header.get("seed_source")
    if source == "given":
        return f"given {src.header.get('seed')}"
    return source


def _profile(src: _Sources) -> object:
    content = _mapping(src.header.get("profile_content"))
    replay = _replayed(src)
    if replay.get("kind") == "requests":
        # The same request file is the same workload, whatever profile carried it: only its sampling is sent.
        return {"requests": replay.get("content_hash"), "sampling": content.get("sampling")}
    parts = {part: content.get(part) for part in PROFILE_PARTS} if content else None
    if parts is not None and replay:
        parts["replay"] = {key: replay.get(key) for key in REPLAY_PARTS}
    return parts


def _cold(src: _Sources) -> object:
    cold = src.header.get("cold_start")
    return None if cold is None else ("cold" if cold else "warm")


@dataclass(frozen=True, slots=True)
class _Named:
    key: str
    read: Callable[[_Sources], object]
    vary: str = ""  # default: the key
    groups: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()  # tags it reads (covered by --vary tag:KEY, not listed again as tags)


def _get(header: str = "", server: str = "", tags: tuple[str, ...] = ()) -> Callable[[_Sources], object]:
    return lambda src: src.first(header, server, tags)


_NAMED: tuple[_Named, ...] = (
    _Named("model", _get("model", "model")),
    _Named("model_revision", _get("model_revision"), "revision"),
    _Named("runtime", _get("runtime", "runtime")),
    _Named("runtime_version", _get("runtime_version", "version"), "runtime"),
    _Named("gpu_model", _get("", "gpu_name", ("gpu", "gpu_model", "gpu_name")), "gpu", tags=("gpu", "gpu_model", "gpu_name")),
    _Named("gpu_count", _get("", "gpu_count", ("gpus", "gpu_count")), "gpu", tags=("gpus", "gpu_count")),
    _Named("interconnect", _get("", "", ("interconnect",)), tags=("interconnect",)),
    _Named("dtype", _get("", "dtype", ("dtype", "precision")), groups=("precision",), tags=("dtype", "precision")),
    _Named("quantization", _get("", "quantization", ("quantization", "quant")), tags=("quantization", "quant")),
    _Named("kv_cache_dtype", _get("", "kv_cache_dtype", ("kv_cache_dtype", "kv_dtype")), "kv_dtype", tags=("kv_cache_dtype", "kv_dtype")),
    _Named("parallel", _parallel, tags=("parallel", "tp")),
    _Named("speculative", _speculative, groups=("spec",), tags=("speculative", "spec")),
    _Named("prefix_caching", lambda s: _on_off(s.first("", "prefix_caching", ("prefix_caching",))), groups=("cache",), tags=("prefix_caching",)),
    _Named("max_model_len", _get("max_model_len", "max_model_len"), groups=("server",)),
    _Named("profile", _profile),
    _Named("api", _get("api")),
    _Named("mode", _get("mode")),
    _Named("arrival", _get("arrival")),
    _Named("levels", lambda s: _plan(s, "levels"), groups=("plan",)),
    _Named("step_s", lambda s: _plan(s, "step_s"), groups=("plan", "windows")),
    _Named("warmup_s", lambda s: _plan(s, "warmup_s"), groups=("plan", "windows")),
    _Named("cold_start", _cold, groups=("warm", "cache")),
    _Named("cache_reset", lambda s: s.header.get("reset_prefix_cache") or "never", groups=("cache",)),
    _Named("slo", _slo),
    _Named("seed", _seed),
    _Named("workers", _get("workers"), groups=("client",)),
    _Named("transport", _get("transport"), groups=("client",)),
    _Named("fit_context", lambda s: _on_off(s.header.get("fit_context")), groups=("client",)),
)  # fmt: skip
_TAGS_READ = frozenset(t for named in _NAMED for t in named.tags) | frozenset(_REVISION_TAGS)


def _condition(named: _Named, value: object) -> Condition:
    vary = named.vary or named.key
    covers = {named.key, vary, *named.groups, *(f"tag:{t}" for t in named.tags)}
    return Condition(value, vary, frozenset(covers))


def _client_bound(run: Run) -> object:
    levels = sorted({level_key(s) for s in run.steps if s.client_bound})
    return [key.label for key in levels] or "none"


def _cap(run: Run) -> object:
    """The open loop's --max-concurrency cap (its steps' ``level``: 0 = none); "closed loop" without one."""
    caps = sorted({s.level for s in run.steps if s.mode == "open"})
    if not caps:
        return "closed loop"
    return ", ".join("none" if cap == 0 else str(cap) for cap in caps)


def conditions_of(run: Run) -> dict[str, Condition]:
    """Every condition of ``run``, named ones first, then the server's other settings, then other tags."""
    header = run.header
    src = _Sources(header, _mapping(header.get("server_conditions")), _mapping(header.get("tags")))
    found = {named.key: _condition(named, named.read(src)) for named in _NAMED}
    found["max_concurrency"] = Condition(
        _cap(run), "max_concurrency", frozenset({"max_concurrency", "client"})
    )
    found[CLIENT_BOUND] = Condition(_client_bound(run), CLIENT_BOUND, frozenset({CLIENT_BOUND, "client"}))
    for key, value in src.server.items():
        # the telemetry merges the tags into the server's conditions: a tag is read as a tag, once
        if key not in _SERVER_READ and key not in src.tags:
            found[f"server:{key}"] = Condition(value, f"server:{key}", frozenset({f"server:{key}", "server"}))
    for key, value in sorted(src.tags.items()):
        if key not in _TAGS_READ:
            found[f"tag:{key}"] = Condition(value, f"tag:{key}", frozenset({f"tag:{key}"}))
    return found


# ---- comparing runs ---------------------------------------------------------------------------------------


def _leaves(value: object, path: str) -> Iterator[tuple[str, object]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(value, list | tuple) and value and any(isinstance(v, Mapping | list) for v in value):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


_ABSENT = object()


def _differing(key: str, values: Sequence[object]) -> list[tuple[str, tuple[object, ...]]]:
    """(path, values) of each difference: the condition itself, or each leaf of the profile that differs."""
    if key != "profile" or any(v is None for v in values):
        return [] if len({show(v) for v in values}) == 1 else [(key, tuple(values))]
    trees = [dict(_leaves(v, key)) for v in values]
    paths = list(dict.fromkeys(p for tree in trees for p in tree))
    out = []
    for path in paths:
        leaf = tuple(tree.get(path, _ABSENT) for tree in trees)
        if len({"\0absent" if v is _ABSENT else show(v, "unset") for v in leaf}) > 1:
            out.append((path, tuple(None if v is _ABSENT else v for v in leaf)))
    return out


def differences(runs: Sequence[Run], vary: Sequence[str]) -> list[Difference]:
    """Every condition (or profile path) whose value is not the same in all runs, varied or not."""
    per_run = [conditions_of(run) for run in runs]
    keys = list(dict.fromkeys(k for conditions in per_run for k in conditions))
    out = []
    for key in keys:
        condition = next(c[key] for c in per_run if key in c)
        values = [c[key].value if key in c else None for c in per_run]
        varied = bool(condition.covers & set(vary))
        for path, leaf_values in _differing(key, values):
            out.append(Difference(path, leaf_values, varied, condition.vary))
    return out


def vary_names(runs: Sequence[Run]) -> list[str]:
    """The --vary names these runs' conditions answer to (``tag:KEY`` for any tag besides)."""
    names = {name for run in runs for c in conditions_of(run).values() for name in c.covers}
    return sorted(names)


def unknown_vary(runs: Sequence[Run], vary: Sequence[str]) -> list[str]:
    known = set(vary_names(runs))
    return [v for v in vary if v not in known and not (v.startswith("tag:") and len(v) > 4)]
