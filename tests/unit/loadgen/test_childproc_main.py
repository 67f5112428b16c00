"""``main_left_alone``: while a worker starts, multiprocessing sees a ``__main__`` with no file and no spec
(so the child does not run the parent's script again), every name still readable, the real one back after."""

from __future__ import annotations

import multiprocessing.spawn
import sys

import pytest

from loadgen.childproc import main_left_alone


def test_the_child_is_not_told_to_import_main_and_names_still_read_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = sys.modules["__main__"]
    if getattr(real.__spec__, "name", None) is None and getattr(real, "__file__", None) is None:
        # a pytest-xdist worker's main has neither: give it the path a script's main has
        monkeypatch.setattr(real, "__file__", "/nonexistent/script.py", raising=False)
    marker = object()
    monkeypatch.setattr(real, "ramp_test_name", marker, raising=False)
    before = multiprocessing.spawn.get_preparation_data("w")
    with main_left_alone():
        inside = multiprocessing.spawn.get_preparation_data("w")
        shown = sys.modules["__main__"]
        assert shown is not real and shown.ramp_test_name is marker  # what pickle would look up
        with pytest.raises(AttributeError):
            _ = shown.no_such_name
    assert sys.modules["__main__"] is real
    assert "init_main_from_path" not in inside and "init_main_from_name" not in inside
    assert {"init_main_from_path", "init_main_from_name"} & set(before)  # pytest's own main, outside
