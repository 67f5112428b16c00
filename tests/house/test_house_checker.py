"""The house rules' checkers (house_rules.py) see what they are meant to: each rule on a snippet that breaks
it, and the exemptions say why."""

from __future__ import annotations

from house_rules import (
    METRIC_HOMES,
    PRIVATE_ALLOWED,
    REFLECTION_ALLOWED,
    RULES,
    STATE_OWNER,
    literal_names,
    metric_violations,
    parse_source,
    runtime_violations,
    state_violations,
)


def test_the_runtime_rule_sees_a_name_in_code_but_not_in_prose_or_its_homes() -> None:
    code = (
        '"""Reads vLLM."""\nPREFIX = "vllm:"\ndef f():\n    """SGLang\'s."""\n    return f"{x} SGLang"\n'
        "# vllm in a comment\nNAME = 'VLLM_RESET'\n"
    )
    found = sorted((v.line, v.rule) for v in runtime_violations(parse_source("loadgen/fake.py", code)))
    assert found == [(2, "runtime"), (5, "runtime"), (7, "runtime")]
    assert not list(runtime_violations(parse_source("loadgen/runtimes/fake.py", code)))
    assert not list(runtime_violations(parse_source("loadgen/sim/fake.py", code)))
    assert not list(runtime_violations(parse_source("tests/test_fake.py", code)))


def test_allowlists_say_why() -> None:
    assert all(reason.strip() for reason in (*PRIVATE_ALLOWED.values(), *REFLECTION_ALLOWED.values()))


def test_the_checker_sees_each_rule() -> None:
    code = (
        "from m import _hidden\nimport m\nm._x\nobj._y\n"
        "x = 1  # type: ignore[attr-defined]\ngetattr(obj, 'a')\nclass C:\n    _z = 1\nc._z\n"
        "from pkg._mod import y\nmonkeypatch.setattr(m, '_w', 1)\n"
    )
    p = parse_source("loadgen/fake.py", code)
    found = [(v.line, v.rule) for rule in RULES.values() for v in rule(p)]
    expected = [(1, "private"), (3, "private"), (4, "private"), (5, "ignore"), (6, "reflection")]
    assert sorted(found) == [*expected, (10, "private"), (11, "private")]


def test_the_state_check_sees_writers_and_only_them() -> None:
    code = (
        "def f(ctl, lv: Load, st: 'RunStatus', load) -> None:\n"
        "    ctl.status.state = 'failed'\n"  # 2: by name
        "    lv.level = 3\n"  # 3: annotated
        "    st.message = ''\n"  # 4: annotated as a string
        "    load.plan_index += 1\n"  # 5: augmented
        "    _, self.load.auto = 1, False\n"  # 6: in a tuple
        "    fresh = Load.of(config)\n"
        "    fresh.mode = 'open'\n"  # 8: built here
        "    alias = ctl.load\n"
        "    alias.plan = None\n"  # 10: an alias
        "    seq.state = 'running'\n"  # another type's state
        "    self.level = 0\n"
        "    self.gate.paused = True\n"
        "    ctl.status.unreachable = True\n"  # not an owned field
        "    ctl.status.warnings.append('w')\n"
        "    load.set_level(3)\n"
    )
    found = [v.line for v in state_violations(parse_source("loadgen/run/fake.py", code))]
    assert sorted(found) == [2, 3, 4, 5, 6, 8, 10]
    assert not list(state_violations(parse_source(STATE_OWNER, code)))
    assert not list(state_violations(parse_source("tests/test_fake.py", code)))


def test_the_size_rule_sees_a_long_module_class_and_function() -> None:
    function = ["def f():"] + ["    x = 1"] * 60  # 61 lines
    big = ["class C:"] + ["    y = 1"] * 300  # 301 lines
    code = "\n".join([*function, *big, *["z = 1"] * 140]) + "\n"  # 502 lines
    found = sorted((v.line, v.what) for v in RULES["size"](parse_source("tests/fake.py", code)))
    assert found == [
        (1, "function f has 61 lines (max 60)"),
        (1, "module has 502 lines (max 500)"),
        (62, "class C has 301 lines (max 300)"),
    ]
    at_the_limit = "\n".join(["def f():"] + ["    x = 1"] * 59) + "\n"
    assert not list(RULES["size"](parse_source("tests/fake.py", at_the_limit)))


def test_the_metric_rule_sees_a_name_where_it_is_written() -> None:
    names = frozenset({"ttft_ms"})
    code = 'a = "ttft_ms"\nb = f"{x}ttft_ms|cache:"\nc = "ttft_ms|bucket:x"\nd = "not_ttft_ms"\n'
    p = parse_source("loadgen/fake.py", code)
    assert sorted(literal_names(p.nodes, names)) == [
        (1, "ttft_ms"),
        (2, "ttft_ms|cache:"),
        (3, "ttft_ms|bucket:x"),
    ]
    real = 'TTFT = "ttft_ms"\n'  # the catalogue's own name
    assert [v.line for v in metric_violations(parse_source("tui/fake.py", real))] == [1]
    for home in (*METRIC_HOMES, "tests/test_fake.py", "benchmarks/fake.py"):
        where = home if home.endswith(".py") else home + "fake.py"
        assert not list(metric_violations(parse_source(where, real))), where
