"""The engine package never imports the UI libraries: it must run headless and from plain scripts."""

import subprocess
import sys


def test_loadgen_does_not_import_textual_or_rich() -> None:
    code = (
        "import sys, pkgutil, importlib, loadgen\n"
        "for m in pkgutil.walk_packages(loadgen.__path__, 'loadgen.'):\n"
        "    if m.name.endswith('__main__'): continue\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"loadgen pulled in UI modules: {out.stdout.strip()}"
