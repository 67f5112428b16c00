"""``--tokenizer PATH``: a local tokenizer.json (built here, in code: no download) sizes prompts where the
server has no /tokenize, and the record says which tokenizer sized them (server, local file and its hash, or
the estimate); a bad path is a one-line usage error."""

from __future__ import annotations

import asyncio
import hashlib
import random
from pathlib import Path

import pytest
from fault_servers import openai_like

from loadgen.cli.commands import main
from loadgen.cli.flags import RunFlags
from loadgen.cli.resolve import resolve
from loadgen.config import RampPlan
from loadgen.exits import UsageError
from loadgen.profile import parse_profile
from loadgen.record import read_record
from loadgen.run.config import RunConfig
from loadgen.run.engine import Engine
from loadgen.run.sizing import fit_sizer, local_sizer
from loadgen.sim import build_config, run_sim_in_thread
from loadgen.target.tokenizer_file import load_tokenizer
from loadgen.types import Target
from loadgen.workload import VOCABULARY, text_pool

tokenizers = pytest.importorskip("tokenizers")

PROFILE = parse_profile(
    'name = "tok"\ndescription = "d"\n[[bucket]]\ninput = 40\noutput = 4\n', source="<tok>"
)


def word_level(path: Path) -> Path:
    """One token per vocabulary word (and [UNK] for anything else), split on whitespace."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{w: i + 1 for i, w in enumerate(VOCABULARY)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


def word_piece(path: Path) -> Path:
    """A WordPiece model trained on the vocabulary with too few pieces to keep whole words: several tokens
    per word, as a real model's tokenizer has for rarer words."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        [" ".join(VOCABULARY)] * 4, trainers.WordPieceTrainer(vocab_size=120, special_tokens=["[UNK]"])
    )
    tok.save(str(path))
    return path


def test_a_word_level_file_fits_one_word_per_token(tmp_path: Path) -> None:
    local = load_tokenizer(str(word_level(tmp_path / "tokenizer.json")))
    completions = local_sizer(local, "completions")
    assert completions.words_per_token == pytest.approx(1.0) and completions.overhead_tokens == 0
    assert completions.exact and local.sha256[:12] in completions.note
    chat = local_sizer(local, "chat")
    assert (chat.overhead_tokens, chat.per_message_tokens) == (8, 5)  # no template in a tokenizer.json
    assert "chat template estimated" in chat.note


def test_prompts_sized_by_a_subword_file_count_as_asked(tmp_path: Path) -> None:
    local = load_tokenizer(str(word_piece(tmp_path / "tokenizer.json")))
    sizer = local_sizer(local, "completions")
    assert sizer.words_per_token < 0.7  # several pieces per word: the 0.75 estimate would overshoot
    pool = text_pool(7)
    rng = random.Random(3)
    for asked in (100, 500, 2000):
        text = pool.window(rng.randrange(pool.size), sizer.words_for(asked))
        assert local.count(text) == pytest.approx(asked, rel=0.08), asked


def test_the_record_names_the_local_file_and_its_hash(tmp_path: Path) -> None:
    path = word_level(tmp_path / "tokenizer.json")
    server = openai_like()  # no /tokenize
    out = tmp_path / "run.jsonl"
    try:
        config = RunConfig(
            Target(server.url),
            PROFILE,
            plan=RampPlan((1,), step_s=0.4, warmup_s=0.0),
            out=str(out),
            telemetry=False,
            tokenizer=str(path),
        )
        engine = Engine(config)
        engine.start()
        outcome = engine.wait(60)
    finally:
        server.stop()
    assert outcome is not None and outcome.state == "finished", outcome
    header = read_record(out).header
    sized = header["tokenizer"]
    assert isinstance(sized, dict)
    assert sized["source"] == "local" and sized["path"] == str(path)
    assert sized["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert "/tokenize returned HTTP 404" in str(sized["note"])  # why the server's was not used


def test_the_server_tokenize_wins_and_the_estimate_is_named(tmp_path: Path) -> None:
    path = str(word_level(tmp_path / "tokenizer.json"))
    sim = run_sim_in_thread(build_config("fast", seed=1))
    server = openai_like()
    try:
        on_sim = asyncio.run(
            fit_sizer(RunConfig(Target(sim.url), PROFILE, tokenizer=path, warmup_s=0.0), "sim-llama-8b")
        )
        bare = asyncio.run(fit_sizer(RunConfig(Target(server.url), PROFILE, warmup_s=0.0), "tiny"))
    finally:
        sim.stop()
        server.stop()
    assert on_sim[1].kind == "server" and on_sim[1].path is None and on_sim[0].exact
    assert bare[1].kind == "estimate" and not bare[0].exact and bare[1].as_dict()["sha256"] is None


def test_a_bad_path_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.json"
    garbage.write_text('{"not": "a tokenizer"}')
    for given, said in (
        (str(tmp_path / "nope.json"), "no such file"),
        (str(garbage), "not a Hugging Face tokenizer.json"),
        (str(tmp_path), "a folder, not a tokenizer.json file"),
    ):
        with pytest.raises(UsageError, match=said):
            resolve(RunFlags(tokenizer=given, out=str(tmp_path / "r.jsonl")), "http://127.0.0.1:9")
    code = main(
        [
            "run",
            "http://127.0.0.1:9",
            "--headless",
            "--tokenizer",
            str(garbage),
            "--out",
            str(tmp_path / "r.jsonl"),
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and "garbage.json" in err and "Traceback" not in err
    )
