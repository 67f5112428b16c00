"""The house rules that a parser can check (tests/house/test_house.py runs them): sizes, private names kept
inside their module, no erased types, runtime names in their adapters, the run state's one writer.

Every .py file under loadgen/, tui/, tests/ and benchmarks/ is parsed once with `ast`; each rule lists every
violation it finds, each naming `file:line` and the rule. The same checks run from the command line, for one
helper's files at a time:

    python tests/house/house_rules.py                       # every file
    python tests/house/house_rules.py loadgen/run tui/app.py

Rules (see ../shared/ARCHITECTURE.md, "Rules that keep the house standing"):
- size: a module at most 500 lines, a class 300, a function or method 60 (def line to last line).
- private: no `_name` crosses a module: `from m import _x`, `m._x` on an imported name, `obj._x` where this
  module never defines `_x`, and `setattr(obj, "_x", ...)`/`monkeypatch.setattr(m, "_x", ...)` alike.
  Allowed: namedtuple's `_replace`/`_asdict`/`_fields`/`_make`, `sys._getframe`, `os._exit` (see below).
- ignore: no `# type: ignore[attr-defined]` comment, and no bare one (it hides attr-defined too).
- reflection: no `getattr`/`hasattr`/`setattr`/`delattr` in loadgen/ or tui/, except on an imported module
  (`hasattr(os, "sched_setaffinity")`) or a call listed in REFLECTION_ALLOWED with its reason.
- runtime: a runtime's name ("vllm", "sglang", any case) in a string of loadgen/ or tui/ only inside
  loadgen/runtimes/ (each runtime's one adapter) and loadgen/sim/ (which imitates them). What a runtime's
  name stands for (a metric name, an endpoint, a message) is its adapter's; everything else asks it.
  Docstrings and comments may name them: prose that says why, not knowledge the code acts on. Tests and
  benchmarks/ are outside the rule: they hold real servers' captures and measure against them.
- metric: a metric's name (each histogram metric of loadgen/measures.py's catalogue) is written out as a string
  in loadgen/ or tui/ only in loadgen/measures.py and loadgen/sim/ (which speaks the server's side); everywhere
  else it is `measures.<NAME>`. A string that begins with a name and a class split's `|` counts too. Tests
  and benchmarks/ are outside the rule.
- state: the run's state has one writer, `loadgen/run/state.py`: no other module of loadgen/ or tui/
  assigns `RunStatus.state`/`.message` or a field of `Load` (it calls their methods). An object counts as
  one when its name says so (`status`, `load`, `self.status`, `ctl.load` ...), or the module annotates a
  name with the type, builds it (`RunStatus(...)`, `Load.of(...)`) or aliases one (`lv = self.load`).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from structure_state import OWNED_FIELDS, assigned_targets, last_name, owned_names

from loadgen import measures

ROOT = Path(__file__).resolve().parents[2]
CHECKED_DIRS = ("loadgen", "tui", "tests", "benchmarks")
REFLECTION_DIRS = ("loadgen", "tui")
RUNTIME_DIRS = ("loadgen", "tui")  # the product: where a runtime's name is its adapter's alone
RUNTIME_HOMES = ("loadgen/runtimes/", "loadgen/sim/")
_RUNTIME_RE = re.compile(r"vllm|sglang", re.IGNORECASE)

MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 60

# Private names of the standard library that are their owners' documented API, on any object ...
PRIVATE_ALLOWED: dict[str, str] = {
    "_replace": "namedtuple's public API (the underscore only avoids clashing with field names)",
    "_asdict": "namedtuple's public API",
    "_fields": "namedtuple's public API",
    "_make": "namedtuple's public API",
    "_field_defaults": "namedtuple's public API",
}
# ... and on one named module only.
PRIVATE_ALLOWED_ON: dict[str, str] = {
    "sys._getframe": "the documented way to read a caller's frame",
    "os._exit": "leave a forked or child process without running the parent's atexit handlers",
}

# Reflection calls allowed by their exact source (as `ast.unparse` prints it), each with its reason.
REFLECTION_ALLOWED: dict[str, str] = {
    "getattr(task, 'uncancel', None)": "asyncio.Task.uncancel exists from Python 3.11 only",
    "getattr(seen, 'errno', None)": "a third-party or OS exception: errno is optional on it",
    "getattr(os_error, 'errno', None)": "aiohttp's wrapped OSError: errno is optional on it",
    "getattr(seen, 'os_error', None)": "only aiohttp's connector errors carry os_error; the others do not",
    "getattr(self, f.name)": "dataclass field reflection over dataclasses.fields(self)",
    "getattr(value, f.name)": "dataclass field reflection over dataclasses.fields(value)",
    "getattr(args, key)": "argparse.Namespace: flags looked up by their dest names",
}

REFLECTION_CALLS = frozenset({"getattr", "hasattr", "setattr", "delattr"})
_IGNORE_RE = re.compile(r"#\s*type:\s*ignore(?!\[)|#\s*type:\s*ignore\[[^\]]*\battr-defined\b")


@dataclass(frozen=True, slots=True)
class Violation:
    path: str
    line: int
    rule: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.rule}] {self.what}"


@dataclass(frozen=True, slots=True)
class Parsed:
    rel: str
    lines: tuple[str, ...]
    tree: ast.Module
    comments: tuple[tuple[int, str], ...]  # (line, text) of each comment, found by the tokenizer
    nodes: tuple[ast.AST, ...]  # ast.walk(tree), walked once for every rule


def parse_source(rel: str, text: str) -> Parsed:
    tree = ast.parse(text, filename=rel)
    comments: tuple[tuple[int, str], ...] = ()
    if _IGNORE_RE.search(
        text
    ):  # the comments matter to the ignore rule alone: tokenize only where it may hit
        tokens = tokenize.generate_tokens(io.StringIO(text).readline)
        comments = tuple((t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT)
    return Parsed(rel, tuple(text.splitlines()), tree, comments, tuple(ast.walk(tree)))


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name.strip("_") != ""


def source_files() -> list[str]:
    found: list[str] = []
    for top in CHECKED_DIRS:
        found += sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / top).rglob("*.py"))
    return found


def parsed(rel: str) -> Parsed:
    return parse_source(rel, (ROOT / rel).read_text(encoding="utf-8"))


# ---- size ---------------------------------------------------------------------------------------------


def size_violations(p: Parsed) -> Iterator[Violation]:
    if len(p.lines) > MAX_MODULE_LINES:
        yield Violation(p.rel, 1, "size", f"module has {len(p.lines)} lines (max {MAX_MODULE_LINES})")
    for node in p.nodes:
        if isinstance(node, ast.ClassDef):
            kind, limit = "class", MAX_CLASS_LINES
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind, limit = "function", MAX_FUNCTION_LINES
        else:
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length > limit:
            yield Violation(
                p.rel, node.lineno, "size", f"{kind} {node.name} has {length} lines (max {limit})"
            )


# ---- private names ------------------------------------------------------------------------------------


def _slot_names(node: ast.Assign | ast.AnnAssign) -> Iterator[str]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    if node.value is None or not any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets):
        return
    for item in ast.walk(node.value):
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            yield item.value


def own_names(nodes: tuple[ast.AST, ...]) -> set[str]:
    """Every name this module defines: defs, classes, assignments (self._x too), arguments, slots, aliases."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias) and node.asname:
            names.add(node.asname)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            names.update(node.names)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            names.update(_slot_names(node))
    return names


