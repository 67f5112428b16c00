"""The command-line faces of ``ramp``, one package: ``main`` (the argument tree and the dispatch), ``flags``
(the run's flags, typed), ``resolve`` (flags and profile into a ``RunConfig``), ``checks`` (the flags that
cannot work), ``sources`` (the replay flags), ``headless`` (the headless face), ``launch`` (``ramp launch``)
and ``selftest`` (``ramp selftest``). ``main`` is exported for the ``ramp`` entry point
(``loadgen.cli:main``); ``python -m loadgen.cli`` is ``__main__``.
"""

from loadgen.cli.main import main

__all__ = ["main"]
