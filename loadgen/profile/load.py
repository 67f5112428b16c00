"""TOML → ``Profile``: finding a profile (a built-in name or a path), decoding and parsing it, and
validating every table once, with each problem raised as a one-line ``ProfileError``
(``file:line: where key 'k': what to do``). The schema is in ``loadgen.profile``'s docstring.

Built-in profiles live in ``profiles/*.toml``, installed as the package ``loadgen.builtin_profiles``.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

from loadgen.config import APIS, SLO, SLO_KEYS, Api
from loadgen.distributions import parse_distribution
from loadgen.profile.context import largest_tokens
from loadgen.profile.fields import FieldReader, Where, show_value
from loadgen.profile.model import (
    CACHE_CLASSES,
    PREFIX_ROLES,
    Bucket,
    CacheClass,
    PrefixGroup,
    PrefixRole,
    Pricing,
    Profile,
    ProfileError,
    Sampling,
    SessionSpec,
)
from loadgen.profile.quality import read_quality
from loadgen.profile.ramp import read_ramp
from loadgen.profile.source import read_source
from loadgen.profile.tools import read_tools
from loadgen.sources.model import MAX_TOKENS

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

TOP_KEYS = (
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
    "dataset",
    "trace",
    "tools",
    "quality",
)


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
    return Path(__file__).resolve().parents[2] / "profiles"


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


def _too_long(shown: str, text: str) -> ProfileError:
    """The error for a profile holding an integer past Python's digit limit, at its line and key."""
    limit = sys.get_int_max_str_digits()
    found = re.search(rf"^\s*([\w.\"'-]+)\s*=\s*[+-]?\d{{{limit + 1},}}", text, re.M)
    if found is None:
        return ProfileError(
            f"{shown}: an integer of more than {limit:,} digits: not a number ramp can use", path=shown
        )
    line = text.count("\n", 0, found.start(1)) + 1
    key = found.group(1).strip("\"'")
    return ProfileError(
        f"{shown}:{line}: key {key!r}: an integer of more than {limit:,} digits: not a number ramp can use",
        path=shown,
        line=line,
        key=key,
    )


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
    except RecursionError:
        raise ProfileError(f"{shown}: TOML nested too deeply to read", path=shown) from None
    except ValueError:  # tomllib's int() of more digits than Python reads (4,300): a plain ValueError
        raise _too_long(shown, text) from None
    reader = ProfileReader(shown, text)
    return reader.profile(
        doc, source=source, content_hash=hashlib.sha256(raw).hexdigest(), default_name=default_name
    )


class ProfileReader(FieldReader):
    """The profile's tables, one method each, on top of the typed getters."""

    def profile(
        self, doc: dict[str, object], *, source: str, content_hash: str, default_name: str
    ) -> Profile:
        top = Where(None)
        self.check_keys(top, doc, TOP_KEYS)
        name = self.string(top, doc, "name", default_name) or default_name
        description = self.string(top, doc, "description", "") or ""

        target = self.section(doc, "target") or {}
        tw = Where("target", None, "[target]")
        self.check_keys(tw, target, ("api", "model", "prefix_role"))
        api: Api = self.choice(tw, target, "api", "chat", APIS)
        model = self.string(tw, target, "model", "auto") or "auto"
        prefix_role: PrefixRole = self.choice(tw, target, "prefix_role", "system", PREFIX_ROLES)

        groups = self.prefix_groups(self.array_of_tables(doc, "prefix_group"))
        buckets = self.buckets(self.array_of_tables(doc, "bucket"), groups)
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
            ramp=read_ramp(self, self.section(doc, "ramp")),
            pricing=self.pricing(self.section(doc, "pricing")),
            replay=read_source(self, self.section(doc, "dataset"), self.section(doc, "trace"), source),
            tools=read_tools(self, self.section(doc, "tools"), api),
            quality=read_quality(self, self.section(doc, "quality")),
        )

    def prefix_groups(self, tables: list[dict[str, object]]) -> tuple[PrefixGroup, ...]:
        out: list[PrefixGroup] = []
        for i, t in enumerate(tables):
            w = Where.item("prefix_group", i, t)
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
                Where(None),
                None,
                "no [[bucket]]: add at least one [[bucket]] with 'input' and 'output' token counts",
            )
        out: list[Bucket] = []
        for i, t in enumerate(tables):
            w = Where.item("bucket", i, t)
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
            for key, dist in (("input", input_dist), ("output", output_dist)):
                top = largest_tokens(dist)
                if top is not None and top > MAX_TOKENS:
                    self.fail(w, key, f"{top:,} tokens is past any model's context (at most {MAX_TOKENS:,})")
            group = self.string(w, t, "prefix_group", None)
            if group is not None and not any(g.name == group for g in groups):
                defined = ", ".join(g.name for g in groups) or "none"
                self.fail(
                    w,
                    "prefix_group",
                    f'no [[prefix_group]] named "{group}" (defined: {defined}); add it or fix the name',
                )
            cache: CacheClass | None = (
                self.choice(w, t, "cache", "hit", CACHE_CLASSES) if "cache" in t else None
            )
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
                Where("bucket", 0, "[[bucket]] #1"),
                "weight",
                "all bucket weights are 0: give at least one bucket a weight > 0",
            )
        return tuple(out)

    def session(self, t: dict[str, object] | None) -> SessionSpec | None:
        if t is None:
            return None
        w = Where("session", None, "[session]")
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
        w = Where("sampling", None, "[sampling]")
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
                    w,
                    "stop",
                    f"expected a string or a list of non-empty strings, got {show_value(t['stop'])}",
                )
            stop = tuple(v)
        return Sampling(temperature, top_p, ignore_eos, stop)

    def slo(self, t: dict[str, object] | None) -> SLO:
        if t is None:
            return SLO()
        w = Where("slo", None, "[slo]")
        self.check_keys(w, t, SLO_KEYS)
        values: dict[str, float | None] = {}
        for key in SLO_KEYS:
            maximum = 1.0 if key in ("max_error_rate", "quality_agree_min") else None
            values[key] = self.number(w, t, key, None, exclusive=key != "max_error_rate", maximum=maximum)
        return SLO(**values)

    def pricing(self, t: dict[str, object] | None) -> Pricing | None:
        if t is None:
            return None
        w = Where("pricing", None, "[pricing]")
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
