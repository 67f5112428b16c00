"""``ramp compare``: the refusal, --vary, --force, the level-by-level table (delta, %, repeats' median and
range, within noise), knees, goodput, speculative acceptance, cost, the JSON schema, bad input, real records
from the simulator; and ``ramp report``'s median (min–max) for repeated levels. Each mismatch kind is
``test_conditions``'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fakes import PAIR, Fig, base_header, changed, header_with, pair, run_compare, top, write_record

from loadgen.analysis.compare import run_label
from loadgen.cli.commands import main
from loadgen.report import report_main


def test_matched_runs_compare_without_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair(tmp_path, base_header())
    code, out, err = run_compare(capsys, a, b)
    assert code == 0, err
    assert "WARNING" not in out and "forced" not in out
    assert "matched:" in out and "model_revision" in out


def test_the_refusal_is_one_screen_naming_every_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b_header = changed(top("model_revision", "def456"))
    b_header["runtime_version"] = "0.9.0"
    b_header["profile_content"]["buckets"][1]["output"]["max"] = 400.0
    a, b = pair(tmp_path, b_header)
    code, out, err = run_compare(capsys, a, b, "--vary", "runtime")
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"ramp compare: refused: {a} (A) and {b} (B) differ in more than what is varied"
    assert len(lines) <= 24
    assert any(line.strip().startswith("model_revision ") for line in lines)
    assert any(line.strip().startswith("profile.buckets[1].output.max ") for line in lines)
    assert any("varied" in line and "runtime_version" in line for line in lines)
    assert "--vary revision --vary profile" in lines[-1] and "--force" in lines[-1]


def test_vary_names_the_variable_under_test(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b_header = changed(top("runtime", "sglang"))
    b_header["runtime_version"] = "0.4.6"
    a, b = pair(tmp_path, b_header)
    code, out, err = run_compare(capsys, a, b, "--vary", "runtime")
    assert code == 0, err
    assert "varied:" in out and "runtime" in out and "sglang" in out
    assert "WARNING" not in out


def test_vary_a_tag_and_a_revision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_header = header_with(tags={"interconnect": "nvlink", "spec": "off"})
    b_header = header_with(tags={"interconnect": "nvlink", "spec": "eagle"}, model_revision="def456")
    a, b = pair(tmp_path, b_header, a_header)
    assert run_compare(capsys, a, b, "--vary", "tag:spec")[0] == 2  # the revision still differs
    code, out, _ = run_compare(capsys, a, b, "--vary", "tag:spec", "--vary", "revision")
    assert code == 0 and "tag:spec" in out


def test_an_unknown_vary_key_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair(tmp_path, base_header())
    code, out, err = run_compare(capsys, a, b, "--vary", "colour")
    assert code == 2 and out == ""
    assert err.startswith("ramp compare: --vary colour: not a condition; one of: ")
    assert len(err.splitlines()) == 1


def test_force_puts_the_warning_on_every_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair(tmp_path, changed(top("model_revision", "def456")))
    code, out, _ = run_compare(capsys, a, b, "--force")
    assert code == 0
    assert out.startswith("WARNING: not a matched comparison (--force): the runs differ in model_revision")
    blocks = [b for b in out.split("\n\n") if b.startswith(("1 stream", "8 streams"))]
    assert len(blocks) == 2
    for block in blocks:
        assert "! not matched: model_revision differs" in block


# ---- level by level ------------------------------------------------------------------------------------


def metric_row(text: str, level: str, label: str) -> str:
    block = next(b for b in text.split("\n\n") if b.startswith(level))
    return next(line for line in block.splitlines() if line.startswith(label))


def test_each_metric_with_delta_and_percent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_record(tmp_path / "a.jsonl", [Fig(level=8, out_tok_s=1000.0, ttft_p95=200.0, errors=0)])
    b = write_record(tmp_path / "b.jsonl", [Fig(level=8, out_tok_s=1100.0, ttft_p95=150.0, errors=25)])
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0
    row = metric_row(out, "8 streams", "out tok/s")
    assert "1,000" in row and "1,100" in row and "+100" in row and "+10.0 %" in row and "better" in row
    row = metric_row(out, "8 streams", "TTFT p95")
    assert "200" in row and "150" in row and "-50.0" in row and "-25.0 %" in row and "better" in row
    row = metric_row(out, "8 streams", "error rate")
    assert "0.0 %" in row and "20.0 %" in row and "worse" in row
    for label in ("decode p50", "TTFT p50", "ITL p99", "e2e p95"):
        metric_row(out, "8 streams", label)
    assert "measured once" in out  # single runs: no noise estimate


def test_repeats_median_range_and_noise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_record(
        tmp_path / "a.jsonl",
        [
            Fig(level=8, out_tok_s=v, ttft_p95=t)
            for v, t in ((990.0, 200.0), (1000.0, 210.0), (1030.0, 190.0))
        ],
    )
    b = write_record(
        tmp_path / "b.jsonl",
        [
            Fig(level=8, out_tok_s=v, ttft_p95=t)
            for v, t in ((1020.0, 300.0), (1040.0, 310.0), (1100.0, 320.0))
        ],
    )
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0
    row = metric_row(out, "8 streams", "out tok/s")
    assert "1,000 (990–1,030)" in row and "1,040 (1,020–1,100)" in row and "within noise" in row
    row = metric_row(out, "8 streams", "TTFT p95")
    assert "200 (190–210)" in row and "310 (300–320)" in row and "worse" in row
    assert "A ×3" in out and "B ×3" in out


def test_levels_match_by_mode_and_level_and_cut_steps_stay_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_record(tmp_path / "a.jsonl", [Fig(level=1), Fig(level=8, out_tok_s=700.0)])
    b_figs = [Fig(level=8, out_tok_s=9999.0, carried_share=0.4), Fig(level=8, out_tok_s=750.0), Fig(level=16)]
    b = write_record(
        tmp_path / "b.jsonl", b_figs, header_with(plan={**base_header()["plan"], "levels": [8, 16]})
    )
    code, out, _ = run_compare(capsys, str(a), str(b), "--vary", "levels")
    assert code == 0
    row = metric_row(out, "8 streams", "out tok/s")
    assert "9,999" not in row and "750" in row
    assert "1 cut step left out" in out
    assert "1 stream: only in A" in out and "16 streams: only in B" in out


def test_open_loop_levels_match_by_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header = header_with(mode="open", arrival="poisson", plan={**base_header()["plan"], "levels": [2.5]})
    a = write_record(tmp_path / "a.jsonl", [Fig(level=0, mode="open", rate_rps=2.5, out_tok_s=300.0)], header)
    b = write_record(tmp_path / "b.jsonl", [Fig(level=0, mode="open", rate_rps=2.5, out_tok_s=330.0)], header)
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0
    assert "+10.0 %" in metric_row(out, "2.5 req/s", "out tok/s")


def test_knee_goodput_spec_acceptance_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pricing = {"gpu_usd_per_hour": 3.6, "gpus": 1}
    spec = {"spec_acceptance": 0.62}
    goodput = {"goodput_req_s": 9.0, "goodput_tok_s": 900.0}
    a_figs = [Fig(level=1, out_tok_s=100.0), Fig(level=8, out_tok_s=800.0, **goodput, server=spec)]
    b_figs = [Fig(level=1, out_tok_s=100.0), Fig(level=8, out_tok_s=1000.0, met=False, server=spec)]
    a = write_record(tmp_path / "a.jsonl", a_figs, header_with(pricing=pricing))
    b = write_record(tmp_path / "b.jsonl", b_figs, header_with(pricing=pricing))
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0
    assert "knee A: 8 streams, 800 out tok/s" in out and "knee B: 1 stream, 100 out tok/s" in out
    assert "goodput tok/s" in metric_row(out, "8 streams", "goodput tok/s")
    assert "spec accept" in metric_row(out, "8 streams", "spec accept")
    # $3.60/h = $0.001/s: at 800 tok/s $1.25 per 1M, at 1,000 tok/s $1.00
    row = metric_row(out, "8 streams", "$/1M out")
    assert "$1.25" in row and "$1.00" in row and "-20.0 %" in row and "better" in row
    metric_row(out, "8 streams", "$/req")


def test_metrics_no_run_has_are_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair(tmp_path, base_header())
    _, out, _ = run_compare(capsys, a, b)
    assert "goodput" not in out and "spec accept" not in out and "$/1M" not in out


def test_three_runs_compare_against_the_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [
        str(write_record(tmp_path / f"{n}.jsonl", [Fig(level=8, out_tok_s=v)]))
        for n, v in (("a", 1000.0), ("b", 1100.0), ("c", 900.0))
    ]
    code, out, _ = run_compare(capsys, *paths)
    assert code == 0
    row = metric_row(out, "8 streams", "out tok/s")
    assert "+10.0 %" in row and "-10.0 %" in row


def test_json_has_a_stable_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_record(tmp_path / "a.jsonl", [Fig(level=8, out_tok_s=v) for v in (990.0, 1000.0, 1030.0)])
    b = write_record(
        tmp_path / "b.jsonl", [Fig(level=8, out_tok_s=1100.0)], header_with(runtime_version="0.9")
    )
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json", "--vary", "runtime")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema"] == 1 and doc["refused"] is False and doc["forced"] is False
    assert set(doc) == {"schema", "refused", "forced", "vary", "runs", "differences", "warning", "levels"}
    assert [r["label"] for r in doc["runs"]] == ["A", "B"]
    assert set(doc["runs"][0]) == {"label", "path", "model", "runtime", "knee", "pricing", "conditions"}
    assert doc["differences"] == [
        {"key": "runtime_version", "values": ["0.8.5", "0.9"], "varied": True},
    ]
    level = doc["levels"][0]
    assert set(level) == {"mode", "level", "rate_rps", "label", "runs", "metrics"}
    assert level["runs"] == [{"steps": 3, "left_out": 0, "other_passes": 0, "client_bound": False}] * 1 + [
        {"steps": 1, "left_out": 0, "other_passes": 0, "client_bound": False}
    ]
    out_tok = next(m for m in level["metrics"] if m["metric"] == "out_tok_s")
    assert out_tok["values"][0] == {"median": 1000.0, "min": 990.0, "max": 1030.0, "n": 3}
    assert out_tok["values"][1] == {"median": 1100.0, "min": 1100.0, "max": 1100.0, "n": 1}
    assert out_tok["deltas"][0] is None
    assert out_tok["deltas"][1]["delta"] == pytest.approx(100.0)
    assert out_tok["deltas"][1]["pct"] == pytest.approx(10.0)
    assert out_tok["deltas"][1]["mark"] == "better" and out_tok["deltas"][1]["noise"] is None
    assert set(out_tok) == {"metric", "label", "unit", "better", "values", "deltas"}


def test_json_refusal_says_so_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair(tmp_path, changed(top("model_revision", "def456")))
    code, out, _ = run_compare(capsys, a, b, "--format", "json")
    assert code == 2
    doc = json.loads(out)
    assert doc["refused"] is True and doc["levels"] == []
    assert doc["differences"] == [{"key": "model_revision", "values": ["abc123", "def456"], "varied": False}]


# ---- bad input --------------------------------------------------------------------------------------------


def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = str(write_record(tmp_path / "good.jsonl", PAIR))
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    empty = str(write_record(tmp_path / "empty.jsonl", []))
    missing = str(tmp_path / "nope.jsonl")
    for bad, says in (
        (missing, "no such file"),
        (str(text), "not JSON"),
        (empty, "no finished step"),
    ):
        code, out, err = run_compare(capsys, good, bad)
        assert code == 2 and out == "", bad
        assert err.startswith(f"ramp compare: {bad}") and says in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_compare_needs_two_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = str(write_record(tmp_path / "good.jsonl", PAIR))
    assert main(["compare", good]) == 2
    assert "two records" in capsys.readouterr().err


def test_the_cli_dispatches_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = pair(tmp_path, base_header())
    assert main(["compare", a, b]) == 0
    assert "out tok/s" in capsys.readouterr().out


# ---- ramp report: repeats ------------------------------------------------------------------------------


def test_report_shows_median_and_range_of_repeated_levels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    figs = [Fig(level=1, out_tok_s=100.0)] + [
        Fig(level=8, out_tok_s=v, ttft_p95=t) for v, t in ((990.0, 200.0), (1000.0, 210.0), (1030.0, 190.0))
    ]
    path = write_record(tmp_path / "run.jsonl", figs)
    assert report_main(str(path)) == 0
    out = capsys.readouterr().out
    assert "repeats: median (min–max)" in out
    rows = out.split("repeats: median (min–max)")[1].splitlines()
    row = next(line for line in rows if line.lstrip().startswith("8"))
    assert "×3" in row and "1,000 (990–1,030)" in row and "200 (190–210)" in row
    assert not any(line.lstrip().startswith("1 ") for line in rows)  # a level run once is not a repeat


def test_report_without_repeats_has_no_repeat_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_main(str(write_record(tmp_path / "run.jsonl", PAIR))) == 0
    assert "repeats" not in capsys.readouterr().out


# ---- real records: the engine against the embedded simulator ------------------------------------------------

SIM_PROFILE = """
name = "compare-small"
[[bucket]]
input = 24
output = 32
[sampling]
ignore_eos = true
[slo]
ttft_p95_ms = 5000
"""


def sim_record(tmp_path: Path, name: str, **sim_settings: object) -> str:
    """A two-level run against a simulator of its own (``sim_settings`` change its engine)."""
    from loadgen.config import RampPlan
    from loadgen.profile import parse_profile
    from loadgen.run.config import RunConfig
    from loadgen.run.engine import Engine
    from loadgen.sim import build_config as sim_config
    from loadgen.sim import run_sim_in_thread
    from loadgen.types import Target

    handle = run_sim_in_thread(sim_config("h200-llama8b", seed=3, **sim_settings))
    try:
        out = tmp_path / f"{name}.jsonl"
        config = RunConfig(
            target=Target(url=handle.url),
            profile=parse_profile(SIM_PROFILE, source="<compare-small>"),
            plan=RampPlan((1, 4), step_s=1.0, warmup_s=0.2),
            out=str(out),
            seed=11,
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(40)
        assert outcome is not None and outcome.state == "finished", outcome
        return str(out)
    finally:
        handle.stop()


def test_simulator_runs_with_and_without_speculation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = sim_record(tmp_path, "plain")
    spec = sim_record(tmp_path, "spec", num_speculative_tokens=3)
    code, out, err = run_compare(capsys, plain, spec)
    assert code == 2 and out == ""
    row = next(line for line in err.splitlines() if line.strip().startswith("speculative "))
    assert "A unknown" in row and "B 3 draft tokens" in row
    # Whether this shared 2-core machine's client kept up in both runs is not under test here: a step flagged
    # client-bound would (rightly) refuse the comparison, so it is named as varied too.
    code, out, err = run_compare(capsys, plain, spec, "--vary", "speculative", "--vary", "client_bound")
    assert code == 0, err
    assert "1 stream · A ×1 · B ×1" in out and "4 streams · A ×1 · B ×1" in out
    assert metric_row(out, "4 streams", "out tok/s")
    assert "knee A: " in out and "knee B: " in out


def test_run_labels() -> None:
    assert [run_label(n) for n in (0, 1, 25, 26)] == ["A", "B", "Z", "R27"]


# ---- issue 19 (6): the cap, the noise floor, the knee's median, passes, the client-bound refusal ----------


def test_the_open_loops_concurrency_cap_is_a_compared_condition(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def open_run(name: str, cap: int) -> str:
        figs = [Fig(level=cap, mode="open", rate_rps=r, ttft_p50=100.0 * r) for r in (2.0, 8.0)]
        return str(write_record(tmp_path / name, figs, header_with(mode="open", arrival="poisson")))

    uncapped, capped, again = open_run("a.jsonl", 0), open_run("b.jsonl", 2), open_run("c.jsonl", 0)
    code, _, err = run_compare(capsys, uncapped, capped)
    assert code == 2
    row = next(line for line in err.splitlines() if line.strip().startswith("max_concurrency "))
    assert "A none" in row and "B 2" in row and "--vary max_concurrency" in err
    code, out, _ = run_compare(capsys, uncapped, again)
    assert code == 0 and "max_concurrency" in out  # matched, and said so


def test_one_run_per_level_calls_a_tiny_difference_within_noise(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_record(tmp_path / "a.jsonl", [Fig(level=8, out_tok_s=1000.0, ttft_p50=100.0, ttft_p95=200.0)])
    b = write_record(tmp_path / "b.jsonl", [Fig(level=8, out_tok_s=1003.0, ttft_p50=100.5, ttft_p95=260.0)])
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0
    assert metric_row(out, "8 streams", "out tok/s").endswith("within noise")  # +0.3 %
    assert metric_row(out, "8 streams", "TTFT p50").endswith("within noise")  # +0.5 %
    assert metric_row(out, "8 streams", "TTFT p95").endswith("worse")  # +30 %
    assert 'under 2 % there reads "within noise" (the default floor)' in out
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json")
    metrics = {m["metric"]: m for m in json.loads(out)["levels"][0]["metrics"]}
    tok = metrics["out_tok_s"]["deltas"][1]
    assert tok["mark"] == "within noise" and tok["noise"] == "floor" and tok["pct"] == pytest.approx(0.3)
    assert metrics["ttft_p95_ms"]["deltas"][1]["mark"] == "worse"


def test_the_knee_is_the_median_over_repeats_not_the_best_single_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8 streams: one lucky repeat at 1,500 but a median of 1,000; 4 streams: 1,100 every time
    figs = [Fig(level=4, out_tok_s=1100.0)] * 3 + [Fig(level=8, out_tok_s=v) for v in (900.0, 1500.0, 1000.0)]
    a = write_record(tmp_path / "a.jsonl", figs)
    b = write_record(tmp_path / "b.jsonl", figs)
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert code == 0
    assert "knee A: 4 streams, 1,100 out tok/s (median of 3, 1,100–1,100)" in out
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json")
    knee = json.loads(out)["runs"][0]["knee"]
    assert knee["load"] == 4 and knee["out_tok_s"] == 1100.0 and knee["repeats"] == 3
    # a level whose repeats mostly missed the SLO is no knee, whatever its best repeat did
    missed = [Fig(level=4, out_tok_s=500.0)] + [
        Fig(level=8, out_tok_s=v, met=m) for v, m in ((2000.0, True), (1900.0, False), (1950.0, False))
    ]
    c = write_record(tmp_path / "c.jsonl", missed)
    code, out, _ = run_compare(capsys, str(c), str(c))
    assert "knee A: 4 streams, 500 out tok/s" in out


def test_two_passes_at_one_level_are_not_pooled_as_repeats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --steps 4,8,4: the second visit to 4 streams (after 8) is another pass, not a repeat of the first
    ramp = [Fig(level=4, out_tok_s=400.0), Fig(level=8, out_tok_s=800.0), Fig(level=4, out_tok_s=300.0)]
    a = write_record(tmp_path / "a.jsonl", ramp)
    # --repeat 2: two consecutive steps at 4 numbered 0 and 1 are repeats
    b = write_record(tmp_path / "b.jsonl", [Fig(level=4, out_tok_s=400.0), Fig(level=4, out_tok_s=420.0)])
    code, out, _ = run_compare(capsys, str(a), str(b), "--format", "json")
    assert code == 0
    four = next(level for level in json.loads(out)["levels"] if level["level"] == 4)
    assert four["runs"][0] == {"steps": 1, "left_out": 0, "other_passes": 1, "client_bound": False}
    assert four["runs"][1]["steps"] == 2 and four["runs"][1]["other_passes"] == 0
    tok = next(m for m in four["metrics"] if m["metric"] == "out_tok_s")
    assert tok["values"][0] == {"median": 400.0, "min": 400.0, "max": 400.0, "n": 1}
    assert tok["values"][1]["n"] == 2 and tok["values"][1]["median"] == 410.0
    code, out, _ = run_compare(capsys, str(a), str(b))
    assert "A ×1 (1 step of another pass left out: not a --repeat)" in out


def test_a_client_bound_refusal_names_the_run_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_record(tmp_path / "a.jsonl", PAIR)
    b = write_record(tmp_path / "b.jsonl", [PAIR[0], Fig(level=8, out_tok_s=700.0, client_bound=True)])
    code, _, err = run_compare(capsys, str(a), str(b))
    assert code == 2
    assert f"Run B ({b}) was client-bound at 8 streams" in err
    assert "--workers N" in err and "Rerun" in err and "--force" in err
    assert "--vary client_bound" not in err and "Run A" not in err
