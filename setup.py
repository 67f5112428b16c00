"""The package list and the one namespace of the installed wheel (everything else about the build is in
pyproject.toml).

The checkout keeps ``loadgen/``, ``tui/`` and ``profiles/`` at the top and imports them by those names. A
wheel that installed them so would claim the top-level names ``loadgen`` and ``tui``, and ``tui`` is
another project on PyPI: with both installed, one overwrites the other's files. So the wheel (and the
sdist's wheel) installs one package, ``llm_ramp``: ``llm_ramp/loadgen/...``, ``llm_ramp/tui/...``, and the
built-in profiles as ``llm_ramp.loadgen.builtin_profiles``. Every built copy of a module has its absolute
imports of ``loadgen``/``tui`` and the strings that name one of our modules exactly (``"loadgen.sim"`` for
``python -m``, ``"loadgen.builtin_profiles"`` for importlib.resources) prefixed with ``llm_ramp.``, found by
``ast`` and replaced token by token (``tokenize``): comments and prose are left as they are.

An editable install (``pip install -e .``) keeps the checkout's layout (``loadgen``, ``tui`` and ``llm_ramp``
at the top, nothing rewritten); ``llm_ramp`` there aliases ``llm_ramp.loadgen``/``llm_ramp.tui`` to them
(``llm_ramp/_checkout.py``), so that ``ramp`` (``llm_ramp.cli:main``) and code written against the
installed names run in both. tests/integration/test_packaging.py builds and installs the wheel.
"""

from __future__ import annotations

import ast
import io
import os
import shutil
import tokenize
from pathlib import Path
from typing import Any

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.develop import develop
from setuptools.command.editable_wheel import editable_wheel

NAMESPACE = "llm_ramp"
ROOTS = ("loadgen", "tui")  # the checkout's top-level packages, under NAMESPACE in the wheel
HERE = Path(__file__).resolve().parent


def checkout_layout() -> dict[str, Any]:
    """setup()'s packages, package_dir and package_data as the checkout names them."""
    packages = [*find_packages(where=str(HERE), include=["loadgen", "loadgen.*", "tui", "tui.*"])]
    return {
        "packages": sorted([*packages, "loadgen.builtin_profiles", NAMESPACE]),
        "package_dir": {"loadgen.builtin_profiles": "profiles"},
        "package_data": {
            "loadgen.builtin_profiles": ["*.toml"],
            "tui": ["*.tcss"],
            "loadgen.report": ["report_schema.json"],
        },
    }


def installed_name(name: str) -> str:
    """A module's name in the wheel: ``loadgen.x`` -> ``llm_ramp.loadgen.x``; ``llm_ramp.*`` as it is."""
    return f"{NAMESPACE}.{name}" if name.split(".")[0] in ROOTS else name


def wheel_layout() -> dict[str, Any]:
    """The checkout's layout under NAMESPACE: each root's folder maps to ``llm_ramp.<root>``."""
    dev = checkout_layout()
    package_dir = {installed_name(root): root for root in ROOTS}
    package_dir |= {installed_name(k): v for k, v in dev["package_dir"].items()}
    return {
        "packages": [installed_name(p) for p in dev["packages"]],
        "package_dir": package_dir,
        "package_data": {installed_name(k): v for k, v in dev["package_data"].items()},
    }


