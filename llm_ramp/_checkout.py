"""A checkout's ``llm_ramp.loadgen``/``llm_ramp.tui``: the top-level ``loadgen`` and ``tui`` under the names the
wheel installs them by, as the same module objects (one ``RunConfig`` class, not two), by an import hook
that hands back the module of the name without the prefix. Never used by the wheel, whose ``llm_ramp``
holds the packages themselves."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

ROOTS = ("loadgen", "tui")
PREFIX = "llm_ramp."


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``llm_ramp.loadgen.x`` -> the module ``loadgen.x``, imported by its own name."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(PREFIX) or fullname[len(PREFIX) :].split(".")[0] not in ROOTS:
            return None
        module = importlib.import_module(fullname[len(PREFIX) :])
        return importlib.machinery.ModuleSpec(fullname, self, is_package=hasattr(module, "__path__"))

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = sys.modules[spec.name[len(PREFIX) :]]
        spec.loader_state = module.__spec__  # importlib sets __spec__ to this alias spec next: put back below
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Executed already, under its own name: only its own spec is put back (importlib.resources and
        reloads read it)."""
        alias = module.__spec__
        assert alias is not None
        module.__spec__ = alias.loader_state


def install() -> None:
    if not any(isinstance(f, _Alias) for f in sys.meta_path):
        sys.meta_path.insert(0, _Alias())
