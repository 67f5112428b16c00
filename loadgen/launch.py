"""Shim, to be removed: the old home of the server process (now ``loadgen.serverproc``, with the process-group
plumbing in ``loadgen.childproc``) and of ``ramp launch`` (now ``loadgen.launch_cmd``). Still imported by
tests/test_vllm_real.py."""

from loadgen.childproc import own_process_group
from loadgen.serverproc import (
    KINDS,
    Launched,
    LaunchError,
    PortInUse,
    free_port,
    launch_and_wait,
    launch_server,
    redact_argv,
    server_argv,
)

__all__ = [
    "KINDS",
    "LaunchError",
    "Launched",
    "PortInUse",
    "free_port",
    "launch_and_wait",
    "launch_server",
    "own_process_group",
    "redact_argv",
    "server_argv",
]
