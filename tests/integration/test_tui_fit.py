"""The console offers to clamp requests that cannot fit the server's context (issue 9): the engine's warning
brings a dialog once; yes restarts the run with ``fit_context`` into a new record (the old record finished,
never overwritten), no keeps the run and says so in the errors panel. Pilot drives the real app, over the
fakes and over a real engine against a simulator whose max_model_len is 1,024."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot
from tui_fakes import FakeEngine, make_snapshot

from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config
from loadgen.profile import load_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine, EngineControl
from loadgen.run.protocol import SetLevel
from loadgen.run.setup import context_warning
from loadgen.sim import build_config as sim_config
from loadgen.sim import run_sim_in_thread
from tui.app import RampApp
from tui.console import ConsoleScreen
from tui.dialogs import FitContext
from tui.errors import error_details
from tui.fit import DECLINED, fit_out_path, fit_question, fitted_config
from tui.panel import SnapshotPanel

SIZE = (120, 36)
# What the engine's pre-run check says of the chat profile against a 1,024-token server, with and without
# clamping: the console must read the very text the engine writes.
UNCLAMPED = context_warning(load_profile("chat"), 1024, fit=False)
CLAMPED = context_warning(load_profile("chat"), 1024, fit=True)
QUESTION = "cannot fit max_model_len 1,024 — clamp them (max_tokens first, then the prompt)? [y/n]"


def run_config(out: Path, url: str = "http://127.0.0.1:9", *flags: str) -> RunConfig:
    return build_config(build_parser().parse_args(["run", url, "--out", str(out), *flags]), url)


class Fake(FakeEngine):
    """The fakes' engine with the whole ``EngineControl`` (a signal stops it like ``stop``)."""

    def interrupt(self, signum: int) -> None:
        self.calls.append(("interrupt", (signum,)))
        self.stop()


class Factory:
    """Builds the restarted run's engine: a FakeEngine whose snapshots say the requests are clamped."""

    def __init__(self) -> None:
        self.app: RampApp | None = None
        self.configs: list[RunConfig] = []
        self.engines: list[Fake] = []

    def __call__(self, config: RunConfig) -> EngineControl:
        assert self.app is not None
        self.configs.append(config)
        snapshot = make_snapshot(state="running", warnings=(CLAMPED,), record_path=config.out)
        engine = Fake(snapshot, on_snapshot=self.app.snapshot_callback)
        self.engines.append(engine)
        return engine


def make_app(tmp_path: Path, **changes: object) -> tuple[RampApp, Fake, Factory, RunConfig]:
    config = run_config(tmp_path / "run.jsonl")
    factory = Factory()
    app = RampApp(refresh_hz=8.0, config=config, engine_factory=factory)
    factory.app = app
    snapshot = make_snapshot(state="running", warnings=(UNCLAMPED,), record_path=config.out, **changes)
    engine = Fake(snapshot, on_snapshot=app.snapshot_callback)
    app.attach(engine)
    return app, engine, factory, config


async def until(pilot: Pilot[None], condition: Callable[[], bool], what: str) -> None:
    for _ in range(200):  # up to ~10 s
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def errors_text(app: RampApp) -> str:
    panel = app.screen_stack[0].query_one("#errors-panel", SnapshotPanel)
    return " ".join(str(panel.render()).split())


def test_the_question_reads_the_engines_warning() -> None:
    assert UNCLAMPED is not None and "use --fit-context" in UNCLAMPED
    assert fit_question(UNCLAMPED) == f"About 19.3% of requests {QUESTION}"
    assert fit_question("something else").endswith("clamp them (max_tokens first, then the prompt)? [y/n]")


