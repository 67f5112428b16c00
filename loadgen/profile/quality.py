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


# what a reference must say of how its probes were asked, else it cannot be checked against this run's
REQUIRED = ("model", "max_tokens", "seed")


def load_reference(path: str, quality: Quality, model: str = "", api: str = "") -> Quality:
    """``quality`` with the reference answers of ``path`` (``--quality-reference``): a run record (its
    steps' ``quality.reference``, or the reference its header says it was given) or a JSON object
    ``{"model", "max_tokens", "seed", "reference": {"0": text, ...}}`` (with ``probes``, ``api`` and
    ``tasks`` checked where it gives them). ``ValueError``, one line naming the file and the mismatch, for a
    file that is not one, that lacks the model or the probes' length or seed, or whose probes were asked
    differently (another length, seed, probe count, API, tasks on or off) or of another model than
    ``model`` (when known; a model discovered from the server is checked against ``reference_model`` then,
    ``loadgen.run.setup``)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(MAX_REFERENCE_BYTES + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the quality reference: {exc.strerror or exc}") from None
    if len(text) > MAX_REFERENCE_BYTES:
        raise ValueError(f"{path}: larger than {MAX_REFERENCE_BYTES // 2**20} MiB: not a quality reference")
    settings, found = _read(path, text)
    if not found:
        raise ValueError(
            f"{path}: no reference answers (a record of a run with --quality, or a reference file)"
        )
    lacks = [key for key in REQUIRED if settings.get(key) in (None, "")]
    if lacks:
        raise ValueError(f"{path}: the reference does not say its {' or '.join(lacks)}: it cannot be checked")
    mine = {"max_tokens": quality.max_tokens, "seed": quality.seed, "probes": quality.probes, "api": api}
    for key, want in (*mine.items(), ("tasks", quality.tasks)):
        got = settings.get(key)
        if got is not None and want not in (None, "") and got != want:
            said, this = (f"tasks {_on(got)}", _on(want)) if key == "tasks" else (f"{key} {got}", want)
            raise ValueError(f"{path}: its probes were asked with {said}, this run's with {this}")
    ref_model = str(settings["model"])
    if model and model != ref_model:
        raise ValueError(f"{path}: its answers are {ref_model!r}'s, this run's model is {model!r}")
    return replace(quality, reference=tuple(sorted(found.items())), reference_model=ref_model)


def _read(path: str, text: str) -> tuple[dict[str, object], dict[int, str]]:
    """(how the probes were asked: model, api and the [quality] settings; the answers by probe index) of a
    record or a reference file."""
    try:
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError as exc:
        raise ValueError(f"{path}: not JSON: {exc}") from None
    if len(lines) == 1 and isinstance(lines[0], dict) and lines[0].get("type") is None:
        doc = lines[0]  # a reference file
        return doc, _answers(path, doc.get("reference"))
    found: dict[int, str] = {}
    settings: dict[str, object] = {}
    for line in lines:
        if not isinstance(line, dict):
            continue
        if line.get("type") == "header":
            content = line.get("profile_content")
            q = content.get("quality") if isinstance(content, dict) else None
            if isinstance(q, dict):
                # a record's header says all: its quality's settings (tasks left out when off), api and model
                settings = {"tasks": False, **q, "api": line.get("api"), "model": line.get("model")}
                if q.get("reference"):  # the run was given a reference: the model is the reference's
                    settings["model"] = q.get("reference_model") or line.get("model")
                found.update(_answers(path, q.get("reference")))
        elif line.get("type") == "step" and isinstance(line.get("quality"), dict):
            for index, answer in _answers(path, line["quality"].get("reference")).items():
                found.setdefault(index, answer)
    return settings, found


def _on(value: object) -> str:
    return "on" if value else "off"


def _answers(path: str, value: object) -> dict[int, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k.isdigit() and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"{path}: 'reference' must map probe numbers to answer texts")
    return {int(k): v for k, v in value.items()}