def imported_names(nodes: tuple[ast.AST, ...]) -> set[str]:
    """Local names bound by imports: `m` in `m._x` then reaches into another module."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def _string_arg(call: ast.Call, index: int) -> str | None:
    if len(call.args) > index:
        arg = call.args[index]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def _reflected_private(call: ast.Call, own: set[str]) -> str | None:
    """`setattr(obj, "_x", v)`, `monkeypatch.setattr(m, "_x", v)` or `monkeypatch.setattr("a.b._x", v)`."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name not in REFLECTION_CALLS | {"delitem", "setitem"}:
        return None
    dotted = _string_arg(call, 0)
    if dotted and "." in dotted and not dotted.startswith("."):
        last = dotted.rsplit(".", 1)[1]
        if _is_private(last) and last not in PRIVATE_ALLOWED:
            return last
    attr = _string_arg(call, 1)
    if attr and _is_private(attr) and attr not in own and attr not in PRIVATE_ALLOWED:
        return attr
    return None


def _private_import(node: ast.Import | ast.ImportFrom) -> str | None:
    """`from m import _x`, `from pkg._mod import x` or `import pkg._mod`: what is reached, else None."""
    modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
    for module in modules:
        if any(_is_private(part) for part in module.split(".")):
            return f"imports the private module {module}"
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            if _is_private(alias.name) and alias.name not in PRIVATE_ALLOWED:
                return f"imports {alias.name} from {node.module or '.'}"
    return None