def module_names() -> set[str]:
    """Every package and module under the checkout's roots, by its checkout name: what a string must equal,
    exactly, to be rewritten (``"loadgen.sim"``; ``"loadgen"`` and ``"tui"`` alone are not)."""
    dev = checkout_layout()
    names: set[str] = set()
    for package in dev["packages"]:
        if package.split(".")[0] not in ROOTS:
            continue
        folder = HERE / dev["package_dir"].get(package, package.replace(".", "/"))
        if "." in package:  # a root alone ("tui") may as well be a word: only dotted names are rewritten
            names.add(package)
        names |= {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    return names


class RewriteError(ValueError):
    """A module the rewrite cannot make right (the build stops, naming the file and line)."""


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def namespaced(source: str, modules: set[str], filename: str = "<module>") -> str:
    """``source`` with its absolute imports of ROOTS, and the strings equal to one of ``modules``, under
    NAMESPACE. ``import loadgen.x`` without ``as`` is refused: it binds ``loadgen``, which the wheel has not."""
    tree = ast.parse(source, filename)
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    at = {t.start: i for i, t in enumerate(tokens)}

    def char_col(lineno: int, byte_col: int) -> int:  # ast's columns count UTF-8 bytes
        return len(lines[lineno - 1].encode("utf-8")[:byte_col].decode("utf-8"))

    def token_at(node: ast.stmt | ast.expr | ast.alias) -> int:
        where = (node.lineno, char_col(node.lineno, node.col_offset))
        if where not in at:
            raise RewriteError(f"{filename}:{node.lineno}: no token where ast puts {ast.dump(node)[:60]}")
        return at[where]

    edits: list[tuple[tokenize.TokenInfo, str]] = []
    docstrings = _docstrings(tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] in ROOTS
        ):
            i = token_at(node) + 1  # the token after `from`: the module's first name
            while tokens[i].type in (tokenize.NL, tokenize.COMMENT):
                i += 1
            if tokens[i].string not in ROOTS:
                raise RewriteError(f"{filename}:{node.lineno}: expected {node.module!r} after 'from'")
            edits.append((tokens[i], f"{NAMESPACE}.{tokens[i].string}"))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ROOTS:
                    continue
                if alias.asname is None:
                    raise RewriteError(
                        f"{filename}:{node.lineno}: 'import {alias.name}' binds {alias.name.split('.')[0]!r}, "
                        f"which the wheel does not install: write 'from ... import' or 'import ... as'"
                    )
                tok = tokens[token_at(alias)]
                edits.append((tok, f"{NAMESPACE}.{tok.string}"))
        elif isinstance(node, ast.Constant) and node.value in modules and id(node) not in docstrings:
            tok = tokens[token_at(node)]
            if tok.type != tokenize.STRING or ast.literal_eval(tok.string) != node.value:
                raise RewriteError(
                    f"{filename}:{node.lineno}: {node.value!r} is not one plain string literal"
                )
            edits.append((tok, f'"{NAMESPACE}.{node.value}"'))
    out = source
    for tok, text in sorted(edits, key=lambda e: e[0].start, reverse=True):
        begin = starts[tok.start[0] - 1] + tok.start[1]
        end = starts[tok.end[0] - 1] + tok.end[1]
        out = out[:begin] + text + out[end:]
    return out


class BuildPy(build_py):
    """Copies each module as setuptools does, then, in the wheel's layout, writes the namespaced text over
    the copy (read from the checkout's file each time, so a build folder left from before is no matter)."""

    def _namespaced(self) -> bool:
        return not self.editable_mode and installed_name(ROOTS[0]) in (self.distribution.packages or ())

    def run(self) -> None:
        if self._namespaced():
            for root in ROOTS:  # a build folder from before the namespace: its top-level copies would ship
                stale = os.path.join(self.build_lib, root)
                if os.path.isdir(stale):
                    self.announce(f"removing {stale} (the old layout)", level=2)
                    shutil.rmtree(stale)
        super().run()

    def build_module(self, module: str, module_file: str, package: str) -> tuple[str, bool]:
        outfile, copied = super().build_module(module, module_file, package)
        if self._namespaced():
            text = Path(module_file).read_text(encoding="utf-8")
            Path(outfile).write_text(namespaced(text, module_names(), module_file), encoding="utf-8")
        return outfile, copied


def _use_checkout_layout(distribution: object) -> None:
    for key, value in checkout_layout().items():
        setattr(distribution, key, value)


class EditableWheel(editable_wheel):
    """``pip install -e .``: the checkout's own layout, so that its folders are the installed packages."""

    def finalize_options(self) -> None:
        _use_checkout_layout(self.distribution)
        super().finalize_options()


class Develop(develop):
    """``setup.py develop`` (an old pip's editable install): the checkout's layout too."""

    def finalize_options(self) -> None:
        _use_checkout_layout(self.distribution)
        super().finalize_options()


if __name__ == "__main__":
    setup(
        **wheel_layout(), cmdclass={"build_py": BuildPy, "editable_wheel": EditableWheel, "develop": Develop}
    )
