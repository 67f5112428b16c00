"""Key → screen latency of the console: how long after a key is typed its effect is on screen.

Runs the real ``ramp demo --preset fast`` (the embedded simulator, no plan left to run by itself: a plan of
levels S, S+1, ... with steps of an hour) in a tmux session of its own, at each stream count S, and for each
key sends it with ``tmux send-keys`` and reads the screen with ``capture-pane`` as fast as it can until the
key's effect shows: the level in the header (n: the plan's next level; ↑, ↓, l N⏎), the auto-ramp word
(a), PAUSED (space), the loop's name (o), in a run at 160x48; the histogram's title (m, w), the help screen
(?) and the tab's panel (1-6), in another run at 80x24; the modal screens (d opens a step's details, e the
errors in full, escape closes each) in a third run at 80x24 (``--only modal``). Each press's latency is from just before send-keys to the end of the first
capture that shows the effect, so it includes tmux's own round trip (a capture is a few ms); presses are
spaced by 0.25-0.5 s, spread so that they land all over the console's refresh period.

    python scripts/bench_keys.py [--streams 256 1024] [--presses 10] [--timeout 5] [--trace] [--only steering]
                                 [--cotenant 8]

``--cotenant N`` runs N busy processes beside the console for the whole benchmark (a machine shared with
other work: a load average of about N plus the run's own); they end with it.

``--finished N`` (default 3): the modal run's plan is the stream count repeated in steps of 4 s, and its
keys start once N steps have finished, so that d draws a real step's report (and new steps keep finishing
while the keys are pressed); 0 keeps the hour-long steps, where d says that no step has finished.

``--trace`` runs the console with ``RAMP_KEY_TRACE`` (``tui.keytrace``) and prints, per key, the median
time of each stage: tmux and the pty (key: the app parsed the bytes), the app's queue (keyin), the action
and a dialog's round (send), the engine (arrive), the app's queue again (steered), the panels' update
(shown), the compositor (painted) and tmux's capture (seen).

A benchmark that prints numbers (docs/numbers.md), not a test. Needs tmux.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

WIDE = (160, 48)  # the steering keys: the whole header fits beside the toasts
SMALL = (80, 24)  # the local keys: the compact layout, with tabs
POLL_S = 0.002  # between two captures while waiting for an effect
LATE_FACTOR = 6  # a press that timed out is watched this many timeouts more: late, or never
START_TIMEOUT_S = 90.0
FINISHED_STEP_S = 4  # the modal run's steps (--finished): short, so that d has steps to show

Extract = Callable[[list[str]], object]


@dataclass
class Press:
    label: str  # the row of the table it counts in
    keys: tuple[str, ...]  # send-keys arguments, sent in one call
    extract: Extract  # the part of the screen the key changes
    want: object = None  # the value the key must bring (None: any value other than before)


@dataclass
class Result:
    label: str
    streams: int
    times_s: list[float] = field(default_factory=list)
    timeouts: int = 0
    spans: list[tuple[float, float]] = field(default_factory=list)  # (sent, seen), time.monotonic
    missed: list[float] = field(default_factory=list)  # when each press that timed out was sent


STAGES = ("key", "keyin", "send", "arrive", "steered", "shown", "painted")


class Session:
    """``ramp ARGS`` in a detached tmux session on a tmux server of its own."""

    def __init__(self, args: list[str], cwd: Path, size: tuple[int, int], trace: Path | None = None) -> None:
        self.name = f"ramp-keys-{uuid.uuid4().hex[:8]}"
        ramp = Path(sys.executable).with_name("ramp")
        exe = str(ramp) if ramp.exists() else shutil.which("ramp") or "ramp"
        shell = " ".join(f"'{a}'" for a in [exe, *args])
        traced = f"RAMP_KEY_TRACE='{trace}' " if trace is not None else ""
        env = f"env TERM=xterm-256color COLUMNS={size[0]} LINES={size[1]} {traced}{shell}; sleep 30"
        dims = ["-x", str(size[0]), "-y", str(size[1])]
        subprocess.run(
            self.tmux("new-session", "-d", "-s", self.name, *dims, "-c", str(cwd), env), check=True
        )

    def tmux(self, *args: str) -> list[str]:
        return ["tmux", "-L", self.name, *args]

    def lines(self) -> list[str]:
        out = subprocess.run(self.tmux("capture-pane", "-p", "-t", self.name), capture_output=True, text=True)
        return out.stdout.splitlines()

    def keys(self, *keys: str) -> None:
        subprocess.run(self.tmux("send-keys", "-t", self.name, *keys), check=True)

    def resize(self, size: tuple[int, int]) -> None:
        subprocess.run(self.tmux("resize-window", "-t", self.name, "-x", str(size[0]), "-y", str(size[1])))

    def wait(self, ok: Callable[[list[str]], bool], timeout: float, what: str) -> list[str]:
        deadline = time.monotonic() + timeout
        screen: list[str] = []
        while time.monotonic() < deadline:
            screen = self.lines()
            if ok(screen):
                return screen
            time.sleep(0.05)  # polling the terminal for a condition, with a deadline
        raise SystemExit(f"bench_keys: timed out waiting for {what}; the screen was:\n" + "\n".join(screen))

    def close(self) -> None:
        subprocess.run(self.tmux("kill-server"), capture_output=True)


def header(screen: list[str]) -> str:
    return screen[1] if len(screen) > 1 else ""


def found(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def level(screen: list[str]) -> object:
    return found(r"\blevel (\d+)", "\n".join(screen[:4]))


def auto_word(screen: list[str]) -> object:
    return found(r"\bauto (on|off)\b", header(screen))


def paused(screen: list[str]) -> object:
    return "PAUSED" in header(screen)


def loop_name(screen: list[str]) -> object:
    return found(r"\b(open|closed) loop\b", header(screen))


def help_open(screen: list[str]) -> object:
    return any("ramp — keys" in line for line in screen)


def modal_title(screen: list[str]) -> object:
    """Which detail screen is open ("Step details", "Errors in full"), or None over the console."""
    text = "\n".join(screen)
    return "step" if "Step details" in text else "errors" if "Errors in full" in text else None


def panel_title(screen: list[str]) -> object:
    """The first panel's title under the tabs (80x24: the line under the tabs' underline)."""
    return found(r"╭─ (.+?) ─", screen[7]) if len(screen) > 7 else None


def in_flight(screen: list[str]) -> int:
    value = found(r"\bin flight (\d[\d,]*)", "\n".join(screen[:4]))
    return int(value.replace(",", "")) if value else 0


def measure(session: Session, press: Press, timeout: float) -> tuple[float, float] | float:
    """(sent, seen) on ``time.monotonic``, the clock the console's key trace uses; sent alone: not seen in
    ``timeout``."""
    before = press.extract(session.lines())
    t0 = time.monotonic()
    session.keys(*press.keys)
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        now = press.extract(session.lines())
        if (now == press.want) if press.want is not None else (now != before):
            return t0, time.monotonic()
        time.sleep(POLL_S)  # polling the terminal for the key's effect, with a deadline
    screen = "\n".join(session.lines())
    late = LATE_FACTOR * timeout  # a press past the timeout: late (a starved console) or never applied?
    while time.monotonic() < t0 + late:
        now = press.extract(session.lines())
        if (now == press.want) if press.want is not None else (now != before):
            break
        time.sleep(0.05)  # polling for a late effect, with a deadline
    waited = time.monotonic() - t0
    when = f"it appeared after {waited:.1f} s" if waited < late else f"not even in {late:g} s"
    print(
        f"bench_keys: {press.label}: no effect in {timeout:g} s, {when} (sent at {t0:.3f}, before: "
        f"{before!r}); the screen at the timeout:\n{screen}",
        file=sys.stderr,
    )
    return t0


def steering_presses(streams: int, presses: int) -> list[Press]:
    out = [Press("n", ("n",), level) for _ in range(presses)]
    out += [Press("a", ("a",), auto_word) for _ in range(presses)]
    out += [
        Press("↑" if i % 2 == 0 else "↓", ("Up" if i % 2 == 0 else "Down",), level)
        for i in range(2 * presses)
    ]
    # From the level ↑↓ left (the plan's last level): l to another, then back, each as one burst
    base = streams + presses
    for i in range(presses):
        target = str(base + 5 if i % 2 == 0 else base)
        out.append(Press("l N⏎", ("l", target, "Enter"), level, want=target))
    out += [
        Press("space (pause)" if i % 2 == 0 else "space (resume)", ("Space",), paused)
        for i in range(2 * presses)
    ]
    out += [Press("o", ("o",), loop_name) for _ in range(2 * presses)]
    return out


def local_presses(presses: int) -> list[Press]:
    out = [Press("m", ("m",), panel_title) for _ in range(presses)]
    out += [Press("w", ("w",), panel_title) for _ in range(presses)]
    out += [Press("?", ("?",), help_open) for _ in range(2 * presses)]  # ? opens the help and closes it
    tabs = "234561"
    out += [Press("1-6", (tabs[i % 6],), panel_title) for i in range(presses)]
    return out


def modal_presses(presses: int) -> list[Press]:
    """d opens a step's details, escape closes them; e the errors in full, escape closes them."""
    out: list[Press] = []
    for _ in range(presses):
        out += [Press("d", ("d",), modal_title, want="step"), Press("escape (d)", ("Escape",), modal_title)]
        out += [Press("e", ("e",), modal_title, want="errors"), Press("escape (e)", ("Escape",), modal_title)]
    return out