def private_violations(p: Parsed) -> Iterator[Violation]:
    own, imported = own_names(p.nodes), imported_names(p.nodes)
    for node in p.nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            what = _private_import(node)
            if what:
                yield Violation(p.rel, node.lineno, "private", what)
        elif isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr not in PRIVATE_ALLOWED:
            base = node.value.id if isinstance(node.value, ast.Name) else None
            if f"{base}.{node.attr}" in PRIVATE_ALLOWED_ON:
                continue
            if base is not None and base in imported and base not in ("self", "cls"):
                yield Violation(
                    p.rel, node.lineno, "private", f"reaches {base}.{node.attr} in another module"
                )
            elif node.attr not in own:
                shown = ast.unparse(node)
                yield Violation(
                    p.rel, node.lineno, "private", f"reaches {shown}: {node.attr} is not this module's"
                )
        elif isinstance(node, ast.Call):
            name = _reflected_private(node, own)
            if name:
                yield Violation(p.rel, node.lineno, "private", f"reaches {name} by name: {ast.unparse(node)}")


# ---- type: ignore -------------------------------------------------------------------------------------


def ignore_violations(p: Parsed) -> Iterator[Violation]:
    for number, comment in p.comments:
        if _IGNORE_RE.search(comment):
            what = "type: ignore[attr-defined]" if "attr-defined" in comment else "bare type: ignore"
            yield Violation(p.rel, number, "ignore", f"{what}: type the object instead")


# ---- reflection ---------------------------------------------------------------------------------------


def module_aliases(nodes: tuple[ast.AST, ...]) -> set[str]:
    """Names bound by `import x` / `import x as y`: reflection on a module object is allowed."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(a.asname or a.name.split(".")[0] for a in node.names)
    return names


def reflection_violations(p: Parsed) -> Iterator[Violation]:
    if p.rel.split("/", 1)[0] not in REFLECTION_DIRS:
        return
    modules = module_aliases(p.nodes)
    for node in p.nodes:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in REFLECTION_CALLS or not node.args:
            continue
        target = node.args[0]
        if isinstance(target, ast.Name) and target.id in modules:
            continue
        source = ast.unparse(node)
        if source not in REFLECTION_ALLOWED:
            yield Violation(p.rel, node.lineno, "reflection", f"{source}: use the object's type instead")


# ---- runtime names -------------------------------------------------------------------------------------


def _docstrings(nodes: tuple[ast.AST, ...]) -> set[int]:
    """The ids of the docstring constants of the module, its classes and its functions."""
    found: set[int] = set()
    for node in nodes:
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def runtime_violations(p: Parsed) -> Iterator[Violation]:
    if p.rel.split("/", 1)[0] not in RUNTIME_DIRS or p.rel.startswith(RUNTIME_HOMES):
        return
    docstrings = _docstrings(p.nodes)
    for node in p.nodes:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        if _RUNTIME_RE.search(node.value):
            what = f"{node.value[:60]!r} names a runtime: ask its adapter (loadgen.runtimes) instead"
            yield Violation(p.rel, node.lineno, "runtime", what)


# ---- metric names ----------------------------------------------------------------------------------

METRIC_DIRS = ("loadgen", "tui")
METRIC_HOMES = ("loadgen/measures.py", "loadgen/sim/")  # the catalogue, and the server's side imitated


@functools.cache
def metric_names() -> frozenset[str]:
    return frozenset(m.name for m in measures.histogram_metrics())


def literal_names(nodes: tuple[ast.AST, ...], names: frozenset[str]) -> Iterator[tuple[int, str]]:
    """Each string constant (f-string pieces included) that is a metric's name, or begins with one and a
    class split's ``|``."""
    for node in nodes:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text in names or (text.split("|", 1)[0] in names and "|" in text):
                yield node.lineno, text


