"""Move the test files into the folders that say their tier (tests/tiers.py): each test file directly in
tests/ goes to tests/unit/<package>/, tests/integration/ or tests/e2e/ by the tier it has today, and each test
file directly in tests/unit/ to tests/unit/<package>/. Dry run by default (prints the plan); --apply moves
with `git mv` and fixes what the move would break:

- `Path(__file__)` lookups (`.parent`, `.parent.parent`, `.parents[N]`) climb as many folders more as the
  file went down, so ROOT, FIXTURES and the like still name the same folder;
- a test's `__snapshots__/<module>/` (the SVG snapshots of pytest-textual-snapshot) moves beside it;
- shared helper modules left in tests/unit/ (run_fakes.py ...) move up to tests/, beside tui_fakes.py and the
  others: tests/ is on sys.path for every test (tests/conftest.py's folder), a package folder is not;
- every path to a moved file or snapshot folder in the repository's tracked text files (.ci/run, docs/,
  pyproject.toml comments, docstrings) is rewritten to the new path;
- a test module that another test module imports by name (`from test_tui_baseline import live_config`) and
  that lands in another folder than its importer: its folder goes into pytest's `pythonpath`
  (pyproject.toml), as tests/ was for both before.

<package> is the loadgen package the file imports most (`loadgen.run.x` → run), `tui` for the console,
`loadgen` for loadgen's top-level modules (format, record, sse ...) and `repo` for a file that imports
none of them (docs, manifests, packaging checks); PACKAGE_OF overrides it for a file.

    python scripts/tier_tests.py            # the plan
    python scripts/tier_tests.py --apply    # git mv, then the fixes; run `python -m pytest -m unit` after
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
TIER_FOLDER = {"integration": TESTS / "integration", "e2e": TESTS / "e2e"}
PACKAGE_OF: dict[str, str] = {}  # a file's package where the imports say otherwise: {"test_x.py": "run"}
_FILE_PATH = re.compile(
    r"((?:pathlib\.)?Path\(__file__\)(?:\.resolve\(\))?)((?:\.parent\b)+|\.parents\[(\d+)\])"
)
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".sh", ".txt", ".cfg", ".ini", ""}


@dataclass(frozen=True)
class Move:
    source: Path
    target: Path

    def __str__(self) -> str:
        return f"{self.source.relative_to(ROOT)} -> {self.target.relative_to(ROOT)}"


def load_tiers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tiers", TESTS / "tiers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def package_of(path: Path) -> str:
    """The loadgen package (or tui) that `path` imports most; ties go to the one imported first."""
    if path.name in PACKAGE_OF:
        return PACKAGE_OF[path.name]
    seen: Counter[str] = Counter()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module] if node.module != "loadgen" else [f"loadgen.{a.name}" for a in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[0] == "tui":
                seen["tui"] += 1
            elif parts[0] == "loadgen" and len(parts) > 1:
                seen[parts[1] if (ROOT / "loadgen" / parts[1]).is_dir() else "loadgen"] += 1
    return seen.most_common(1)[0][0] if seen else "repo"


def plan(tiers: ModuleType) -> list[Move]:
    moves: list[Move] = []
    for path in sorted(TESTS.glob("test_*.py")):
        tier = tiers.tier_of(path)
        folder = TESTS / "unit" / package_of(path) if tier == "unit" else TIER_FOLDER[tier]
        moves.append(Move(path, folder / path.name))
    for path in sorted((TESTS / "unit").glob("*.py")):
        if path.name.startswith("test_"):
            moves.append(Move(path, TESTS / "unit" / package_of(path) / path.name))
        elif path.name != "conftest.py":  # a shared helper: up to tests/, on every test's sys.path
            moves.append(Move(path, TESTS / path.name))
    taken = sorted(str(m) for m in moves if m.target.exists())
    assert not taken, f"a file is already there: {taken}"
    return moves


def snapshot_moves(moves: list[Move]) -> list[Move]:
    found: list[Move] = []
    for move in moves:
        folder = move.source.parent / "__snapshots__" / move.source.stem
        if folder.is_dir():
            found.append(Move(folder, move.target.parent / "__snapshots__" / move.source.stem))
    return found


def imported_test_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return {name for name in names if name.startswith("test_")}


def shared_test_folders(moves: list[Move]) -> list[str]:
    """The folders of test modules that a test module in another folder imports by name, after the moves."""
    final = {m.source: m.target for m in moves}
    where = {final.get(p, p).stem: final.get(p, p).parent for p in TESTS.rglob("test_*.py")}
    folders: set[str] = set()
    for path in TESTS.rglob("test_*.py"):
        for name in imported_test_modules(path):
            if name in where and where[name] != final.get(path, path).parent:
                folders.add(where[name].relative_to(ROOT).as_posix())
    return sorted(folders)


def add_pythonpath(folders: list[str]) -> None:
    """pytest's `pythonpath` (pyproject.toml) gains `folders`, right after `testpaths`."""
    pyproject = ROOT / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    found = re.search(r"^pythonpath = \[(.*)\].*$", text, flags=re.MULTILINE)
    have = re.findall(r'"([^"]+)"', found.group(1)) if found else []
    line = (
        "pythonpath = [" + ", ".join(f'"{f}"' for f in sorted({*have, *folders})) + "]"
        "  # test modules that tests of other folders import by name (scripts/tier_tests.py)"
    )
    if found:
        text = text[: found.start()] + line + text[found.end() :]
    else:
        text = re.sub(
            r"^(testpaths = .*)$", lambda m: m.group(1) + "\n" + line, text, count=1, flags=re.MULTILINE
        )
    pyproject.write_text(text, encoding="utf-8")


