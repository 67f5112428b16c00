"""``--ray`` with no address: the Ray that ramp starts itself listens on 127.0.0.1 only (its GCS, raylet,
agents and actors), and an address with a password is never shown. Needs Ray (the extra ``ray``): skipped
cleanly without it. Linux only (the listening sockets are read from /proc)."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loadgen.record import read_record
from loadgen.sim import build_config, spawn_sim_process

pytest.importorskip("ray")
if not sys.platform.startswith("linux"):
    pytest.skip("listening sockets are read from /proc", allow_module_level=True)


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo += children.get(pid, [])
    return found


def socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def hex_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp{,6}'s local address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(text)
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(swapped)


def listening(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket in LISTEN that one of ``pids`` holds."""
    inodes = socket_inodes(pids)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:
                host, port = fields[1].split(":")
                found.append((str(hex_address(host)), int(port, 16)))
    return found


def loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


@pytest.fixture(scope="module")
def sim() -> Iterator[Any]:
    handle = spawn_sim_process(build_config("fast"))
    yield handle
    handle.stop()


def test_the_ray_ramp_starts_listens_on_loopback_only(sim: Any, tmp_path: Path) -> None:
    out = tmp_path / "ray.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    args = ["--ray", "--workers", "1", "--headless", "--steps", "1", "--step-seconds", "120", "--warmup", "0"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "loadgen.cli", "run", sim.url, *args, "--no-metrics", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    watchdog = threading.Timer(180, proc.kill)  # a run that never gets to its step fails, never hangs
    watchdog.start()
    try:
        assert proc.stderr is not None
        said = []
        for line in proc.stderr:  # the first progress line: the cluster is up and the actor loads
            said.append(line)
            if line.startswith("step 1"):
                break
        else:
            pytest.fail("ramp --ray ended before its step: " + "".join(said)[-2000:])
        sockets = listening(descendants(proc.pid))
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=90)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
    assert len(sockets) >= 3, sockets  # the GCS, the raylet, the actor at least
    assert [s for s in sockets if not loopback(s[0])] == []
    assert proc.returncode == 130
    address = str(read_record(out).header["fleet"]["address"])
    assert address.startswith("127.0.0.1:"), address


def test_an_address_with_a_password_is_never_shown(sim: Any, tmp_path: Path) -> None:
    """A Ray address without a scheme (``user:pw@host:port``): scrub alone cannot see it as a URL."""
    args = [
        "--ray",
        "u:s3cretpw@127.0.0.1:1",
        "--headless",
        "--steps",
        "1",
        "--out",
        str(tmp_path / "r.jsonl"),
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "loadgen.cli", "run", sim.url, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode in (2, 3) and "Traceback" not in proc.stderr
    assert "--ray: cannot reach the Ray cluster" in proc.stderr  # the address was shown, and masked
    assert "s3cretpw" not in proc.stdout + proc.stderr
