"""The simulator's scenarios (``loadgen.sim.scenarios``): each builds a valid engine, ``ramp sim --scenario``
applies it over h200-llama8b, a flag given beside it wins, an unknown name is one clear error."""

from __future__ import annotations

import pytest

from loadgen.sim.__main__ import build_parser, config_from_args
from loadgen.sim.config import build_config
from loadgen.sim.scenarios import BASE_PRESET, scenario_overrides, scenarios


def test_every_scenario_builds_a_valid_engine_and_names_a_diagnosis() -> None:
    kinds = set()
    for name, s in scenarios().items():
        config = build_config(BASE_PRESET, **scenario_overrides(name))
        kinds.add(s.kind)
        assert config.engine.max_model_len >= s.input_tokens + s.output_tokens, name
    assert kinds == {"none", "queueing", "kv_cache", "decode_bound", "prefill_bound", "network"}


def test_the_flag_applies_a_scenario_over_h200_and_a_flag_beside_it_wins() -> None:
    config = config_from_args(build_parser().parse_args(["--scenario", "queue"]))
    assert config.preset == BASE_PRESET and config.engine.max_num_seqs == 4
    config = config_from_args(build_parser().parse_args(["--scenario", "queue", "--max-num-seqs", "6"]))
    assert config.engine.max_num_seqs == 6
    decode = config_from_args(build_parser().parse_args(["--scenario", "decode"]))
    assert decode.engine.cost.per_seq_ms == 3.0
    network = config_from_args(build_parser().parse_args(["--scenario", "network"]))
    assert network.faults.slow_ttft_rate == 1.0 and network.faults.slow_ttft_s == 0.1
    assert config_from_args(build_parser().parse_args([])).preset == "tiny-cpu"


def test_an_unknown_scenario_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown simulator scenario 'slow'; choose one of: none, queue"):
        scenario_overrides("slow")
