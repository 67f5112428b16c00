"""The ``[quality]`` table → ``Quality``: answer probes mixed into the load (issue 34).

    [quality]
    share = 0.05        # of each user's requests, > 0 and <= 1 (default 5 %)
    probes = 8          # fixed probe prompts, taken in turn (1..64)
    max_tokens = 32     # each probe's answer length
    seed = 1234         # sent with every probe (with temperature 0): the same answer each time
    tasks = false       # every other probe a verifiable task a rule checks (loadgen.analysis.tasks)

An empty ``[quality]`` table turns the probes on with these defaults (as ``--quality`` does).
"""

from __future__ import annotations

import json
from dataclasses import replace

from loadgen.profile.fields import FieldReader, Where
from loadgen.profile.model import Quality

QUALITY_KEYS = ("share", "probes", "max_tokens", "seed", "tasks")
MAX_PROBES = 64


def read_quality(reader: FieldReader, t: dict[str, object] | None) -> Quality | None:
    if t is None:
        return None
    w = Where("quality", None, "[quality]")
    reader.check_keys(w, t, QUALITY_KEYS)
    d = Quality()
    share = reader.number(w, t, "share", d.share, minimum=0.0, exclusive=True, maximum=1.0)
    probes = reader.integer(w, t, "probes", d.probes)
    if probes is not None and probes > MAX_PROBES:
        reader.fail(w, "probes", f"expected an integer >= 1 and <= {MAX_PROBES}, got {probes}")
    max_tokens = reader.integer(w, t, "max_tokens", d.max_tokens)
    seed = reader.integer(w, t, "seed", d.seed, minimum=0)
    assert share is not None and probes is not None and max_tokens is not None
    tasks = reader.boolean(w, t, "tasks", d.tasks)
    assert seed is not None and tasks is not None
    return Quality(float(share), probes, max_tokens, seed, tasks=tasks)


MAX_REFERENCE_BYTES = 64 * 1024 * 1024


def load_reference(path: str, quality: Quality, model: str = "") -> Quality:
    """``quality`` with the reference answers of ``path`` (``--quality-reference``): a run record (its
    steps' ``quality.reference``, or the reference its header says it was given) or a JSON object
    ``{"model", "max_tokens", "seed", "reference": {"0": text, ...}}``. ``ValueError``, one line naming the
    file and the mismatch, for a file that is not one, or whose probes were asked differently (another
    length or seed) or of another model than ``model`` (when known)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_REFERENCE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the quality reference: {exc.strerror or exc}") from None
    if len(text) > MAX_REFERENCE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_REFERENCE_BYTES // 2**20} MiB: not a quality reference")
    settings, found, ref_model = _read(path, text)
    if not found:
        raise ValueError(
            f"{path}: no reference answers (a record of a run with --quality, or a reference file)"
        )
    for key, want in (("max_tokens", quality.max_tokens), ("seed", quality.seed)):
        got = settings.get(key)
        if got is not None and got != want:
            raise ValueError(f"{path}: its probes were asked with {key} {got}, this run's with {want}")
    if model and ref_model and model != ref_model:
        raise ValueError(f"{path}: its answers are {ref_model!r}'s, this run's model is {model!r}")
    return replace(quality, reference=tuple(sorted(found.items())))


def _read(path: str, text: str) -> tuple[dict[str, object], dict[int, str], str]:
    """(the probes' settings, the answers by probe index, the model) of a record or a reference file."""
    try:
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if len(lines) == 1 and isinstance(lines[0], dict) and lines[0].get("type") is None:
        doc = lines[0]  # a reference file
        return doc, _answers(path, doc.get("reference")), str(doc.get("model") or "")
    found: dict[int, str] = {}
    settings: dict[str, object] = {}
    model = ""
    for line in lines:
        if not isinstance(line, dict):
            continue
        if line.get("type") == "header":
            model = str(line.get("model") or "")
            content = line.get("profile_content")
            q = content.get("quality") if isinstance(content, dict) else None
            if isinstance(q, dict):
                settings = q
                found.update(_answers(path, q.get("reference")))
        elif line.get("type") == "step" and isinstance(line.get("quality"), dict):
            for index, answer in _answers(path, line["quality"].get("reference")).items():
                found.setdefault(index, answer)
    return settings, found, model


def _answers(path: str, value: object) -> dict[int, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{path}: 'reference' must map probe numbers to answer texts")
    return {int(k): v for k, v in value.items()}
