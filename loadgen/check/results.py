"""What ``ramp check`` found: one ``CheckResult`` per check (pass / fail / n/a, a one-line reason, whether
it is required), the ``CheckReport`` of a whole check, its verdict and its two renderings (text, JSON).

Required checks are what ramp and the OpenAI SDK cannot do without (a model list, chat streamed and not,
the usage chunk, ``max_tokens``, the error shape, the ramp); the rest are advisory: worth knowing, never
failing the check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CheckReport", "CheckResult", "Status"]

Status = Literal["pass", "fail", "n/a"]
_MARK: dict[Status, str] = {"pass": "PASS", "fail": "FAIL", "n/a": "n/a "}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check: its name, its status, why (one line), required or advisory, and any figures it measured."""

    name: str
    status: Status
    reason: str
    required: bool = False
    data: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "status": self.status,
            "required": self.required,
            "reason": self.reason,
            "data": self.data,
        }


@dataclass
class CheckReport:
    """Every check of one ``ramp check`` run, in the order they ran, and what the server is."""

    url: str
    model: str | None = None
    runtime: str | None = None
    runtime_version: str | None = None
    checks: list[CheckResult] = field(default_factory=list)
    ratelimit: dict[str, str] = field(default_factory=dict)  # the latest x-ratelimit-* headers seen
    elapsed_s: float = 0.0
    unreachable: bool = False  # the probe failed: no check beyond it ran (``ramp check`` exits 3)

    def add(self, result: CheckResult) -> CheckResult:
        self.checks.append(result)
        return result

    @property
    def ok(self) -> bool:
        """Every required check passed or did not apply (an n/a never fails a check)."""
        return not any(c.required and c.status == "fail" for c in self.checks)

    def counts(self, required: bool) -> dict[Status, int]:
        out: dict[Status, int] = {"pass": 0, "fail": 0, "n/a": 0}
        for c in self.checks:
            if c.required == required:
                out[c.status] += 1
        return out

    def summary(self) -> str:
        req, adv = self.counts(True), self.counts(False)
        verdict = "OK" if self.ok else "FAILED"
        failed = [c.name for c in self.checks if c.required and c.status == "fail"]
        head = f"{verdict}: {req['pass']} of {sum(req.values())} required checks pass"
        if req["n/a"]:
            head += f", {req['n/a']} n/a"
        if failed:
            head += f" (failing: {', '.join(failed)})"
        tail = f"; advisory: {adv['pass']} pass, {adv['fail']} fail, {adv['n/a']} n/a"
        return f"{head}{tail} ({self.elapsed_s:.1f} s)"

    def text(self) -> str:
        """The report for a terminal: a header, one line per check, the verdict."""
        served = self.model or "?"
        runtime = f" · {self.runtime} {self.runtime_version or ''}".rstrip() if self.runtime else ""
        lines = [f"ramp check {self.url} · model {served}{runtime}", ""]
        width = max((len(c.name) for c in self.checks), default=8)
        for c in self.checks:
            need = "required" if c.required else "advisory"
            lines.append(f"  {_MARK[c.status]}  {c.name:<{width}}  {need}  {c.reason}")
        lines += ["", self.summary()]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {
            "url": self.url,
            "model": self.model,
            "runtime": self.runtime,
            "runtime_version": self.runtime_version,
            "ok": self.ok,
            "unreachable": self.unreachable,
            "summary": self.summary(),
            "elapsed_s": round(self.elapsed_s, 3),
            "ratelimit": dict(self.ratelimit),
            "checks": [c.as_dict() for c in self.checks],
        }

    def json(self) -> str:
        return json.dumps(self.as_dict(), indent=2, default=str)
