"""The simulator's OpenAI Responses API stream (``POST /v1/responses``): the bytes around each delta and the
terminal event, shaped like vLLM's and OpenAI's (``event: <type>`` + one ``data`` line per event).

A reply opens with ``response.created``; answer text streams as ``response.output_text.delta``, reasoning
as ``response.reasoning_text.delta`` (a reasoning model, ``EngineParams.reasoning_tokens``); it ends with
``response.completed`` (or ``response.incomplete`` when ``max_output_tokens`` cut it) carrying the usage,
``output_tokens_details.reasoning_tokens`` included. There is no ``[DONE]``: the body ends. Events carry
no ``sequence_number`` (the cached byte templates would repeat one); ramp does not read it.
"""

from __future__ import annotations


def templates(rid: str, created: int, model_json: str) -> tuple[bytes, bytes, bytes, bytes]:
    """(head, answer prefix, suffix, reasoning prefix) of one reply: each delta is prefix + text + suffix."""
    head = (
        "event: response.created\ndata: "
        f'{{"type":"response.created","response":{{"id":"{rid}","object":"response","created_at":{created},'
        f'"status":"in_progress","model":{model_json},"output":[],"usage":null}}}}\n\n'
    ).encode()
    prefix = _delta("response.output_text.delta", "msg_" + rid, 1)
    reasoning = _delta("response.reasoning_text.delta", "rs_" + rid, 0)
    return head, prefix, b'","logprobs":[]}\n\n', reasoning


def _delta(kind: str, item: str, index: int) -> bytes:
    return (
        f'event: {kind}\ndata: {{"type":"{kind}","item_id":"{item}","output_index":{index},'
        '"content_index":0,"delta":"'
    ).encode()


def terminal(
    rid: str,
    created: int,
    model_json: str,
    finish: str,
    usage: tuple[int, int, int, int | None],
    items: str = "",
) -> bytes:
    """``response.completed`` (or ``response.incomplete`` for a reply cut by its length) with the usage:
    (input, output, cached, reasoning tokens or None for a model that does not reason); ``output``: the
    JSON of its output items that ramp reads (a function call's: ``items``), else none."""
    prompt, output, cached, reasoning = usage
    kind, status = (
        ("response.incomplete", "incomplete") if finish == "length" else ("response.completed", "completed")
    )
    details = "" if reasoning is None else f',"output_tokens_details":{{"reasoning_tokens":{reasoning}}}'
    incomplete = ',"incomplete_details":{"reason":"max_output_tokens"}' if status == "incomplete" else ""
    return (
        f'event: {kind}\ndata: {{"type":"{kind}","response":{{"id":"{rid}","object":"response",'
        f'"created_at":{created},"status":"{status}"{incomplete},"model":{model_json},"output":[{items}],'
        f'"usage":{{"input_tokens":{prompt},"input_tokens_details":{{"cached_tokens":{cached}}},'
        f'"output_tokens":{output}{details},"total_tokens":{prompt + output}}}}}}}\n\n'
    ).encode()