def test_a_fitted_run_never_overwrites_a_record(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    assert fit_out_path(str(out)) == str(tmp_path / "run-fit.jsonl")
    (tmp_path / "run-fit.jsonl").write_text("taken\n")
    assert fit_out_path(str(out)) == str(tmp_path / "run-fit-2.jsonl")
    assert fit_out_path(None) is None
    config = run_config(out)
    fitted = fitted_config(config)
    assert fitted.fit_context and not config.fit_context
    assert fitted.seed_source == "fresh" and fitted.seed != config.seed  # the prompts are not replayed
    assert fitted.record_events[-1] == ("restart", {"reason": "fit_context", "previous_record": str(out)})
    given = run_config(out, "http://127.0.0.1:9", "--seed", "7")
    assert fitted_config(given).seed == 7  # a given seed is the operator's: kept


async def test_yes_restarts_the_run_clamped_into_a_new_record(tmp_path: Path) -> None:
    app, engine, factory, config = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FitContext), "the fit-context dialog")
        assert isinstance(app.screen, FitContext)
        assert app.screen.question == f"About 19.3% of requests {QUESTION}"
        await pilot.press("y")
        await until(pilot, lambda: len(factory.engines) == 1, "the restarted run's engine")
        (fitted,) = factory.configs
        assert fitted.fit_context is True
        assert fitted.out == str(tmp_path / "run-fit.jsonl") and fitted.out != config.out
        assert engine.names()[-2:] == ["stop", "wait"]  # the old run ended (its record is closed)
        new = factory.engines[0]
        assert app.engine is new and new.names()[0] == "start" and app.config is fitted
        await until(pilot, lambda: app.shown_snapshot is new.snapshot, "the new run drawn")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ConsoleScreen)  # the clamped run's warning is not offered again
        # The panel (24 cells at 120x36) shows the warning's head; the errors view (e) reads it whole.
        assert "⚠ profile 'chat' asks up to" in errors_text(app)
        whole = Console(width=200, record=True, file=io.StringIO())
        whole.print(error_details(new.snapshot))
        assert "are clamped to fit" in " ".join(whole.export_text().split())


async def test_no_keeps_the_run_and_says_so(tmp_path: Path) -> None:
    app, engine, factory, _ = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, FitContext), "the fit-context dialog")
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, ConsoleScreen), "the dialog closed")
        await until(pilot, lambda: "not clamped (you answered no)" in errors_text(app), "the errors panel")
        engine.send(SetLevel(8))  # a new snapshot: the question was asked once
        await pilot.pause(0.3)
        assert isinstance(app.screen, ConsoleScreen)
        assert "stop" not in engine.names() and not factory.configs
        assert DECLINED.split(":")[0] in errors_text(app)


async def test_no_offer_without_the_runs_config() -> None:
    app = RampApp(refresh_hz=8.0)
    engine = Fake(make_snapshot(state="running", warnings=(UNCLAMPED,)), on_snapshot=app.snapshot_callback)
    app.attach(engine)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.4)
        assert isinstance(app.screen, ConsoleScreen)


@pytest.mark.slow
async def test_yes_against_a_server_of_1024_tokens(tmp_path: Path) -> None:
    sim = run_sim_in_thread(sim_config("tiny-cpu", max_model_len=1024))
    try:
        config = run_config(tmp_path / "run.jsonl", sim.url, "--profile", "chat", "--level", "2")
        app = RampApp(refresh_hz=8.0, config=config)
        first = Engine(config, on_snapshot=app.snapshot_callback)
        app.attach(first)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: isinstance(app.screen, FitContext), "the fit-context dialog")
            await pilot.press("y")
            await until(pilot, lambda: app.engine is not first, "the restarted run")
            restarted = app.engine
            assert isinstance(restarted, Engine) and restarted.config.fit_context
            # the old run's last snapshot (running) stays shown until the new run's first one is drawn: wait
            # for the new record's (beside two CPU hogs the old one was still the one shown)
            fitted = str(tmp_path / "run-fit.jsonl")
            await until(
                pilot,
                lambda: (
                    app.shown_snapshot is not None
                    and app.shown_snapshot.record_path == fitted
                    and app.shown_snapshot.state == "running"
                ),
                "the restarted run running",
            )
            shown = app.shown_snapshot
            assert shown is not None and shown.record_path == str(tmp_path / "run-fit.jsonl")
            assert not any("use --fit-context" in w for w in shown.warnings)
            await pilot.press("q", "y")
            await app.workers.wait_for_complete()
        assert restarted.wait(timeout=10) is not None
        old, new = read_record(tmp_path / "run.jsonl"), read_record(tmp_path / "run-fit.jsonl")
        assert old.header["fit_context"] is False and old.events[-1]["kind"] == "end"
        assert new.header["fit_context"] is True and new.header["seed"] != old.header["seed"]
        assert any(e["kind"] == "restart" for e in new.events)
    finally:
        sim.stop()
