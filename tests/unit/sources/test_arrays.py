"""A JSON-array dataset is scanned element by element (``loadgen.sources.arrays``), never read whole: the
elements it finds are json.loads's, across every piece boundary; a bad array is a one-line error naming the
record; memory is bounded by one element, not by the file (issue 20.5, the part left for arrays)."""

from __future__ import annotations

import json
import pickle
import random
import tracemalloc
from pathlib import Path

import pytest

from loadgen.sources import arrays
from loadgen.sources.arrays import scan_array
from loadgen.sources.dataset import DatasetRecords, load_dataset
from loadgen.sources.model import DatasetOptions, SourceError

NASTY = ["a,b", "[x]", "{y}", 'q"uote', "back\\slash", "\\", '\\"', "é ✓ 𝄞", "", ",]", "\n\t"]


def elements(path: Path) -> list[object]:
    found: list[object] = []

    def keep(number: int, value: object) -> bool:
        found.append(value)
        return True

    index = scan_array(str(path), keep)
    assert len(index) == len(found)
    assert [json.loads(index.read(i)[1]) for i in range(len(index))] == found  # the spans read back
    return found


def nasty_array(rng: random.Random, n: int) -> list[object]:
    def value(depth: int) -> object:
        kind = rng.randrange(6 if depth < 3 else 3)
        if kind == 0:
            return rng.choice(NASTY) * rng.randrange(1, 4)
        if kind == 1:
            return rng.randrange(-(10**6), 10**6)
        if kind == 2:
            return rng.choice([None, True, False, 1.5e-3])
        if kind == 3:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(NASTY) + str(i): value(depth + 1) for i in range(rng.randrange(4))}

    return [value(0) for _ in range(n)]


@pytest.mark.parametrize("piece", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("indent", [None, 1])
def test_the_elements_are_json_loads_elements_across_every_piece_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, piece: int, indent: int | None
) -> None:
    monkeypatch.setattr(arrays, "PIECE", piece)
    rng = random.Random(piece * 10 + (indent or 0))
    values = nasty_array(rng, 60)
    path = tmp_path / "a.json"
    path.write_text(" \n" + json.dumps(values, indent=indent, ensure_ascii=rng.random() < 0.5) + "\n ")
    assert elements(path) == values


def test_an_empty_array_has_no_elements(tmp_path: Path) -> None:
    (tmp_path / "e.json").write_text(" [ ] \n")
    assert elements(tmp_path / "e.json") == []


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[1,]", "record #2: json: not valid JSON: a record is missing"),
        ("[,1]", "record #1: json: not valid JSON: a record is missing"),
        ('[{"a": [1, 2}' + " " * 100, "record #1: json: not valid JSON: Expecting ',' delimiter"),
        ('[{"a": [1, 2]}, {"b"', "record #2: json: not valid JSON: Expecting ':' delimiter"),
        ('["open string]', "record #1: json: not valid JSON: Unterminated string"),
        ('[{"a": 1}', "record #2: json: not valid JSON: expected ',' or ']' after the record, got the file"),
        ("[" * 100_000, "record #1: json: nested too deeply"),
        ('{"a": 1}', ":1: json: expected an array of records"),
        ('"text"', ":1: json: expected an array of records"),
        ("[1] [2]", "record #2: json: not valid JSON: more data after the array's closing ']'"),
        ("[1}", "record #2: json: not valid JSON: expected ',' or ']' after the record, got '}'"),
    ],
)
def test_a_broken_array_is_one_line_naming_the_record(tmp_path: Path, text: str, said: str) -> None:
    (tmp_path / "b.json").write_text(text)
    with pytest.raises(SourceError) as caught:
        elements(tmp_path / "b.json")
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_one_oversized_record_is_refused_by_number(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrays, "MAX_ELEMENT_BYTES", 1000)
    monkeypatch.setattr(arrays, "PIECE", 256)
    (tmp_path / "big.json").write_text(json.dumps(["small", "x" * 5000, "small"]))
    with pytest.raises(SourceError, match=r"record #2: json: one record is over"):
        elements(tmp_path / "big.json")


def sharegpt(n: int, words: int) -> list[object]:
    return [
        {
            "id": f"c{i}",
            "conversations": [
                {"from": "human", "value": f"question {i} " + 'lorem, [ipsum] {dolor} "sit" ' * words},
                {"from": "gpt", "value": "answer " * words},
            ],
        }
        for i in range(n)
    ]


def test_a_sharegpt_array_is_indexed_and_reads_back_the_same_records(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(sharegpt(500, 3) + [{"conversations": [{"from": "gpt", "value": "no user"}]}]))
    source = load_dataset(DatasetOptions(str(path)))
    records = source.conversations
    assert isinstance(records, DatasetRecords) and source.format == "sharegpt" and source.skipped == 1
    assert len(records) == 500 and records[499].turns[0].user.startswith("question 499 lorem, [ipsum]")
    assert records[0].line == 1 and records[0].turns[0].reply == "answer answer answer "
    copy = pickle.loads(pickle.dumps(records))
    assert len(pickle.dumps(records)) < 500 * 24 + 1000  # offsets, not records, go to the workers
    assert copy[250] == records[250]


def test_a_big_array_costs_one_piece_of_memory_not_the_file(tmp_path: Path) -> None:
    """The whole-file read held the bytes, the text and every decoded object at once: ~10x the file."""
    path = tmp_path / "big.json"
    path.write_text(json.dumps(sharegpt(4000, 40)))
    size = path.stat().st_size
    assert size > 6 << 20
    tracemalloc.start()
    try:
        source = load_dataset(DatasetOptions(str(path)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(source.conversations) == 4000
    assert peak < 4 << 20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB file"
