"""Answer quality under load (pure): how far a probe's answer agrees with its reference answer (exact match,
common prefix), and a step's summary ``{"n", "agree", "agree_lo", "agree_hi", "prefix_tokens_p50" or
"prefix_chars_p50", "tasks_ok", "errors"}`` with a Wilson interval for the agreement, widened for probes that
repeat the same prompt (clusters); with verifiable tasks (``loadgen.analysis.tasks``) also ``tasks_n`` and
``tasks_ok_lo``/``tasks_ok_hi``, the Wilson interval of the share passed.

The common prefix is counted in tokens when both answers come as token sequences (token ids or token
strings), else in characters of the text; the summary's key names which (``prefix_tokens_p50`` or
``prefix_chars_p50``). No I/O, nothing of the run: the run hands it answers, this hands back numbers.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from loadgen.analysis.tasks import TASK_BASE, check, make_task

# the two-sided 95 % normal quantile of every interval here
Z95 = 1.959963984540054

Answer = str | Sequence[str] | Sequence[int]


@dataclass(frozen=True, slots=True)
class Agreement:
    """One probe's answer against its reference: ``exact`` match, and the common prefix in ``unit``."""

    exact: bool
    prefix: int
    unit: str  # "tokens" | "chars"
    length: int  # the answer's length in ``unit``
    reference_length: int


def agreement(answer: Answer, reference: Answer) -> Agreement:
    """Compare ``answer`` with ``reference``: both strings (characters) or both token sequences (tokens)."""
    if isinstance(answer, str) != isinstance(reference, str):
        raise TypeError("an answer and its reference must both be text or both be token sequences")
    unit = "chars" if isinstance(answer, str) else "tokens"
    prefix = common_prefix(answer, reference)
    exact = prefix == len(answer) == len(reference)
    return Agreement(exact, prefix, unit, len(answer), len(reference))


def common_prefix(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items ``a`` and ``b`` share (strings compared a block at a time)."""
    n = min(len(a), len(b))
    if isinstance(a, str) and isinstance(b, str):
        if a[:n] == b[:n]:
            return n
        lo, hi = 0, n  # the longest equal prefix by halving: a[:lo] == b[:lo], a[:hi] != b[:hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[:mid] == b[:mid]:
                lo = mid
            else:
                hi = mid
        return lo
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def wilson(k: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``k`` of ``n`` (``n`` may be an effective, fractional size)."""
    if n <= 0:
        return (0.0, 1.0)
    p = k / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(p * (1 - p) / n + z2 / (4 * n * n), 0.0))
    lo = 0.0 if k <= 0 else max(0.0, centre - half)
    return (lo, 1.0 if k >= n else min(1.0, centre + half))


def effective_n(hits: Sequence[bool], clusters: Sequence[Hashable] | None) -> float:
    """The sample size the agreement's interval may count on: ``n`` for independent probes; with
    ``clusters`` (the probe's prompt), ``n`` over the design effect of the clustered (ratio) estimator,
    kept within [clusters, n]. With every probe agreeing (or none) the variance says nothing, so only the
    clusters count: repeats of one prompt on a deterministic server are one observation."""
    n = len(hits)
    if clusters is None or n == 0:
        return float(n)
    if len(clusters) != n:
        raise ValueError("one cluster per probe")
    groups: dict[Hashable, list[int]] = {}
    for hit, c in zip(hits, clusters, strict=True):
        g = groups.setdefault(c, [0, 0])
        g[0] += int(hit)
        g[1] += 1
    count = len(groups)
    p = sum(hits) / n
    if p in (0.0, 1.0) or count < 2:
        return float(count)
    resid = sum((y - p * m) ** 2 for y, m in groups.values())
    var_cluster = count / (count - 1) * resid / (n * n)
    var_simple = p * (1 - p) / n
    deff = var_cluster / var_simple
    return float(min(n, max(count, n / deff if deff > 0 else n)))


def step_quality(
    agreements: Sequence[Agreement],
    clusters: Sequence[Hashable] | None = None,
    tasks: Sequence[bool] = (),
    errors: int = 0,
) -> dict[str, float | int | None]:
    """A step's quality: ``n`` probes compared, the share that matched exactly with its 95 % interval,
    the median common prefix (in the agreements' unit), the share of verifiable ``tasks`` passed (None
    without any) and the probes that ``errors`` kept from an answer (not compared, not counted in ``n``)."""
    units = {a.unit for a in agreements}
    if len(units) > 1:
        raise ValueError("a step's agreements must share one unit (tokens or chars)")
    unit = units.pop() if units else "tokens"
    hits = [a.exact for a in agreements]
    n = len(hits)
    agree = sum(hits) / n if n else None
    lo: float | None = None
    hi: float | None = None
    if n:
        n_eff = effective_n(hits, clusters)
        lo, hi = wilson(sum(hits) / n * n_eff, n_eff)
        lo, hi = min(lo, sum(hits) / n), max(hi, sum(hits) / n)
    prefix = statistics.median(a.prefix for a in agreements) if n else None
    out: dict[str, float | int | None] = {
        "n": n,
        "agree": agree,
        "agree_lo": lo,
        "agree_hi": hi,
        f"prefix_{unit}_p50": prefix,
        "tasks_ok": sum(tasks) / len(tasks) if tasks else None,
        "errors": errors,
    }
    if tasks:  # verifiable tasks (--quality-tasks): how many were checked, the share passed's interval
        out["tasks_n"] = len(tasks)
        out["tasks_ok_lo"], out["tasks_ok_hi"] = wilson(sum(tasks), len(tasks))
    return out


