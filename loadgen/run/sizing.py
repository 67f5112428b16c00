"""Which tokenizer sizes the run's prompts, and the sizer it gives: the server's ``/tokenize`` when it has one,
else a local ``tokenizer.json`` (``--tokenizer PATH``), else the estimate (``loadgen.workload``).

``fit_sizer`` returns the sizer and its ``SizerSource``, which the record's header states (``tokenizer``:
the kind, the note, and for a local file its path and sha256), so two runs sized differently can be told
apart. A local file fits words per token exactly (the same two-text difference ``calibrate_sizer`` uses);
the chat template's overhead stays the estimate's, since a ``tokenizer.json`` holds no template.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from loadgen.config import Api, SetupError, chat_like
from loadgen.run.config import RunConfig
from loadgen.target.http import scrub
from loadgen.target.tokenizer_file import LocalTokenizer, TokenizerFileError, load_tokenizer
from loadgen.workload import (
    CALIBRATION_PASSES,
    FALLBACK_OVERHEAD,
    VOCABULARY,
    PromptSizer,
    calibrate_sizer,
)
from loadgen.workload.sizing import vocabulary_passes

__all__ = ["SizerSource", "fit_sizer", "local_sizer"]

SizerKind = Literal["server", "local", "estimate"]


@dataclass(frozen=True, slots=True)
class SizerSource:
    """Where the prompt sizes came from: the server's /tokenize, a local tokenizer.json, or the estimate."""

    kind: SizerKind
    note: str
    path: str | None = None
    sha256: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"source": self.kind, "note": scrub(self.note), "path": self.path, "sha256": self.sha256}


def local_sizer(tokenizer: LocalTokenizer, api: Api, why: str = "") -> PromptSizer:
    """A sizer fitted to ``tokenizer``: words per token from the counts of the vocabulary once and
    ``CALIBRATION_PASSES`` times; the overhead is the file's own special tokens for completions, the
    estimate's template for chat. ``why``: why the server's /tokenize was not used (kept in the note)."""
    short_words, long_words = len(VOCABULARY), CALIBRATION_PASSES * len(VOCABULARY)
    c_short, c_long = (
        tokenizer.count(vocabulary_passes(1)),
        tokenizer.count(vocabulary_passes(CALIBRATION_PASSES)),
    )
    tokens_per_word = (c_long - c_short) / (long_words - short_words)
    if tokens_per_word <= 0:
        raise SetupError(
            f"--tokenizer {tokenizer.path}: its counts do not grow with the text; is it a tokenizer?"
        )
    if chat_like(api):
        overhead, per_message = FALLBACK_OVERHEAD["chat"]
    else:
        overhead, per_message = max(0, int(round(c_short - tokens_per_word * short_words))), 0
    note = f"fitted to the local tokenizer {tokenizer.describe()}"
    if chat_like(api):
        note += ", chat template estimated"
    return PromptSizer(
        words_per_token=1.0 / tokens_per_word,
        overhead_tokens=overhead,
        per_message_tokens=per_message,
        exact=True,
        api=api,
        note=note + (f" ({why})" if why else ""),
    )


async def fit_sizer(config: RunConfig, model: str) -> tuple[PromptSizer, SizerSource]:
    """The run's sizer: the server's /tokenize first (it knows the template), then ``config.tokenizer``,
    then the estimate. ``SetupError`` when the local file cannot be used."""
    sizer = await calibrate_sizer(config.target, model, config.api)
    if sizer.exact:
        return sizer, SizerSource("server", sizer.note)
    if config.tokenizer is None:
        return sizer, SizerSource("estimate", sizer.note)
    try:
        local = load_tokenizer(config.tokenizer)
    except TokenizerFileError as exc:
        raise SetupError(str(exc)) from None
    fitted = local_sizer(local, config.api, why=sizer.note.removeprefix("estimate: "))
    return fitted, SizerSource("local", fitted.note, local.path, local.sha256)
