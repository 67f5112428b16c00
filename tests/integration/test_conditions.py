"""The conditions of a run as ``ramp compare`` reads them: each mismatch kind named with both values (model,
revision, runtime, GPUs, precision, layout, speculation, profile paths, arrival, levels, windows, warm/cold,
cache, SLO, seed, client side, client-bound steps, server settings, tags), tags read where the server is
silent, and the model revision in the record header (flag, tag, launched server's arguments, /v1/models)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
from analysis_fakes import (
    PAIR,
    Fig,
    Header,
    base_header,
    changed,
    content,
    pair,
    plan,
    run_compare,
    sc,
    top,
    write_record,
)

from loadgen.analysis.conditions import conditions_of, differences
from loadgen.analysis.runs import load_run
from loadgen.cli.commands import build_parser
from loadgen.cli.resolve import build_config, revision_from_server_args
from loadgen.config import SLO
from loadgen.exits import UsageError
from loadgen.run.recording import record_header
from loadgen.run.state import Load, RunStatus

# (what changes in B, the key named, A's value and B's value as written)
MISMATCHES: list[tuple[str, Callable[[Header], None], str, str, str]] = [
    ("model", top("model", "qwen-7b"), "model", "llama-8b", "qwen-7b"),
    ("revision", top("model_revision", "def456"), "model_revision", "abc123", "def456"),
    ("runtime", top("runtime", "sglang"), "runtime", "vllm", "sglang"),
    ("runtime version", top("runtime_version", "0.9.0"), "runtime_version", "0.8.5", "0.9.0"),
    ("gpu model", sc("gpu_name", "NVIDIA H100"), "gpu_model", "NVIDIA H200", "NVIDIA H100"),
    ("gpu count", sc("gpu_count", 2), "gpu_count", "1", "2"),
    ("interconnect", top("tags", {"interconnect": "pcie"}), "interconnect", "nvlink", "pcie"),
    ("precision", sc("dtype", "float16"), "dtype", "bfloat16", "float16"),
    ("quantization", sc("quantization", "fp8"), "quantization", "unknown", "fp8"),
    ("kv dtype", sc("kv_cache_dtype", "fp8_e5m2"), "kv_cache_dtype", "auto", "fp8_e5m2"),
    ("parallel", sc("tp_size", 2), "parallel", "tp=1", "tp=2"),
    ("speculative", sc("speculative_algorithm", "EAGLE"), "speculative", "unknown", "EAGLE"),
    (
        "distribution",
        content(lambda c: c["buckets"][0]["output"].__setitem__("value", 128.0)),
        "profile.buckets[0].output.value",
        "64",
        "128",
    ),
    (
        "sampling",
        content(lambda c: c["sampling"].__setitem__("temperature", 0.7)),
        "profile.sampling.temperature",
        "0",
        "0.7",
    ),
    (
        "prefixes",
        content(lambda c: c["prefix_groups"][0].__setitem__("prefix_tokens", 2048)),
        "profile.prefix_groups[0].prefix_tokens",
        "512",
        "2048",
    ),
    ("api", top("api", "completions"), "api", "chat", "completions"),
    ("mode", top("mode", "open"), "mode", "closed", "open"),
    ("arrival", top("arrival", "gamma(0.5)"), "arrival", "closed", "gamma(0.5)"),
    ("levels", plan("levels", [1, 8, 64]), "levels", "1, 8", "1, 8, 64"),
    ("step length", plan("step_s", 10.0), "step_s", "30", "10"),
    ("warm-up", plan("warmup_s", 1.0), "warmup_s", "5", "1"),
    ("cold", top("cold_start", True), "cold_start", "warm", "cold"),
    ("cache reset", top("reset_prefix_cache", "step"), "cache_reset", "never", "step"),
    ("prefix caching", sc("prefix_caching", False), "prefix_caching", "on", "off"),
    ("slo", top("slo", SLO(ttft_p95_ms=500.0).as_dict()), "slo", "ttft_p95_ms=1000", "ttft_p95_ms=500"),
    ("seed policy", top("seed_source", "given"), "seed", "fresh", "given 1234"),
    ("workers", top("workers", 4), "workers", "1", "4"),
    ("transport", top("transport", "aiohttp"), "transport", "h1", "aiohttp"),
    ("context fit", top("fit_context", True), "fit_context", "off", "on"),
    ("context length", top("max_model_len", 32768), "max_model_len", "8192", "32768"),
    ("server setting", sc("block_size", 32), "server:block_size", "16", "32"),
    ("a tag", top("tags", {"interconnect": "nvlink", "batch": "large"}), "tag:batch", "unknown", "large"),
]


@pytest.mark.parametrize(
    ("what", "edit", "key", "a_text", "b_text"), MISMATCHES, ids=[m[0] for m in MISMATCHES]
)
def test_each_mismatch_is_named_with_both_values(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    what: str,
    edit: Callable[[Header], None],
    key: str,
    a_text: str,
    b_text: str,
) -> None:
    a, b = pair(tmp_path, changed(edit))
    code, out, err = run_compare(capsys, a, b)
    assert code == 2 and out == ""
    assert "Traceback" not in err
    row = next((line for line in err.splitlines() if line.strip().startswith(key + " ")), None)
    assert row is not None, err
    assert f"A {a_text}" in row and f"B {b_text}" in row, row
    assert "--force" in err and "--vary" in err


def test_client_bound_steps_are_a_condition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_record(tmp_path / "a.jsonl", PAIR)
    b = write_record(tmp_path / "b.jsonl", [PAIR[0], Fig(level=8, out_tok_s=700.0, client_bound=True)])
    code, _, err = run_compare(capsys, str(a), str(b))
    assert code == 2
    row = next(line for line in err.splitlines() if line.strip().startswith("client_bound "))
    assert "A none" in row and "B 8 streams" in row


# ---- conditions as data ----------------------------------------------------------------------------------


def test_conditions_read_tags_where_the_server_is_silent(tmp_path: Path) -> None:
    header = base_header()
    header["server_conditions"] = {}
    header["tags"] = {"gpu": "H200", "gpus": "8", "quantization": "awq", "kv_dtype": "fp8", "tp": "8"}
    path = write_record(tmp_path / "a.jsonl", PAIR, header)
    found = {k: c.value for k, c in conditions_of(load_run(str(path), "A")).items()}
    assert found["gpu_model"] == "H200" and found["gpu_count"] == "8"
    assert found["quantization"] == "awq" and found["kv_cache_dtype"] == "fp8"
    assert "tag:gpu" not in found and "tag:quantization" not in found  # read once, under their own name
    other = copy.deepcopy(header)
    other["tags"]["gpu"] = "H100"
    b = write_record(tmp_path / "b.jsonl", PAIR, other)
    runs = [load_run(str(path), "A"), load_run(str(b), "B")]
    assert [d.key for d in differences(runs, ["tag:gpu"])] == ["gpu_model"]
    assert all(d.varied for d in differences(runs, ["tag:gpu"]))


# ---- the model revision -----------------------------------------------------------------------------------


def header_of(tmp_path: Path, *argv: str, conditions: dict[str, object] | None = None) -> dict[str, object]:
    url = "http://127.0.0.1:8000"
    config = build_config(build_parser().parse_args(["run", url, *argv]), url)
    return record_header(config, RunStatus(), Load.of(config), SLO(), None, conditions or {})


def test_revision_from_the_flag_or_a_tag(tmp_path: Path) -> None:
    assert header_of(tmp_path, "--revision", "r1")["model_revision"] == "r1"
    assert header_of(tmp_path, "--tag", "revision=r2")["model_revision"] == "r2"
    assert header_of(tmp_path, "--revision", "r3", "--tag", "revision=r3")["model_revision"] == "r3"
    with pytest.raises(UsageError, match="--revision r4 and --tag revision=r5 disagree"):
        header_of(tmp_path, "--revision", "r4", "--tag", "revision=r5")
    assert header_of(tmp_path)["model_revision"] is None


def test_revision_from_the_v1_models_root_path(tmp_path: Path) -> None:
    snapshot = (
        "/hf/hub/models--meta-llama--Llama-3.1-8B/snapshots/" + "0e9e39f249a16976918f6564b8830bc894c89659"
    )
    header = header_of(tmp_path, conditions={"model_path": snapshot})
    assert header["model_revision"] == "0e9e39f249a16976918f6564b8830bc894c89659"
    assert header["model_revision_source"] == "/v1/models root"
    given = header_of(tmp_path, "--revision", "main", conditions={"model_path": snapshot})
    assert given["model_revision"] == "main" and given["model_revision_source"] == "given"
    assert header_of(tmp_path, conditions={"model_path": "/models/llama"})["model_revision"] is None


def test_revision_from_the_launched_servers_arguments() -> None:
    assert revision_from_server_args(["--max-model-len", "8192", "--revision", "v2"]) == "v2"
    assert revision_from_server_args(["--revision=v3"]) == "v3"
    assert revision_from_server_args(["--tokenizer-revision", "t1"]) is None
    assert revision_from_server_args([]) is None


def test_mismatched_revisions_are_refused_unless_varied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = pair(tmp_path, changed(top("model_revision", "def456")))
    assert run_compare(capsys, a, b)[0] == 2
    assert run_compare(capsys, a, b, "--vary", "revision")[0] == 0


def test_tags_the_telemetry_merged_into_server_conditions_are_read_once(tmp_path: Path) -> None:
    # run/telemetry_link hands the tags to the hub, whose conditions then carry them too
    a_header, b_header = base_header(), base_header()
    for header, revision in ((a_header, "r1"), (b_header, "r2")):
        header["model_revision"] = revision
        header["tags"] = {"revision": revision, "team": "x"}
        header["server_conditions"].update(header["tags"])
    a, b = pair(tmp_path, b_header, a_header)
    runs = [load_run(a, "A"), load_run(b, "B")]
    assert [d.key for d in differences(runs, [])] == ["model_revision"]
    assert "server:team" not in conditions_of(runs[0]) and "tag:team" in conditions_of(runs[0])


def test_revision_from_a_local_model_directory(tmp_path: Path) -> None:
    """A model served from a local directory: its git commit (loose or packed ref, or detached), or the commit
    `huggingface-cli download --local-dir` left in its metadata."""
    commit = "1f2e3d4c5b6a79881f2e3d4c5b6a79881f2e3d4c"
    repo = tmp_path / "llama"
    (repo / ".git" / "refs" / "heads").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (repo / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")
    header = header_of(tmp_path, conditions={"model_path": str(repo)})
    assert header["model_revision"] == commit
    assert header["model_revision_source"] == "local model directory"
    (repo / ".git" / "refs" / "heads" / "main").unlink()
    (repo / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled\n{commit} refs/heads/main\n")
    assert header_of(tmp_path, conditions={"model_path": str(repo)})["model_revision"] == commit
    (repo / ".git" / "HEAD").write_text(commit.replace("1", "2") + "\n")  # detached
    assert header_of(tmp_path, conditions={"model_path": str(repo)})["model_revision"] == commit.replace(
        "1", "2"
    )
    hf = tmp_path / "downloaded"
    (hf / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (hf / ".cache" / "huggingface" / "download" / "config.json.metadata").write_text(f"{commit}\netag\n1.0\n")
    assert header_of(tmp_path, conditions={"model_path": str(hf)})["model_revision"] == commit
    plain = tmp_path / "plain"
    plain.mkdir()
    assert header_of(tmp_path, conditions={"model_path": str(plain)})["model_revision"] is None
    given = header_of(tmp_path, "--revision", "v9", conditions={"model_path": str(repo)})
    assert given["model_revision"] == "v9" and given["model_revision_source"] == "given"
