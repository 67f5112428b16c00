"""Answer probes (issue 34): a small share of the load's requests are fixed prompts sent at temperature 0
with a fixed seed, whose answers are kept (bounded) and compared with their reference answers
(``loadgen.analysis.quality``). A probe is sent exactly like any other request — it loads the server, is
timed and counted like the rest — and only a probe keeps its reply text.

``Probes.due()`` says when a worker's next session is a probe instead: every ``1/share``-th session, and at
least one every ``MIN_EVERY_S`` seconds, so that a short step at a low level still gets a few. Probe ``i``
cycles through ``probes`` prompts in turn, so every probe of the set is answered in every step long enough.
With verifiable tasks (``Quality.tasks``) every other probe is a task instead (``loadgen.analysis.tasks``:
its index ``TASK_BASE`` + its number, ``TASK_MAX_TOKENS`` at least), a tool-call task offering its tool.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from loadgen.analysis.tasks import TASK_BASE, TASK_MAX_TOKENS, make_task, task_numbers
from loadgen.config import Api, chat_like
from loadgen.profile import Quality
from loadgen.types import RequestSpec
from loadgen.workload.sizing import PromptSizer

# fixed probe prompts: short, with one right answer each where the model can give it
PROMPTS = (
    "Count from one to ten in words, separated by commas.",
    "Repeat exactly: The quick brown fox jumps over the lazy dog.",
    "What is 17 plus 25? Answer with the number only.",
    "Name the days of the week, starting with Monday.",
    "Spell the word 'benchmark' backwards.",
    "List the first five prime numbers.",
    "Translate to French: good morning, my friend.",
    "Write the alphabet from A to J, separated by spaces.",
)
MIN_EVERY_S = 2.0  # at least one probe in this long, per worker, whatever the share
# sampling keys a probe sets itself (or must not carry: a probe answers in text, not with a tool call)
_OWN_KEYS = frozenset({"temperature", "top_p", "seed", "tools", "tool_choice"})


def probe_overflow(quality: Quality, sizer: PromptSizer, max_model_len: int) -> str | None:
    """Why the probe set cannot fit a server serving ``max_model_len`` tokens (its longest prompt, as
    ``sizer`` counts it, plus the most a probe may answer), None when it fits: refused before the run,
    as other prompts are."""
    texts = [probe_prompt(i) for i in range(quality.probes)]
    answer = quality.max_tokens
    if quality.tasks:
        texts += [make_task(n, quality.seed).prompt for n in task_numbers(True)]
        answer = max(answer, TASK_MAX_TOKENS)
    longest = max(texts, key=len)
    prompt = math.ceil(sizer.tokens_for_words(len(longest.split()))) + sizer.overhead_tokens
    if prompt + answer <= max_model_len:
        return None
    return (
        f"--quality: a probe asks for about {prompt + answer} tokens ({prompt} of prompt + max_tokens {answer}) "
        f"but the server serves max_model_len {max_model_len}: lower [quality] max_tokens"
        + (
            f" (verifiable tasks ask for {TASK_MAX_TOKENS} at least: drop --quality-tasks)"
            if quality.tasks
            else ""
        )
    )


def probe_prompt(index: int) -> str:
    """Probe ``index``'s prompt: the fixed prompts, numbered beyond the first round."""
    base = PROMPTS[index % len(PROMPTS)]
    return base if index < len(PROMPTS) else f"{base} ({index // len(PROMPTS) + 1})"


class Probes:
    """One worker's probes: when the next is due, and its request."""

    def __init__(
        self,
        quality: Quality,
        api: Api,
        model: str,
        extra_body: tuple[tuple[str, object], ...] = (),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quality = quality
        self.api = api
        self.model = model
        self.every = max(1, round(1 / quality.share))
        kept = tuple((k, v) for k, v in extra_body if k not in _OWN_KEYS)
        self.extra_body = (*kept, ("temperature", 0.0), ("seed", quality.seed))
        self.sessions = 0
        self.sent = 0
        self.tasks_sent = 0
        # the verifiable tasks this API can ask (no tool call without tools: the Completions API)
        self.tasks = task_numbers(api != "completions") if quality.tasks else ()
        self.last_s: float | None = None
        self._clock = clock

    def due(self) -> bool:
        """Whether the next session is a probe (counts the session either way)."""
        self.sessions += 1
        now = self._clock()
        if self.sessions % self.every == 1 % self.every or (
            self.last_s is not None and now - self.last_s >= MIN_EVERY_S
        ):
            self.last_s = now
            return True
        if self.last_s is None:
            self.last_s = now
        return False

    def next_spec(self, session_id: int) -> RequestSpec:
        if self.tasks and (self.sent + self.tasks_sent) % 2 == 1:
            return self.task_spec(session_id)
        index = self.sent % self.quality.probes
        self.sent += 1
        return self._spec(session_id, probe_prompt(index), index, self.quality.max_tokens, self.extra_body)

    def task_spec(self, session_id: int) -> RequestSpec:
        """The next verifiable task's request; a tool-call task offers its tool (tool_choice auto)."""
        number = self.tasks[self.tasks_sent % len(self.tasks)]
        self.tasks_sent += 1
        task = make_task(number, self.quality.seed)
        body = self.extra_body
        if task.kind == "tool_call":
            tool = task.tool
            if self.api == "responses":  # the Responses API's tools are flat
                function = tool["function"]
                tool = {"type": "function", **(function if isinstance(function, dict) else {})}
            body = (*body, ("tools", [tool]), ("tool_choice", "auto"))
        max_tokens = max(self.quality.max_tokens, TASK_MAX_TOKENS)
        return self._spec(session_id, task.prompt, TASK_BASE + number, max_tokens, body)

    def _spec(
        self, session_id: int, text: str, index: int, max_tokens: int, body: tuple[tuple[str, object], ...]
    ) -> RequestSpec:
        chat = chat_like(self.api)
        return RequestSpec(
            api=self.api,
            model=self.model,
            max_tokens=max_tokens,
            messages=(("user", text),) if chat else (),
            prompt="" if chat else text,
            input_tokens_target=0,
            session_id=session_id,
            keep_text=True,
            extra_body=body,
            probe=index,
        )
