"""The engine against transformers: same checkpoint, same prompts, same tokens.

Ground truth: transformers' own ``generate`` and continuous batching on the checkpoint
it saved, the tokenizer against the UTF-8 bytes of the text, and the stamped results
file against what the engine page says of it.
"""

import json

import pytest
import torch
from aiinfra import results
from aiinfra.cli import main
from aiinfra.infer.engine.compare import config, offline, run, tables
from aiinfra.models.transformer import Transformer

transformers = pytest.importorskip("transformers")

SMALL = {
    "d_model": 64,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "d_ff": 176,
    "batches": (1, 3),
    "prompt_min": 5,
    "prompt_max": 20,
    "output_len": 6,
    "vary_min": 2,
    "vary_max": 12,
    "vary_requests": 7,
    "profile_steps": 3,
    "servers": False,
}


def test_the_checkpoint_loads_in_both_and_its_tokenizer_is_bytes(tmp_path):
    cfg = config.CompareConfig(**SMALL)
    ckpt = config.build_checkpoint(cfg, tmp_path)
    tok = transformers.AutoTokenizer.from_pretrained(ckpt)
    text = "Hello, 世界 \x01"
    assert tok(text).input_ids == list(text.encode())
    assert tok.decode(list(text.encode())) == text
    ours = Transformer.from_pretrained(ckpt).eval()
    hf = transformers.LlamaForCausalLM.from_pretrained(ckpt).eval()
    ids = torch.tensor([list(b"a prompt")])
    with torch.no_grad():
        torch.testing.assert_close(ours(ids), hf(ids).logits, atol=1e-5, rtol=1e-5)
    prompts = config.workload(cfg)["vary"]
    assert all(32 <= t < 127 for p in prompts for t in p)  # printable ASCII
    lengths = [3, 9, 5, 2, 12, 7, 4]
    expected = offline.run_generate(hf, prompts, lengths, 7)  # one batch, by hand
    assert [len(o) for o in expected] == lengths
    assert offline.run_engine(ours, cfg, prompts, lengths, 3) == expected
    assert offline.run_generate_batch(hf, cfg, prompts, lengths, 3) == expected


def test_a_small_comparison_agrees_everywhere_and_shows_every_table():
    res = run.run_compare(config.CompareConfig(**SMALL))
    assert res["same_tokens"] is True
    assert set(res["equal"]) == {"1", "3"} and res["vary"]["requests"] == 7
    assert set(run.speedups(res)) == {
        f"{s}@{k}" for s in ("generate_batch", "generate") for k in ("1", "3", "vary")
    }
    res = {"stamp": results.machine_stamp(1, "cpu"), **res}
    offline_rows = tables.offline_table(res).rows
    assert [r[:3] for r in offline_rows] == [["equal", 1, 1], ["equal", 3, 3]] + [
        ["varying", 3, 7]
    ]
    parts = [r[0] for r in tables.profile_table(res).rows]
    assert parts == list(tables.PROFILE_PARTS)
    assert tables.server_table(res).rows == []  # servers off
    assert res["servers"]["skipped"]


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("batches", (4, 2), "increasing"),
        ("vary_min", 300, "vary_min"),
        ("n_kv_heads", 3, "multiple of n_kv_heads"),
        ("repeats", 0, "repeats must be an int >= 1"),
    ],
)
def test_bad_comparison_configs_are_refused_by_name(field, value, match):
    with pytest.raises(ValueError, match=match):
        config.CompareConfig(**(SMALL | {field: value}))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_command_runs_the_smoke_comparison_and_prints_valid_json(tmp_path, capsys):
    out = tmp_path / "hf.json"
    argv = ["bench", "engine", "--against", "transformers", "--out", str(out)]
    assert main([*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    tables = shown["tables"].values()
    assert [t["columns"][0] for t in tables] == ["output lengths", "server", "part"]
    assert shown["result"]["same_tokens"]
    saved = results.load(config.KIND, "cpu", out)
    assert saved["same_tokens"] and saved["servers"]["runs"]["aiinfra serve"]
    assert saved["servers"]["runs"]["aiinfra serve"]["failed"] == 0


def test_the_stamped_comparison_says_what_the_engine_page_says():
    from aiinfra.book.inference import engine as page

    res = results.load(config.KIND, "cpu")
    n = len(res["equal"])
    # Padded generate gave every request the engine's tokens; continuous batching
    # of transformers too, but for float32 ties (the page quotes the gap).
    for row in [*res["equal"].values(), res["vary"]]:
        assert row["generate"]["same_tokens"]
        assert all(
            abs(m["logit_gap"]) < 1e-4 for m in row["generate_batch"]["mismatches"]
        )
    assert page.hf_mismatches("generate_batch") >= 1
    # Equal lengths: at or above the target by wall time, level by CPU time.
    for i in range(n):
        assert page.hf_speedup("generate", i) >= page.target("generate")
        assert 0.9 <= page.hf_cpu_speedup("generate", i) <= 1.3
    # Varying lengths: the target met by CPU time, missed by wall time (so the page
    # says), runs spread wider than the miss.
    assert page.hf_cpu_speedup("generate") >= page.target("generate@vary")
    assert page.hf_speedup("generate") < page.target("generate@vary")
    assert page.hf_spread() > page.target("generate@vary") / page.hf_speedup("generate")
    assert page.hf_min_speedup("generate_batch") >= page.target("generate_batch")
    # The servers: none failed a request; aiinfra serve streamed the offline text;
    # transformers serve's differ only by a tail of U+FFFD it never sends.
    runs, srv = res["servers"]["runs"], res["servers"]
    assert [runs[s]["failed"] for s in config.SERVERS] == [0, 0]
    assert page.hf_server_gain() > 1 and srv["same_as_offline"]
    assert srv["differing_texts"] >= 1 and srv["differing_before_the_end"] == 0
    assert page.profile_share("matmuls") < 50  # "a minority of the step"


@pytest.mark.parametrize("flag", ["--full", "--no-servers"])
def test_a_comparison_flag_without_against_is_a_usage_error(flag, capsys):
    with pytest.raises(SystemExit) as info:
        main(["bench", "engine", flag])
    assert info.value.code == 2
    assert "go with --against transformers" in capsys.readouterr().err
