"""Verifiable tasks (issue 34): each kind's rule with right and wrong answers, the hand schema check against
jsonschema, the tasks drawn from the seed, the probes that ask them (every other probe; a tool-call task
offers its tool; none on the Completions API), the recorder shipping a reply's tool calls, the book's
``tasks_ok`` with its interval and ``tasks_n``, failed task probes counted apart from the load's errors,
and the [quality] ``tasks`` key and ``--quality-tasks``."""

from __future__ import annotations

import json

import jsonschema
import pytest

from loadgen.analysis.quality import QualityBook, wilson
from loadgen.analysis.tasks import (
    KINDS,
    TASK_BASE,
    TASK_MAX_TOKENS,
    TASKS,
    TOOL_NAME,
    TOOL_SCHEMA,
    Task,
    check,
    make_task,
    matches,
    task_numbers,
)
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.metrics.recorder import Recorder
from loadgen.profile import ProfileError, Quality, parse_profile
from loadgen.tool_messages import calls_of, calls_text
from loadgen.types import Outcome, RequestResult, ToolCall
from loadgen.workload.probes import Probes

BASE = 'name = "q"\n[[bucket]]\ninput = 40\noutput = 8\n'


def of_kind(kind: str, seed: int = 1234) -> Task:
    return next(make_task(n, seed) for n in range(TASKS) if make_task(n, seed).kind == kind)


def timer(minutes: object, label: object = "x", name: str = TOOL_NAME) -> str:
    return calls_text((ToolCall("c1", name, json.dumps({"minutes": minutes, "label": label})),))


def test_arithmetic_is_right_only_with_the_one_integer() -> None:
    task = of_kind("arithmetic")
    a, b, c = (int(x) for x in task.prompt.split("Compute ")[1].split(".")[0].replace("*", "+").split(" + "))
    answer = a * b + c
    assert task.expected == str(answer)
    for good in (f"{answer}", f"The answer is {answer}.", f"{a} * {b} + {c} = {answer}", f"{answer:,}\n"):
        assert check(task, good), good
    for bad in (f"{answer + 1}", "", "I cannot compute that.", f"{answer} or {answer + 1}", timer(answer)):
        assert not check(task, bad), bad


def test_copy_is_right_only_with_the_string_exactly() -> None:
    task = of_kind("copy")
    text = task.expected
    assert len(text) == 16 and task.prompt.endswith(text)
    for good in (text, f"  {text}\n", f"`{text}`", f'"{text}".'):
        assert check(task, good), good
    for bad in (text[:-1], text.lower() if text != text.lower() else text.upper(), f"Sure: {text}", ""):
        assert not check(task, bad), bad


def test_json_is_right_only_when_it_matches_the_schema() -> None:
    task = of_kind("json")
    schema = json.loads(task.schema_json)
    name = schema["properties"]["name"]["enum"][0]
    count = schema["properties"]["count"]["enum"][0]
    good = {"name": name, "count": count, "tags": ["a", "b"]}
    assert name in task.prompt and str(count) in task.prompt
    for answer in (json.dumps(good), f"```json\n{json.dumps(good)}\n```", f"Here: {json.dumps(good)} done"):
        assert check(task, answer), answer
    for value in (
        {**good, "count": count + 1},  # the wrong value
        {**good, "count": str(count)},  # the wrong type
        {**good, "count": float(count) + 0.5},
        {"name": name, "count": count},  # a required key missing
        {**good, "tags": [1]},  # an item of the wrong type
        {**good, "name": True},
    ):
        assert not check(task, json.dumps(value)), value
    assert not check(task, "{not json}") and not check(task, "no object at all") and not check(task, "")


