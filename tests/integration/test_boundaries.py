"""The engine package never imports the UI libraries: it must run headless and from plain scripts."""

import ast
import pathlib
import subprocess
import sys

LOADGEN = pathlib.Path(__file__).resolve().parents[2] / "loadgen"


def test_loadgen_source_never_imports_textual_or_rich() -> None:
    offenders = []
    for path in LOADGEN.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.name}:{node.lineno} {n}" for n in names if n.split(".")[0] in ("textual", "rich")
            ]
    assert offenders == []


def test_importing_every_loadgen_module_leaves_textual_unloaded() -> None:
    # httpx may pull in rich through its optional CLI module; textual must never come in.
    code = (
        "import sys, pkgutil, importlib, loadgen\n"
        "for m in pkgutil.walk_packages(loadgen.__path__, 'loadgen.'):\n"
        "    if m.name.endswith('__main__'): continue\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except ModuleNotFoundError as exc:  # a module of an extra not installed (the otel extra's)\n"
        "        if (exc.name or '').split('.')[0] not in ('opentelemetry', 'ray'): raise\n"
        "print(','.join(sorted(n for n in sys.modules if n.split('.')[0] == 'textual')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"loadgen pulled in textual: {out.stdout.strip()}"