def gap(i: int) -> float:
    """0.25-0.5 s, spread evenly over the refresh period (the golden ratio's fractional steps)."""
    return 0.25 + 0.25 * ((i * 0.6180339887) % 1.0)


def run_at(
    streams: int,
    presses: int,
    timeout: float,
    preset: str,
    tmp: Path,
    only: str,
    trace: bool,
    finished: int = 0,
) -> list[Result]:
    """The steering keys in one run at 160x48, then the local keys in another at 80x24, both at ``streams``."""
    results: dict[str, Result] = {}
    count = 0
    kinds = {
        "steering": (WIDE, steering_presses(streams, presses)),
        "local": (SMALL, local_presses(presses)),
        "modal": (SMALL, modal_presses(presses)),
    }
    runs = [(k, *v) for k, v in kinds.items() if only in ("all", k)]
    for kind, size, todo in runs:
        levels = ",".join(str(streams + i) for i in range(presses + 1))
        args = ["demo", "--preset", preset, "--steps", levels, "--step-seconds", "3600", "--warmup", "1"]
        if kind == "modal" and finished > 0:  # d shows a real step's report: short steps, all at ``streams``
            repeat = finished + int(len(todo) * 1.5 / FINISHED_STEP_S) + 4  # the plan outlasts the presses
            args = ["demo", "--preset", preset, "--steps", str(streams), "--repeat", str(repeat)]
            args += ["--step-seconds", str(FINISHED_STEP_S), "--warmup", "1"]
        args += ["--out", str(tmp / f"keys-{streams}-{size[0]}.jsonl")]
        trace_path = tmp / f"trace-{streams}-{size[0]}.log" if trace else None
        session = Session(args, tmp, size, trace_path)
        try:
            session.wait(lambda s: "RUNNING" in header(s), START_TIMEOUT_S, "the run to start")
            session.wait(
                lambda s: in_flight(s) >= 0.9 * streams, START_TIMEOUT_S, f"{streams} streams in flight"
            )
            session.wait(lambda s: "MEASURING" in header(s), 30, "the step's warm-up to end")
            if kind == "modal" and finished > 0:
                time.sleep(finished * FINISHED_STEP_S)  # the steps d shows (a benchmark, not a test)
            for press in todo:
                span = measure(session, press, timeout)
                result = results.setdefault(press.label, Result(press.label, streams))
                if isinstance(span, float):
                    result.timeouts += 1
                    result.missed.append(span)
                else:
                    result.times_s.append(span[1] - span[0])
                    result.spans.append(span)
                time.sleep(
                    gap(count)
                )  # spacing the presses over the refresh period (a benchmark, not a test)
                count += 1
        finally:
            session.close()
        if trace_path is not None and trace_path.exists():
            print(stage_table(list(results.values()), read_trace(trace_path)), flush=True)
            print(f"bench_keys: the trace is {trace_path}", file=sys.stderr)
    return list(results.values())