def test_a_tool_call_is_right_only_with_arguments_that_parse_against_the_tools_schema() -> None:
    task = of_kind("tool_call")
    minutes = int(task.expected)
    assert task.tool["function"] == {
        "name": TOOL_NAME,
        "description": "start a timer",
        "parameters": TOOL_SCHEMA,
    }
    assert check(task, timer(minutes)) and check(task, timer(minutes, "tea"))
    two = calls_text(
        (
            ToolCall("a", "other", "{}"),
            ToolCall("b", TOOL_NAME, json.dumps({"minutes": minutes, "label": "l"})),
        )
    )
    assert check(task, two)  # one right call among others
    broken = calls_text((ToolCall("c", TOOL_NAME, '{"minutes": 5, "label"'),))  # cut mid-way
    for bad in (
        timer(minutes + 1),
        timer(str(minutes)),
        timer(minutes, 3),
        timer(minutes, name="get_time"),
        broken,
    ):
        assert not check(task, bad), bad
    no_label = calls_text((ToolCall("c", TOOL_NAME, json.dumps({"minutes": minutes})),))
    assert not check(task, no_label)
    assert not check(task, f'{{"minutes": {minutes}, "label": "x"}}')  # in text: not a call
    assert calls_of("plain text") is None and calls_of(calls_text(())) == []


def test_the_hand_schema_check_agrees_with_jsonschema() -> None:
    schemas = [
        json.loads(make_task(n, 7).schema_json) for n in range(TASKS) if make_task(n, 7).kind == "json"
    ]
    schemas += [
        TOOL_SCHEMA,
        {**TOOL_SCHEMA, "additionalProperties": False},
        {"type": "number"},
        {"type": "boolean"},
    ]
    values: list[object] = [
        None, True, 0, 1.5, "s", [], ["a"], [1], {}, {"minutes": 3, "label": "x"},
        {"minutes": 3, "label": "x", "extra": 1}, {"minutes": True, "label": "x"}, {"minutes": 3.0, "label": "x"},
    ]  # fmt: skip
    for schema in schemas:
        name, count = (
            schema.get("properties", {}).get(k, {}).get("enum", [None])[0] for k in ("name", "count")
        )
        for value in [*values, {"name": name, "count": count, "tags": ["t"]}, {"name": name, "count": count}]:
            want = jsonschema.Draft202012Validator(schema).is_valid(value)
            assert matches(value, schema) == want, (schema, value)


def test_tasks_are_drawn_from_the_seed() -> None:
    tasks = [make_task(n, 1234) for n in range(TASKS)]
    assert [t.kind for t in tasks] == [*KINDS, *KINDS]
    assert tasks == [make_task(n, 1234) for n in range(TASKS)]  # the same in every run with the seed
    assert len({t.prompt for t in tasks}) == TASKS and tasks != [make_task(n, 99) for n in range(TASKS)]
    assert task_numbers(False) == tuple(n for n in range(TASKS) if KINDS[n % 4] != "tool_call")


def test_every_other_probe_is_a_task_and_a_tool_task_offers_its_tool() -> None:
    probes = Probes(Quality(probes=2, tasks=True), "chat", "m")
    specs = [probes.next_spec(i) for i in range(16)]
    assert [s.probe for s in specs[:6]] == [0, TASK_BASE, 1, TASK_BASE + 1, 0, TASK_BASE + 2]
    tool_task = next(
        s for s in specs if s.probe >= TASK_BASE and make_task(s.probe - TASK_BASE, 1234).kind == "tool_call"
    )
    body = dict(tool_task.extra_body)
    assert (
        body["tools"] == [make_task(tool_task.probe - TASK_BASE, 1234).tool] and body["tool_choice"] == "auto"
    )
    assert body["temperature"] == 0.0 and tool_task.max_tokens == TASK_MAX_TOKENS and tool_task.keep_text
    assert all("tools" not in dict(s.extra_body) for s in specs if s.probe < TASK_BASE)
    assert {make_task(s.probe - TASK_BASE, 1234).prompt for s in specs if s.probe >= TASK_BASE} == {
        make_task(n, 1234).prompt for n in range(TASKS)
    }
    flat = Probes(Quality(tasks=True), "responses", "m")
    responses = [flat.next_spec(i) for i in range(16)]
    tools = [dict(s.extra_body)["tools"] for s in responses if "tools" in dict(s.extra_body)]
    assert tools and tools[0] == [
        {"type": "function", "name": TOOL_NAME, "description": "start a timer", "parameters": TOOL_SCHEMA}
    ]
    completions = Probes(Quality(tasks=True), "completions", "m")
    kinds = {
        make_task(s.probe - TASK_BASE, 1234).kind
        for s in (completions.next_spec(i) for i in range(32))
        if s.probe >= TASK_BASE
    }
    assert kinds == {"arithmetic", "copy", "json"}
    plain = Probes(Quality(), "chat", "m")
    assert all(plain.next_spec(i).probe < TASK_BASE for i in range(8))


