"""Build a tiny, randomly initialised Llama with its own tokenizer, offline, for tests against a real vLLM.

Run with the vLLM venv's python (it needs torch, transformers and tokenizers):

    python tests/vllm/build_tiny_model.py OUT_DIR

Everything is made here from a seed: the tokenizer's training text (English words plus seeded syllable
words), a 4,096-token BPE with a Metaspace pre-tokenizer (a byte-level BPE made the random model emit
broken UTF-8; Metaspace pieces always decode to readable text), a ChatML chat template with eos
``<|im_end|>``, and a LlamaForCausalLM (hidden 256, 4 layers, 4 heads, 2 KV heads, 4,096 positions, bf16)
with seeded random weights. Nothing is downloaded. About 20 s on 2 cores; about 15 MB on disk.
"""

from __future__ import annotations

import json
import random
import string
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol, cast

SEED = 1234
VOCAB_SIZE = 4096
SPECIAL = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

WORDS = """
the of and to in is was for on that with as by at from it his an are were which this be or had not but
their has have one also its new after first who two they her been other when there all into more time
during would she only over most some can years city later about such between many where then may than
school these world under state both part year while people through made him team well used several three
because known found any each called number however until before since work will what early name against
them second series high small large family life could song water group area based local music season house
film game story place north south east west river road town village station church line power army party
war country history book letter table market order point light level field form child mother father
brother sister friend woman man person member leader player writer teacher doctor student worker king
queen lord judge officer captain farmer driver artist author singer actor engineer garden forest island
mountain valley lake ocean beach desert bridge tower castle palace museum library hospital office street
square park hall room door window wall floor roof kitchen chair bed lamp paper pen glass plate cup bottle
box bag coat shirt shoe hat ring watch phone camera radio picture morning evening night summer winter
spring autumn today moment hour minute week month century period red blue green white black yellow brown
grey dark bright warm cold hot cool soft hard strong weak quick slow long short tall low wide narrow deep
heavy clean fresh simple clear quiet loud happy kind good better best great little old young big
different important public real free full special whole close open common certain recent private similar
possible popular main major final general national natural social human political economic cultural
medical legal physical central modern ancient average make take give find keep leave bring begin show
hear play run move live believe hold turn start seem help talk feel try call ask need become write read
learn speak spend grow win offer remember consider appear buy wait serve die send expect build stay fall
cut reach kill remain suggest raise pass sell decide return explain hope develop carry break receive
agree support hit produce eat cover catch draw choose cause follow change create walk travel visit plan
answer report design manage share train idea fact case company system program question government problem
service hand eye job word business issue side head fire nature money lot right study home reason result
method process theory energy health science rate rule model price cost value size type sort range stage
event effect action piece trade chance choice record voice view food bread rice fruit apple orange coffee
tea milk sugar salt meat fish chicken egg cheese butter soup horse dog cat bird cow sheep animal tree
flower grass leaf stone sand rock metal wood gold silver iron cloud rain snow wind storm sun moon star sky
earth ground air wave smoke heat noise sound very often never always sometimes usually again still
already soon almost nearly quite rather just here everywhere together away back down forward ahead
inside outside above below near far hello please thanks yes no what why how who user assistant system
""".split()
SYLLABLES = (
    "ka ri to na me lo su vi pe da ne mo ru zi fa le bo ti ga hu sa po di ke nu ra ve mi go tu ba "
    "shi cha tho pla stre gri blo fen dor mar tan sel vin cor lin"
).split()


def corpus(rng: random.Random, lines: int = 30_000) -> Iterator[str]:
    """Seeded sentences: mostly English words, some syllable words, numbers and punctuation."""
    punct = [".", ",", "?", "!", ":", ";"]
    for _ in range(lines):
        words = []
        for _ in range(rng.randint(6, 24)):
            r = rng.random()
            if r < 0.75:
                words.append(rng.choice(WORDS))
            elif r < 0.95:
                words.append("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))))
            else:
                words.append(str(rng.randint(0, 9999)))
            if rng.random() < 0.08:
                words[-1] += rng.choice(punct)
        line = " ".join(words)
        # Newlines too: the chat template puts one after every role name and message.
        yield line[0].upper() + line[1:] + ("." if rng.random() < 0.7 else ".\n" + rng.choice(WORDS))


class ChatTokenizer(Protocol):
    """The calls this script makes on transformers' ``PreTrainedTokenizerFast``, typed here because
    transformers is installed only in CI's vLLM venv (ramp's own env, where mypy runs, lacks it)."""

    def __len__(self) -> int: ...

    def __call__(self, text: str) -> Mapping[str, list[int]]: ...

    def convert_tokens_to_ids(self, tokens: str) -> int: ...

    def apply_chat_template(
        self, conversation: list[dict[str, str]], *, tokenize: bool, add_generation_prompt: bool
    ) -> str: ...


def build_tokenizer(out: Path) -> ChatTokenizer:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=list(string.printable),  # every ASCII character has a token: no <unk> in English
    )
    tok.train_from_iterator(corpus(random.Random(SEED)), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="<|im_end|>",
        unk_token="<unk>",
        pad_token="</s>",
        model_max_length=4096,
    )
    fast.chat_template = CHATML
    fast.save_pretrained(out)
    return cast(ChatTokenizer, fast)


def build_model(out: Path, tokenizer: ChatTokenizer) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    vocab = len(tokenizer)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.convert_tokens_to_ids("<s>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.convert_tokens_to_ids("</s>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    # generation_config.json from save_pretrained may carry sampling defaults vLLM would adopt; keep it plain.
    (out / "generation_config.json").write_text(
        json.dumps({"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id}) + "\n"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: build_tiny_model.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    tokenizer = build_tokenizer(out)
    t1 = time.perf_counter()
    build_model(out, tokenizer)
    t2 = time.perf_counter()
    sample = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hello world"}], tokenize=False, add_generation_prompt=True
    )
    ids = tokenizer(sample)["input_ids"]
    print(
        f"tiny model in {out}: vocab {len(tokenizer)}, tokenizer {t1 - t0:.1f} s, "
        f"weights {t2 - t1:.1f} s; chat prompt {sample!r} -> {len(ids)} tokens"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
