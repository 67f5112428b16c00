"""The ``[quality]`` table → ``Quality``: answer probes mixed into the load (issue 34).

    [quality]
    share = 0.05        # of each user's requests, > 0 and <= 1 (default 5 %)
    probes = 8          # fixed probe prompts, taken in turn (1..64)
    max_tokens = 32     # each probe's answer length
    seed = 1234         # sent with every probe (with temperature 0): the same answer each time

An empty ``[quality]`` table turns the probes on with these defaults (as ``--quality`` does).
"""

from __future__ import annotations

from loadgen.profile.fields import FieldReader, Where
from loadgen.profile.model import Quality

QUALITY_KEYS = ("share", "probes", "max_tokens", "seed")
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
    assert seed is not None
    return Quality(float(share), probes, max_tokens, seed)