def metric_violations(p: Parsed) -> Iterator[Violation]:
    if p.rel.split("/", 1)[0] not in METRIC_DIRS or p.rel.startswith(METRIC_HOMES):
        return
    for line, text in literal_names(p.nodes, metric_names()):
        yield Violation(p.rel, line, "metric", f"{text!r} is a metric's name: write measures.<NAME> instead")


# ---- the run state's one writer ---------------------------------------------------------------------

STATE_OWNER = "loadgen/run/state.py"
STATE_DIRS = ("loadgen", "tui")


def state_violations(p: Parsed) -> Iterator[Violation]:
    if p.rel == STATE_OWNER or p.rel.split("/", 1)[0] not in STATE_DIRS:
        return
    names = owned_names(p.nodes)
    for node in p.nodes:
        for target in assigned_targets(node):
            if not isinstance(target, ast.Attribute):
                continue
            owner = last_name(target.value)
            kind = names.get(owner) if owner is not None else None
            if kind is not None and target.attr in OWNED_FIELDS[kind]:
                yield Violation(
                    p.rel,
                    target.lineno,
                    "state",
                    f"{ast.unparse(target)} is assigned outside {STATE_OWNER}: call a {kind} method there",
                )


# ---- all rules ----------------------------------------------------------------------------------------

RULES = {
    "size": size_violations,
    "private": private_violations,
    "ignore": ignore_violations,
    "reflection": reflection_violations,
    "runtime": runtime_violations,
    "metric": metric_violations,
    "state": state_violations,
}
FILES = source_files()


def violations(rel: str, rules: tuple[str, ...] = tuple(RULES)) -> list[Violation]:
    p = parsed(rel)
    return sorted((v for rule in rules for v in RULES[rule](p)), key=lambda v: (v.line, v.rule))


@functools.cache
def _house() -> tuple[Violation, ...]:
    """Every rule's violations in every checked file, each file parsed once and its tree let go: the trees of
    the whole house (~600,000 nodes) kept alive would slow every later garbage collection of the process
    (pytest's last ones took 5 s)."""
    return tuple(v for rel in FILES for v in violations(rel))


def every_violation(*rules: str) -> list[Violation]:
    """Every violation of `rules` in every checked file, in file order: a test lists them all, not the first."""
    return [v for v in _house() if v.rule in rules]


def listed(found: list[Violation]) -> str:
    return f"{len(found)} violations:\n" + "\n".join(str(v) for v in found)


# ---- command line -------------------------------------------------------------------------------------


def _expand(args: list[str]) -> list[str]:
    if not args:
        return FILES
    chosen: list[str] = []
    for arg in args:
        path = Path(arg).resolve()
        found = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        chosen += [f.relative_to(ROOT).as_posix() for f in found]
    return chosen


def main(args: list[str]) -> int:
    found = [v for rel in _expand(args) for v in violations(rel)]
    for v in found:
        print(v)
    counts = {rule: sum(v.rule == rule for v in found) for rule in RULES}
    print(f"{len(found)} violations: " + ", ".join(f"{rule} {n}" for rule, n in counts.items()))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
