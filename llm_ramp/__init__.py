"""llm-ramp, installed: ``llm_ramp.loadgen`` (the engine) and ``llm_ramp.tui`` (the console).

The wheel installs this one top-level package (setup.py). In a checkout, and its editable install, the
packages are the top-level folders ``loadgen/`` and ``tui/``; importing ``llm_ramp`` there makes
``llm_ramp.loadgen`` and ``llm_ramp.tui`` the same modules (``_checkout``), so code written against the
installed names runs from a checkout too.
"""

from pathlib import Path as _Path

if not (_Path(__file__).parent / "loadgen").is_dir():  # a checkout: the packages are beside this folder
    from llm_ramp import _checkout

    _checkout.install()
