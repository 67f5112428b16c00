"""Every message of a run is defined once in ``loadgen.run.protocol``: frozen, slotted, and it survives the
pickling that carries it between processes unchanged."""

from __future__ import annotations

import dataclasses
import pickle
import typing

import pytest

from loadgen.arrivals import ArrivalSpec
from loadgen.metrics import Recorder
from loadgen.run import protocol
from loadgen.run.protocol import (
    ChangeLevel,
    ClosedLoad,
    Flush,
    Mark,
    NextStep,
    OpenLoad,
    Pause,
    PauseLoad,
    Resume,
    ResumeLoad,
    ResumeSearch,
    SetAuto,
    SetLevel,
    SetMode,
    SetRate,
    StartSearch,
    Stop,
    StopLoad,
    StopSearch,
    WorkerDelta,
    WorkerFatal,
    WorkerReady,
)

MESSAGES = [
    ClosedLoad(8, True),
    OpenLoad(ArrivalSpec("gamma", 2.5, 0.5, seed=7), 16),
    PauseLoad(),
    ResumeLoad(),
    Flush(3, 123_456_789),
    StopLoad(False),
    WorkerReady(1, 4242),
    WorkerFatal(0, "RuntimeError: boom (details: /tmp/ramp-worker-0.log)"),
    WorkerDelta(0, 3, True, False, Recorder(worker_id=0).take(1, 2)),
    Stop(True),
    Mark("raised to 4"),
    SetAuto(False),
    Pause(),
    Resume(),
    SetLevel(4),
    ChangeLevel(-1),
    SetRate(12.5),
    SetMode("open"),
    NextStep(),
    StartSearch(1.0, 64.0),
    ResumeSearch(),
    StopSearch(),
]


def test_every_message_type_is_covered() -> None:
    unions = (protocol.WorkerCommand, protocol.WorkerMessage, protocol.ControlCommand)
    declared = {t for union in unions for t in typing.get_args(union)}
    assert declared == {type(m) for m in MESSAGES}


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_message_is_frozen_slotted_and_picklable(message: object) -> None:
    assert dataclasses.is_dataclass(message)
    assert not hasattr(message, "__dict__"), "slotted: no attributes can be added after construction"
    again = pickle.loads(pickle.dumps(message))
    assert type(again) is type(message)
    if not isinstance(message, WorkerDelta):  # IntervalDelta holds numpy arrays: compare its fields
        assert again == message
    fields = dataclasses.fields(type(message))
    if fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(message, fields[0].name, None)


def test_a_mode_that_is_not_one_is_refused_where_the_command_is_built() -> None:
    with pytest.raises(ValueError, match="'closed' or 'open'"):
        SetMode("sideways")  # type: ignore[arg-type]
