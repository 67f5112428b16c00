"""Shim: the probe moved to ``loadgen.target.probe`` and ``/tokenize`` to ``loadgen.target.tokenize``.

Kept only while other modules still import from here; the lead removes it once they do not.
"""

from loadgen.target.probe import ServerInfo, probe
from loadgen.target.tokenize import tokenize_count

__all__ = ["ServerInfo", "probe", "tokenize_count"]