def agreement_text(q: Mapping[str, object] | None) -> str:
    """``0.62 (0.55–0.69)`` for a step's quality; ``n/a`` without probes compared."""
    if not q or not q.get("n") or q.get("agree") is None:
        return "n/a"
    agree, lo, hi = _num(q["agree"]), _num(q.get("agree_lo")), _num(q.get("agree_hi"))
    if agree is None:
        return "n/a"
    if lo is None or hi is None:
        return f"{agree:.2f}"
    return f"{agree:.2f} ({lo:.2f}–{hi:.2f})"


class QualitySettings(Protocol):
    """What the book reads of ``loadgen.profile.Quality``: the reference answers loaded, if any, and whether
    verifiable tasks are asked (drawn from ``seed``)."""

    @property
    def reference(self) -> tuple[tuple[int, str], ...]: ...

    @property
    def tasks(self) -> bool: ...

    @property
    def seed(self) -> int: ...


# a probe's answer as shipped from a worker: (probe index, its text; None when the probe failed)
ProbeAnswer = tuple[int, str | None]


class QualityBook:
    """The run's reference answers and each step's comparison with them. ``reference``: answers loaded
    from a file (``--quality-reference``); without it, the first step with probes (level 1 in a ramp) sets
    the reference of each probe it got an answer to (not an empty one), and its other answers there are
    compared with it; a probe a later step is the first to answer has no reference there (``unreferenced``:
    its answer under load is no reference for itself). A failed probe is counted in ``errors``, an empty
    answer compared (it disagrees). With ``tasks_seed`` (verifiable tasks on), a probe whose index is a
    task's (``loadgen.analysis.tasks.TASK_BASE`` and above) is checked by its task's rule instead, and the
    step's quality has ``tasks_n`` (0 when none answered) and ``tasks_ok`` with its interval."""

    def __init__(self, reference: dict[int, str] | None = None, tasks_seed: int | None = None) -> None:
        self.reference: dict[int, str] = dict(reference or {})
        self.taking = reference is None  # until the first step with probes has set the references
        self.tasks_seed = tasks_seed
        self.taken_at: dict[str, object] = {}  # the load the references were taken under (reference_level)

    @classmethod
    def of(cls, quality: QualitySettings | None) -> QualityBook | None:
        """The book of a run with these probe settings (``Profile.quality``; None: no probes, no book)."""
        if quality is None:
            return None
        return cls(
            dict(quality.reference) if quality.reference else None, quality.seed if quality.tasks else None
        )

    def checked(self, answers: Sequence[ProbeAnswer]) -> tuple[list[bool], int]:
        """The verifiable tasks among ``answers``: each answered one's verdict, and how many failed."""
        if self.tasks_seed is None:
            return [], 0
        seed = self.tasks_seed
        found = [(index - TASK_BASE, text) for index, text in answers if index >= TASK_BASE]
        return [check(make_task(n, seed), text) for n, text in found if text is not None], sum(
            text is None for _n, text in found
        )

    def step(
        self, answers: Sequence[ProbeAnswer], at: Mapping[str, object] | None = None
    ) -> dict[str, object] | None:
        """The step's quality (``step_quality``'s keys, plus ``reference`` when this step set some), or None
        when the step had no probes. ``at``: the step's load (``reference_level``, ``reference_mode``), kept
        with the references it sets and given in every later step's quality: the first step with probes is
        level 1 in a ramp, but a search's first probe or a plan's first level may be far above it."""
        if not answers:
            return None
        tasks, errors = self.checked(answers)
        answers = [(index, text) for index, text in answers if index < TASK_BASE]
        taken: dict[int, str] = {}
        if self.taking:
            self.taking = False
            for index, text in answers:
                if text and index not in self.reference and index not in taken:  # never an empty reply
                    taken[index] = text
            self.reference.update(taken)
            self.taken_at = dict(at or {}) if taken else {}
        compared: list[Agreement] = []
        clusters: list[int] = []
        unmatched = 0
        for index, text in answers:
            ref = self.reference.get(index)
            if text is None:
                errors += 1
            elif ref is None:
                unmatched += 1
            else:
                compared.append(agreement(text, ref))
                clusters.append(index)
        out: dict[str, object] = dict(step_quality(compared, clusters, tasks, errors))
        if self.tasks_seed is not None:
            out.setdefault("tasks_n", 0)  # tasks asked, none answered in this step: counted, not missing
        if unmatched:
            out["unreferenced"] = unmatched
        if taken:
            out["reference"] = {str(i): t for i, t in sorted(taken.items())}
        out.update(self.taken_at)
        return out