def test_the_recorder_ships_a_task_replys_tool_calls() -> None:
    rec = Recorder()
    call = ToolCall("c1", TOOL_NAME, '{"minutes": 5, "label": "x"}')
    rec.record(RequestResult(Outcome.OK, 0, 1, 2, output_text="", tool_calls=(call,), probe=TASK_BASE + 3))
    rec.record(RequestResult(Outcome.OK, 0, 1, 2, output_text="449", probe=TASK_BASE))
    (i, text), (j, other) = rec.take(0, 1).probes
    assert (i, calls_of(text)) == (TASK_BASE + 3, [(TOOL_NAME, call.arguments)]) and (j, other) == (
        TASK_BASE,
        "449",
    )


def test_the_book_checks_tasks_and_counts_them_apart() -> None:
    seed = 1234
    book = QualityBook(tasks_seed=seed)
    right = {n: make_task(n, seed) for n in range(4)}
    answers = {0: right[0].expected, 1: right[1].expected, 2: "{}", 3: timer(int(right[3].expected))}
    step = book.step(
        [
            (0, "a b"),
            *((TASK_BASE + n, text) for n, text in answers.items()),
            (TASK_BASE + 1, "wrong"),
            (TASK_BASE, None),
            (0, None),
        ]
    )
    assert step is not None
    assert (step["n"], step["agree"], step["errors"]) == (1, 1.0, 2)  # a failed task probe and a failed probe
    assert step["reference"] == {"0": "a b"}  # a task's answer is never a reference
    assert step["tasks_n"] == 5 and step["tasks_ok"] == 3 / 5  # the JSON {} and "wrong" failed
    assert (step["tasks_ok_lo"], step["tasks_ok_hi"]) == pytest.approx(wilson(3, 5))
    only_probes = book.step([(0, "a b")])
    assert only_probes is not None and only_probes["tasks_n"] == 0 and only_probes["tasks_ok"] is None
    off = QualityBook().step([(0, "a"), (TASK_BASE, "449")])
    assert off is not None and off["tasks_ok"] is None and "tasks_n" not in off
    on, plain = QualityBook.of(Quality(tasks=True, seed=5)), QualityBook.of(Quality())
    assert on is not None and on.tasks_seed == 5 and plain is not None and plain.tasks_seed is None


def test_the_tasks_key_and_the_flag() -> None:
    q = parse_profile(BASE + "[quality]\ntasks = true\n", source="<t>").quality
    assert q is not None and q.tasks and q.to_dict()["tasks"] is True
    assert "tasks" not in Quality().to_dict()  # records of runs without tasks read as before
    with pytest.raises(ProfileError, match="tasks"):
        parse_profile(BASE + "[quality]\ntasks = 1\n", source="<t>")
    config = resolve(RunFlags(quality_tasks=True), "http://127.0.0.1:9")
    assert config.profile.quality == Quality(tasks=True)
    assert resolve(RunFlags(quality=True), "http://127.0.0.1:9").profile.quality == Quality()


def test_a_hostile_answer_fails_its_task_without_an_exception() -> None:
    deep = "[" * 3000 + "]" * 3000  # nested past Python's JSON parser: RecursionError, not ValueError
    for kind in KINDS:
        task = of_kind(kind)
        for answer in (
            deep,
            "{" + deep + "}",
            calls_text((ToolCall("c", TOOL_NAME, deep),)),
            "\x1etool_calls " + deep,
        ):
            assert not check(task, answer), (kind, answer[:20])
    book = QualityBook(tasks_seed=1234)
    step = book.step([(TASK_BASE + n, deep) for n in range(TASKS)])
    assert step is not None and step["tasks_n"] == TASKS and step["tasks_ok"] == 0.0
