"""The commit a local model directory holds, read from its own files (no git needed): a git checkout's
``.git/HEAD`` (a detached commit, or the branch it names, loose or packed), else what ``huggingface-cli
download --local-dir`` leaves beside the files (``.cache/huggingface/download/*.metadata``: the commit on its
first line). None when the path is not a local directory or says no commit.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["local_commit"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def _git_commit(root: Path) -> str | None:
    git = root / ".git"
    head = (_read(git / "HEAD") or "").strip()
    if _COMMIT.match(head):
        return head
    ref = head.removeprefix("ref:").strip() if head.startswith("ref:") else ""
    if not ref:
        return None
    loose = (_read(git / ref) or "").strip()
    if _COMMIT.match(loose):
        return loose
    for line in (_read(git / "packed-refs") or "").splitlines():
        commit, _, name = line.partition(" ")
        if name.strip() == ref and _COMMIT.match(commit):
            return commit
    return None


def _hf_local_dir_commit(root: Path) -> str | None:
    meta = root / ".cache" / "huggingface" / "download"
    try:
        files = sorted(meta.glob("*.metadata"))
    except OSError:
        return None
    for file in files:
        first = (_read(file) or "").splitlines()[:1]
        if first and _COMMIT.match(first[0].strip()):
            return first[0].strip()
    return None


def local_commit(path: str) -> str | None:
    """The commit of the model directory at ``path`` on this host, None when it names none."""
    root = Path(path)
    if not root.is_dir():
        return None
    return _git_commit(root) or _hf_local_dir_commit(root)