def depth(path: Path) -> int:
    return len(path.relative_to(ROOT).parts)


def climb(text: str, delta: int) -> str:
    """Each `Path(__file__)...parent(s)` in `text` climbs `delta` folders more."""

    def moved(match: re.Match[str]) -> str:
        levels = int(match.group(3)) if match.group(3) is not None else match.group(2).count(".parent") - 1
        levels += delta
        assert levels >= 0, f"{match.group(0)} would climb below the file"
        return match.group(1) + (".parent" if levels == 0 else f".parents[{levels}]")

    return _FILE_PATH.sub(moved, text) if delta else text


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = [ROOT / name for name in out.decode().split("\0") if name]
    return [f for f in files if f.suffix in TEXT_SUFFIXES and f.is_file() and "__snapshots__" not in f.parts]


def rewrite_references(moves: list[Move]) -> list[str]:
    """Every `tests/...` path of a moved file or folder, in the tracked text files, becomes the new one."""
    table = {m.source.relative_to(ROOT).as_posix(): m.target.relative_to(ROOT).as_posix() for m in moves}
    pattern = re.compile(
        r"(?<![\w/.])(" + "|".join(re.escape(k) for k in sorted(table, key=len, reverse=True)) + r")(?![\w])"
    )
    changed: list[str] = []
    for path in tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = pattern.sub(lambda m: table[m.group(1)], text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path.relative_to(ROOT).as_posix())
    return changed


def git_mv(move: Move) -> None:
    move.target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "mv", str(move.source), str(move.target)], cwd=ROOT, check=True)


def apply(moves: list[Move], snapshots: list[Move]) -> None:
    shared = shared_test_folders(moves)
    for move in [*moves, *snapshots]:
        git_mv(move)
    for move in moves:
        delta = depth(move.target) - depth(move.source)
        text = move.target.read_text(encoding="utf-8")
        fixed = climb(text, delta)
        if fixed != text:
            move.target.write_text(fixed, encoding="utf-8")
            print(f"  Path(__file__) climbs {delta:+d}: {move.target.relative_to(ROOT)}")
    for name in rewrite_references([*moves, *snapshots]):
        print(f"  paths rewritten: {name}")
    if shared:
        add_pythonpath(shared)
        print(f"  pytest's pythonpath (pyproject.toml) += {shared}: test modules imported across folders")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--apply", action="store_true", help="git mv the files and fix the paths (default: dry run)"
    )
    args = parser.parse_args(argv)
    moves = plan(load_tiers())
    snapshots = snapshot_moves(moves)
    for move in [*moves, *snapshots]:
        print(move)
    by_tier = Counter(
        m.target.relative_to(TESTS).parts[0] for m in moves if m.target.name.startswith("test_")
    )
    print(
        f"{len(moves)} files, {len(snapshots)} snapshot folders: "
        + ", ".join(f"{k} {v}" for k, v in by_tier.items())
    )
    if not args.apply:
        print("dry run: nothing moved (--apply moves them)")
        return 0
    apply(moves, snapshots)
    print("moved. UNIT_FILES and E2E_FILES in tests/tiers.py now name no file: the folders decide")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
