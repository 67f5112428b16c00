"""The README's Python example stays true to the engine: it compiles, every name it imports exists, and
every ``engine.NAME(...)`` it shows (the comment's shorthands included) is a method of ``Engine``. The
operator's commands are one ``send`` of a ``ControlCommand`` value; the README's shorthands are kept."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from loadgen.profile import load_profile
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine, EngineControl
from loadgen.run.protocol import Mark, Pause, Resume, SetLevel
from loadgen.types import Target

README = Path(__file__).resolve().parents[3] / "README.md"
ENGINE_CALL = re.compile(r"\bengine\.([a-z_]+)\(")


def python_example() -> str:
    section = README.read_text(encoding="utf-8").split("\n## From Python\n", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_example_compiles_and_imports_what_exists() -> None:
    tree = ast.parse(python_example())
    imports = [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert imports
    for node in imports:
        assert node.module is not None
        module = importlib.import_module(node.module)
        for alias in node.names:
            assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


def test_every_engine_call_the_readme_shows_is_a_method() -> None:
    shown = set(ENGINE_CALL.findall(python_example()))
    assert {"start", "wait", "set_level", "pause", "mark", "stop"} <= shown
    for name in shown:
        assert callable(getattr(Engine, name, None)), f"the README shows engine.{name}(), Engine has none"


def test_the_shorthands_send_the_command_values() -> None:
    engine = Engine(RunConfig(Target("http://127.0.0.1:9"), load_profile("chat")))  # never started
    sent: list[object] = []
    engine.send = sent.append  # type: ignore[method-assign]
    engine.set_level(32)
    engine.pause()
    engine.resume()
    engine.mark("note")
    assert sent == [SetLevel(32), Pause(), Resume(), Mark("note")]


def test_a_face_needs_only_send_for_the_commands() -> None:
    members = {name for name in vars(EngineControl) if not name.startswith("_")}
    assert members == {"start", "stop", "interrupt", "wait", "latest", "done", "send"}
