"""A local ``tokenizer.json`` (``--tokenizer PATH``): token counts for prompt sizing where the server has no
``/tokenize`` (OpenAI, TGI, llama.cpp, most gateways).

Owns loading the file through Hugging Face's ``tokenizers`` package (the optional extra ``tokenizer``,
imported on first use), its identity (path and the sha256 of its bytes, which the record states) and
counting (``count``: the ids ``encode`` gives, special tokens included, as a server counts a completions
prompt). A file that cannot be used raises ``TokenizerFileError`` with one line naming the path and what to
do; ``tokenizer_problem`` returns that line instead, for flag checks.
"""

from __future__ import annotations

import functools
import hashlib
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["LocalTokenizer", "TokenizerFileError", "load_tokenizer", "tokenizer_problem"]

INSTALL_HINT = "pip install 'llm-ramp[tokenizer]' (the tokenizers package)"


class TokenizerFileError(Exception):
    """The ``--tokenizer`` file cannot be used; the message names it and says what to do."""


@dataclass(frozen=True)
class LocalTokenizer:
    """A loaded ``tokenizer.json``: where it is, the sha256 of its bytes, and the tokenizer."""

    path: str
    sha256: str
    tokenizer: Tokenizer

    def count(self, text: str) -> int:
        return len(self.tokenizer.encode(text).ids)

    def describe(self) -> str:
        return f"{self.path} (sha256 {self.sha256[:12]})"


def load_tokenizer(path: str) -> LocalTokenizer:
    """Load ``path``; ``TokenizerFileError`` (one line) when it is missing, unreadable or not a tokenizer."""
    return _load(os.path.abspath(os.path.expanduser(path)), path)


@functools.lru_cache(maxsize=4)
def _load(full: str, shown: str) -> LocalTokenizer:
    if os.path.isdir(full):
        hint = (
            f" (try {os.path.join(shown, 'tokenizer.json')})"
            if os.path.isfile(os.path.join(full, "tokenizer.json"))
            else ""
        )
        raise TokenizerFileError(f"--tokenizer {shown}: a folder, not a tokenizer.json file{hint}")
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        raise TokenizerFileError(
            f"--tokenizer {shown}: no such file (give the path of a tokenizer.json)"
        ) from None
    except OSError as exc:
        raise TokenizerFileError(f"--tokenizer {shown}: cannot read it ({exc.strerror or exc})") from None
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerFileError(f"--tokenizer needs the tokenizers package: {INSTALL_HINT}") from None
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # not UTF-8 (UnicodeDecodeError), or the Rust side's plain Exception
        why = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise TokenizerFileError(
            f"--tokenizer {shown}: not a Hugging Face tokenizer.json ({why}); give the model's tokenizer.json"
        ) from None
    return LocalTokenizer(path=full, sha256=hashlib.sha256(data).hexdigest(), tokenizer=tokenizer)


def tokenizer_problem(path: str) -> str | None:
    """Why ``--tokenizer path`` cannot be used (one line), or None when it loads."""
    try:
        load_tokenizer(path)
    except TokenizerFileError as exc:
        return str(exc)
    return None
