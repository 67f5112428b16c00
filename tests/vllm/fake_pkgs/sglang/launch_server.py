"""Fake ``python -m sglang.launch_server`` (see tests/vllm/fake_server.py)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from fake_server import main  # noqa: E402

if __name__ == "__main__":
    main("sglang")
