"""The run state's one writer (tests/house/house_rules.py's "state" rule): which names of a module stand for a
`RunStatus` or a `Load`, and what an assignment assigns. Pure AST helpers, kept apart for the size rule."""

from __future__ import annotations

import ast

# The type, the name its objects go by, and the fields only the owner assigns.
OWNED_FIELDS: dict[str, frozenset[str]] = {
    "RunStatus": frozenset({"state", "message"}),
    "Load": frozenset({"mode", "level", "rate", "paused", "auto", "plan", "plan_index"}),
}
OWNED_BY_NAME = {"status": "RunStatus", "load": "Load"}


def last_name(node: ast.expr) -> str | None:
    """`self.status` → `status`, `load` → `load`; None for anything else (a call, a subscript ...)."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def owned_type(node: ast.expr | None) -> str | None:
    """The owned type an annotation names (`Load`, `Load | None`, `"RunStatus"`), else None."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if node.value in OWNED_FIELDS else None
    found = [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in OWNED_FIELDS]
    return found[0] if found else None


def built_type(value: ast.expr, names: dict[str, str]) -> str | None:
    """The owned type of an assigned value: its constructor (`Load(...)`, `Load.of(...)`) or an alias."""
    if isinstance(value, ast.Call):
        func = value.func.value if isinstance(value.func, ast.Attribute) else value.func
        return func.id if isinstance(func, ast.Name) and func.id in OWNED_FIELDS else None
    name = last_name(value)
    return names.get(name) if name is not None else None


def owned_names(nodes: tuple[ast.AST, ...]) -> dict[str, str]:
    """The names this module binds to a `RunStatus` or a `Load` → that type."""
    names = dict(OWNED_BY_NAME)
    for _ in range(2):  # an alias of an alias
        for node in nodes:
            if isinstance(node, ast.arg) and (kind := owned_type(node.annotation)) is not None:
                names[node.arg] = kind
            elif isinstance(node, ast.AnnAssign) and (name := last_name(node.target)) is not None:
                kind = owned_type(node.annotation)
                if kind is None and node.value is not None:
                    kind = built_type(node.value, names)
                if kind is not None:
                    names[name] = kind
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                name, kind = last_name(node.targets[0]), built_type(node.value, names)
                if name is not None and kind is not None:
                    names[name] = kind
    return names


def assigned_targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        targets = [node.target]
    else:
        return []
    flat: list[ast.expr] = []
    while targets:
        target = targets.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            targets += target.elts
        else:
            flat.append(target.value if isinstance(target, ast.Starred) else target)
    return flat
