"""The command-line faces of ``ramp``, one package: ``commands`` (the argument tree and the dispatch), ``flags``
(the run's flags, typed), ``resolve`` (flags and profile into a ``RunConfig``), ``checks`` (the flags that
cannot work), ``sources`` (the replay flags), ``headless`` (the headless face), ``launch`` (``ramp launch``)
``selftest`` (``ramp selftest``) and ``hidden_args`` (secrets kept off the command line). ``main`` is the ``ramp`` entry point (``loadgen.cli:main``), importing
``loadgen.cli.commands`` only when called, so that importing one of these modules does not build the command
line; ``python -m loadgen.cli`` is ``__main__``.
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """``ramp``: ``loadgen.cli.commands.main``. Given no ``argv``, a secret on the command line is moved off it
    first (``hidden_args``: a re-execution), before the command line's modules are imported, so that ``ps``
    shows it for as short a time as can be (the interpreter's start and this package's import)."""
    import sys

    from loadgen.cli.hidden_args import arguments

    given = arguments(sys.argv[1:]) if argv is None else argv
    from loadgen.cli.commands import main as ramp

    return ramp(given)
