"""llm-ramp's measuring engine: workload, streaming client, metrics, records and the controller.

Never imports textual or rich: every face (console, headless CLI, Python code) drives the same ``Engine``.
"""

__all__ = ["__version__"]

try:
    from importlib.metadata import version as _version

    __version__ = _version("llm-ramp")
except Exception:  # not installed (running from a checkout)
    __version__ = "0.1.0+local"
