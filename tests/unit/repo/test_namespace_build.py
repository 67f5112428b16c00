"""The one namespace of the wheel (setup.py): each built module's imports of ``loadgen``/``tui`` and the strings
that name one of our modules go under ``llm_ramp.``, and nothing else of the text changes; in a checkout,
``llm_ramp.loadgen``/``llm_ramp.tui`` are the top-level packages themselves (llm_ramp/_checkout.py)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


def setup_module_() -> ModuleType:
    """setup.py as a module (it calls setup() only when run as a script, as the build backend runs it)."""
    spec = importlib.util.spec_from_file_location("ramp_setup", ROOT / "setup.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = setup_module_()
MODULES = {"loadgen.sim", "loadgen.builtin_profiles", "tui.app", "loadgen.run.engine"}

SOURCE = '''"""The engine (loadgen.run.engine) and "loadgen.sim": prose is left as it is."""
from __future__ import annotations

import sys  # from loadgen import nothing
from loadgen.config import RampPlan
from loadgen import measures
from tui.app import (
    RampApp,  # the console
)
from \\
    loadgen.sim import spawn_sim_process
import loadgen.run.engine as engine_mod
from . import sibling
from .loadgen import inner

NOTE = "é"; from loadgen.types import Target


def f():
    """``python -m loadgen.sim``: a docstring, kept."""
    cmd = [sys.executable, "-m", "loadgen.sim"]
    return cmd, files('loadgen.builtin_profiles'), "loadgen.requests_total", "tui", "loadgen", f"{cmd} loadgen.sim"
'''


def test_imports_and_module_strings_go_under_the_namespace_and_nothing_else_changes() -> None:
    out = SETUP.namespaced(SOURCE, MODULES, "example.py")
    tree = ast.parse(out)
    absolute = sorted(
        n.module or ""
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module != "__future__"
    )
    assert absolute == [
        "llm_ramp.loadgen",
        "llm_ramp.loadgen.config",
        "llm_ramp.loadgen.sim",
        "llm_ramp.loadgen.types",
        "llm_ramp.tui.app",
    ]
    plain = sorted(a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names)
    assert plain == ["llm_ramp.loadgen.run.engine", "sys"]
    relative = sorted(
        (n.level, n.module or "") for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level
    )
    assert relative == [(1, ""), (1, "loadgen")]  # relative imports are inside the package already
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert {"llm_ramp.loadgen.sim", "llm_ramp.loadgen.builtin_profiles"} <= strings
    assert {"loadgen.sim", "loadgen.builtin_profiles"}.isdisjoint(strings - {" loadgen.sim"})
    # not modules of ours, or words: as they were
    assert {"loadgen.requests_total", "tui", "loadgen", "é"} <= strings
    # the docstrings, the comment and the f-string's text are untouched, character for character
    for kept in (
        '"""The engine (loadgen.run.engine) and "loadgen.sim": prose is left as it is."""',
        "# from loadgen import nothing",
        '"""``python -m loadgen.sim``: a docstring, kept."""',
        'f"{cmd} loadgen.sim"',
        "from \\\n    llm_ramp.loadgen.sim import",
        'NOTE = "é"; from llm_ramp.loadgen.types import Target',
    ):
        assert kept in out, kept
    # every other line is the same line
    changed = [(a, b) for a, b in zip(SOURCE.splitlines(), out.splitlines(), strict=True) if a != b]
    assert len(changed) == 8, changed


def test_a_bare_import_of_a_root_is_refused() -> None:
    with pytest.raises(SETUP.RewriteError, match=r"x\.py:2: 'import loadgen\.record' binds 'loadgen'"):
        SETUP.namespaced("import sys\nimport loadgen.record\n", MODULES, "x.py")


def test_the_rewrite_is_idempotent() -> None:
    once = SETUP.namespaced(SOURCE, MODULES, "example.py")
    assert SETUP.namespaced(once, MODULES, "example.py") == once


def test_the_module_names_are_the_checkouts_packages_and_modules() -> None:
    names = SETUP.module_names()
    assert {
        "loadgen.sim",
        "loadgen.builtin_profiles",
        "loadgen.cli.commands",
        "tui.app",
        "loadgen.config",
    } <= names
    assert "loadgen" not in names and "tui" not in names  # a root alone is a word too
    assert all(n.split(".")[0] in ("loadgen", "tui") for n in names)


def test_the_wheel_layout_puts_every_package_under_llm_ramp() -> None:
    layout = SETUP.wheel_layout()
    assert all(p == "llm_ramp" or p.startswith("llm_ramp.") for p in layout["packages"])
    assert {"llm_ramp", "llm_ramp.loadgen", "llm_ramp.tui", "llm_ramp.loadgen.builtin_profiles"} <= set(
        layout["packages"]
    )
    assert layout["package_dir"]["llm_ramp.loadgen.builtin_profiles"] == "profiles"
    assert layout["package_data"]["llm_ramp.tui"] == ["*.tcss"]
    dev = SETUP.checkout_layout()
    assert {"loadgen", "tui", "llm_ramp", "loadgen.builtin_profiles"} <= set(dev["packages"])


def test_in_a_checkout_llm_ramp_names_the_same_modules() -> None:
    """One module object under both names (one RampPlan class, not two), its own spec kept. (``tui`` goes
    the same way; importing it here would cost the unit tier Textual.)"""
    from llm_ramp.loadgen import config as aliased
    from llm_ramp.loadgen.config import RampPlan

    import llm_ramp
    import loadgen.config

    assert aliased is loadgen.config and RampPlan is loadgen.config.RampPlan
    assert llm_ramp.loadgen is sys.modules["loadgen"] is sys.modules["llm_ramp.loadgen"]
    assert importlib.import_module("llm_ramp.loadgen.types") is importlib.import_module("loadgen.types")
    assert aliased.__spec__ is not None and aliased.__spec__.name == "loadgen.config"
    assert sys.modules["loadgen"].__spec__.name == "loadgen"
    assert RampPlan.__module__ == "loadgen.config"  # what pickle writes for the workers