def read_trace(path: Path) -> list[tuple[float, str]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        at, _, rest = line.partition(" ")
        out.append((float(at), rest.split(" ", 1)[0]))
    return sorted(out)


def stage_table(results: list[Result], trace: list[tuple[float, str]]) -> str:
    """Per key, the median ms from the press's send-keys to each stage's first stamp inside the press's span
    (a stage that happened more than once, a dialog's keys, counts its last before the effect was seen)."""
    rows = ["| key | " + " | ".join(STAGES) + " | seen |", "|---|" + "--:|" * (len(STAGES) + 1)]
    for r in results:
        cells = []
        for stage in STAGES:
            times = []
            for sent, seen in r.spans:
                hits = [at for at, name in trace if name == stage and sent <= at <= seen]
                if hits:
                    times.append((hits[-1] if stage != "key" else hits[0]) - sent)
            cells.append(ms(statistics.median(times)) if times else "–")
        cells.append(ms(statistics.median(r.times_s)) if r.times_s else "–")
        rows.append(f"| {r.label} | " + " | ".join(cells) + " |")
        for sent in r.missed:  # where a press that timed out got to: the stages stamped after it was sent
            stamped = [f"{name} +{(at - sent) * 1000:.0f}" for at, name in trace if sent <= at <= sent + 30]
            rows.append(
                f"|   {r.label} timed out, sent at {sent:.3f}: {', '.join(stamped[:12]) or 'no stage'} |"
            )
    return "\n".join(rows)


def ms(value: float) -> str:
    return f"{value * 1000:.0f}"


def table(results: list[Result]) -> str:
    rows = [
        "| key | streams | presses | median ms | p90 ms | max ms | timed out |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in results:
        t = sorted(r.times_s)
        if t:
            p90 = t[min(len(t) - 1, int(round(0.9 * (len(t) - 1))))]
            cells = [ms(statistics.median(t)), ms(p90), ms(t[-1])]
        else:
            cells = ["–", "–", "–"]
        rows.append(
            f"| {r.label} | {r.streams:,} | {len(t) + r.timeouts} | {' | '.join(cells)} | {r.timeouts} |"
        )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--streams", type=int, nargs="+", default=[256, 1024], help="stream counts (default 256 1024)"
    )
    ap.add_argument("--presses", type=int, default=10, help="presses of each key (default 10)")
    ap.add_argument(
        "--timeout", type=float, default=5.0, help="seconds a press waits for its effect (default 5)"
    )
    ap.add_argument("--preset", default="fast", help="the simulator's preset (default fast)")
    ap.add_argument("--only", choices=("steering", "local", "modal", "all"), default="all", help="which keys")
    ap.add_argument("--cotenant", type=int, default=0, help="busy processes beside the console (default 0)")
    ap.add_argument(
        "--finished",
        type=int,
        default=3,
        help="steps finished before the modal keys (default 3; 0: none, d shows 'no finished step')",
    )
    ap.add_argument("--trace", action="store_true", help="time each stage (RAMP_KEY_TRACE, tui.keytrace)")
    opts = ap.parse_args()
    if shutil.which("tmux") is None:
        print("bench_keys: tmux is needed (apt-get install -y tmux)", file=sys.stderr)
        return 2
    if opts.presses < 1 or opts.timeout <= 0 or any(s < 1 for s in opts.streams):
        print("bench_keys: --presses and --streams must be at least 1, --timeout positive", file=sys.stderr)
        return 2
    results: list[Result] = []
    hogs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(0, opts.cotenant))
    ]
    try:
        with tempfile.TemporaryDirectory(prefix="ramp-bench-keys-") as tmp:
            results = run_all(opts, Path(tmp))
    finally:
        for hog in hogs:  # the co-tenant ends with the benchmark
            hog.kill()
            hog.wait()
    print(table(results))
    return 0


def run_all(opts: argparse.Namespace, tmp: Path) -> list[Result]:
    results: list[Result] = []
    for streams in opts.streams:
        results += run_at(
            streams, opts.presses, opts.timeout, opts.preset, tmp, opts.only, opts.trace, opts.finished
        )
        print(table([r for r in results if r.streams == streams]), flush=True)
        print(flush=True)
    return results


if __name__ == "__main__":
    raise SystemExit(main())