def reference_note(q: Mapping[str, object] | None) -> str | None:
    """What to say once when a step took the answer references (its quality has ``reference``) under more
    load than one stream: its agreement, and every later one, then compares answers under load with
    answers under load (a batch-variant change already in the references goes unseen). None otherwise."""
    if not q or "reference" not in q:
        return None
    level, mode = _num(q.get("reference_level")), q.get("reference_mode")
    if level is None or (mode != "open" and level <= 1):
        return None
    at = f"{level:g} req/s (open loop), not 1 stream" if mode == "open" else f"{level:g} streams, not 1"
    return f"answer references taken at {at}: agreement compares answers under load with answers under load"


def below_one(q: Mapping[str, object] | None) -> bool:
    """Whether a step's agreement interval lies wholly below 1: some answers changed, beyond chance."""
    hi = _num(q.get("agree_hi")) if q else None
    return hi is not None and hi < 1.0


def tasks_text(q: Mapping[str, object] | None) -> str:
    """``0.80 (0.49–0.94) of 10`` for a step's verifiable tasks passed; ``""`` without tasks."""
    ok = _num(q.get("tasks_ok")) if q else None
    if not q or ok is None:
        return ""
    lo, hi = _num(q.get("tasks_ok_lo")), _num(q.get("tasks_ok_hi"))
    interval = "" if lo is None or hi is None else f" ({lo:.2f}–{hi:.2f})"
    return f"{ok:.2f}{interval} of {_int(q.get('tasks_n'))}"


def quality_line(q: Mapping[str, object]) -> str:
    """``agreement 0.62 (0.55–0.69) · 40 probes · prefix 12 chars (median) · tasks ok 0.80 (0.49–0.94) of 10
    · 2 failed`` for a step line's ``quality``."""
    parts = [f"agreement {agreement_text(q)}", f"{_int(q.get('n'))} probes"]
    for unit in ("tokens", "chars"):
        prefix = _num(q.get(f"prefix_{unit}_p50"))
        if prefix is not None:
            parts.append(f"prefix {prefix:g} {unit} (median)")
    if tasks_text(q):
        parts.append(f"tasks ok {tasks_text(q)}")
    if _int(q.get("errors")):
        parts.append(f"{_int(q.get('errors'))} failed")
    if _int(q.get("unreferenced")):
        parts.append(f"{_int(q.get('unreferenced'))} without a reference")
    return " · ".join(parts)


def pooled(steps: Sequence[Mapping[str, object]]) -> dict[str, float | int | None] | None:
    """The quality of a level's repeats pooled: their probes together (one step's interval as it was;
    several steps': Wilson over the pooled count). None when no step compared a probe."""
    known = [
        q for q in steps if isinstance(q.get("n"), int) and q["n"] and isinstance(q.get("agree"), float | int)
    ]
    if not known:
        return None
    if len(known) == 1:
        q = known[0]
        return {
            "n": _int(q["n"]),
            "agree": _num(q["agree"]),
            "agree_lo": _num(q.get("agree_lo")),
            "agree_hi": _num(q.get("agree_hi")),
        }
    n = sum(_int(q["n"]) for q in known)
    k = sum(_int(q["n"]) * (_num(q["agree"]) or 0.0) for q in known)
    lo, hi = wilson(k, n)
    return {"n": n, "agree": k / n, "agree_lo": lo, "agree_hi": hi}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def answers_changed(base: Mapping[str, object] | None, other: Mapping[str, object] | None) -> bool:
    """Whether ``other``'s answers agree less than ``base``'s: its interval lies below ``base``'s agreement
    (without an interval, its agreement is lower). False when either compared no probe."""
    if not base or not other:
        return False
    b, o, hi = _num(base.get("agree")), _num(other.get("agree")), _num(other.get("agree_hi"))
    if b is None or o is None:
        return False
    return hi < b if hi is not None else o < b


def changed_text(name: str, faster: bool, base: Mapping[str, object], other: Mapping[str, object]) -> str:
    """``B faster, but answers changed: agreement 0.62 (0.55–0.69) vs 1.00`` (``B answers changed: …``
    when it is not faster)."""
    head = f"{name} faster, but answers changed" if faster else f"{name} answers changed"
    b = _num(base.get("agree"))
    return f"{head}: agreement {agreement_text(dict(other))} vs {'n/a' if b is None else f'{b:.2f}'}"
