"""`repro bench`: its inputs, its FLOP count, and one end-to-end run on a tiny model (no timing asserted)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from repro import cli
from repro.cli.bench import harness
from repro.cli.measure import pass_flops
from repro.cli.score import read_rows
from repro.errors import DataError

bench = harness()  # benchmarks/bench_scoring.py
PROMPT_CHAR_QUANTILES, RESPONSE_CHAR_QUANTILES = bench.PROMPT_CHAR_QUANTILES, bench.RESPONSE_CHAR_QUANTILES
bench_model, generated_rows = bench.bench_model, bench.generated_rows


@pytest.fixture
def h4_file(tmp_path, train_rows):
    path = tmp_path / "h4.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in train_rows[:30]))
    return path


def test_h4_rows_give_chosen_and_rejected_as_the_candidates(h4_file, train_rows):
    rows = read_rows(h4_file, limit=12)
    prompts, candidates = [r["prompt"] for r in rows], [r["candidates"] for r in rows]
    assert prompts == [r["prompt"] for r in train_rows[:12]]
    assert candidates == [[r["chosen"][-1]["content"], r["rejected"][-1]["content"]] for r in train_rows[:12]]


def test_prompt_candidates_rows_and_bad_rows(tmp_path, train_rows):
    path = tmp_path / "rows.jsonl"
    rows = [{"prompt": r["prompt"], "candidates": [r["chosen"][-1]["content"], "b", "c"]} for r in train_rows[:3]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "\n")
    assert read_rows(path) == rows

    path.write_text(json.dumps(rows[0]) + "\n" + json.dumps({"prompt": "p", "chosen": "only one side"}) + "\n")
    with pytest.raises(DataError, match="line 2 of .*: 'rejected' is missing; an H4 row gives both 'chosen' and "
                                        "'rejected' \\(or give 'candidates'\\)"):
        read_rows(path)
    path.write_text(json.dumps({"prompt": "p", "candidates": ["just one"]}) + "\n")
    with pytest.raises(DataError, match="line 1 .* at least two strings"):
        read_rows(path)


def test_generated_rows_follow_ultrafeedback_lengths_and_the_seed():
    prompts, candidates = generated_rows(600, seed=3)
    assert generated_rows(600, seed=3) == (prompts, candidates)
    assert generated_rows(600, seed=4)[0] != prompts
    assert all(len(c) == 2 and all(c) for c in candidates) and all(prompts)
    prompt_median = statistics.median(len(p) for p in prompts)
    answer_median = statistics.median(len(a) for c in candidates for a in c)
    # the quantile tables' medians are 363 and 863 characters; 600 draws land within about 15 % of them
    assert 0.8 * PROMPT_CHAR_QUANTILES[10] <= prompt_median <= 1.2 * PROMPT_CHAR_QUANTILES[10]
    assert 0.8 * RESPONSE_CHAR_QUANTILES[10] <= answer_median <= 1.2 * RESPONSE_CHAR_QUANTILES[10]
    assert max(len(p) for p in prompts) <= PROMPT_CHAR_QUANTILES[-1]


def test_pass_flops_match_the_matmuls_torch_counts_in_a_real_pass(tiny_pairrm_dir, train_rows):
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from repro.scorers import load_scorer

    scorer = load_scorer(str(tiny_pairrm_dir))
    row = train_rows[5]
    prompts, candidates = [row["prompt"]], [[row["chosen"][-1]["content"], row["rejected"][-1]["content"]]]
    plan, _, _ = scorer.plan(prompts, candidates)
    length = plan[0].length
    config = scorer.model.pretrained_model.config
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        scorer.model(*scorer._batch_tensors([plan[0]]))
    head = 2 * 2 * (2 * config.hidden_size * config.hidden_size + config.hidden_size)  # two head calls, tiny
    expected = pass_flops(length, hidden=config.hidden_size, layers=config.num_hidden_layers,
                          intermediate=config.intermediate_size) + head
    assert counter.get_total_flops() == pytest.approx(expected, rel=0.02)


def test_repro_bench_runs_end_to_end_and_ends_with_the_two_ratios(tmp_path, h4_file, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out_dir = tmp_path / "results"
    code = cli.main(["bench", "--size", "tiny", "--data", str(h4_file), "--prompts", "4", "--slice", "2",
                     "--threads", "1", "--batch-tokens", "2048,16384", "--output-dir", str(out_dir)])
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"speedup vs llm-blender \(batch_size=1\): \d+\.\d\dx", lines[-2])
    assert re.fullmatch(r"speedup vs llm-blender \(batch_size=8\): \d+\.\d\dx", lines[-1])

    [result_file] = out_dir.glob("bench-cpu-*.json")
    result = json.loads(result_file.read_text())
    names = list(result["contenders"])
    assert names == ["repro (batch_tokens=2048)", "repro (batch_tokens=16384)", "llm-blender (batch_size=1)",
                     "llm-blender (batch_size=8)"]
    assert result["prompts"] == 4 and result["passes"] == 8 and result["data"] == str(h4_file)
    for r in result["contenders"].values():
        assert r["seconds"] > 0 and r["peak_memory_mb"] > 0
    # same checkpoint, same tokens: llm-blender at batch_size=1 is the engine's reference (fp32, 1e-5)
    assert result["contenders"]["llm-blender (batch_size=1)"]["max_abs_score_diff_vs_repro"] <= 1e-5
    ratio = float(lines[-2].split(": ")[1].rstrip("x"))
    assert ratio == pytest.approx(result["speedup"]["llm-blender (batch_size=1)"], abs=0.006)

    # the random model was built under REPRO_CACHE; the same corpus reuses it rather than building again
    [model_dir] = (tmp_path / "cache" / "bench").glob("pairrm-tiny-*")
    assert result["model"]["path"] == str(model_dir)
    stamp = (model_dir / "model.safetensors").stat().st_mtime_ns
    rows = read_rows(h4_file)
    prompts, candidates = [r["prompt"] for r in rows], [r["candidates"] for r in rows]
    corpus = [t for p, c in zip(prompts, candidates) for t in [p, *c]]
    assert bench_model("tiny", corpus, seed=0) == model_dir
    assert (model_dir / "model.safetensors").stat().st_mtime_ns == stamp


def test_repro_bench_kind_sequence_classifier_times_the_engine_against_padded_batches(tmp_path, h4_file, monkeypatch,
                                                                                     capsys):
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    out_dir = tmp_path / "results"
    code = cli.main(["bench", "--kind", "sequence_classifier", "--size", "tiny", "--data", str(h4_file),
                     "--prompts", "3", "--slice", "2", "--threads", "1", "--batch-tokens", "4096,512",
                     "--output-dir", str(out_dir)])
    assert code == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"speedup vs padded batches of 8: \d+\.\d\dx", last)
    [result_file] = out_dir.glob("bench-reward-cpu-*.json")
    result = json.loads(result_file.read_text())
    # each budget timed, the first giving the speed-up (as for PairRM)
    assert list(result["contenders"]) == ["repro (batch_tokens=4096)", "repro (batch_tokens=512)",
                                          "padded batches of 8"]
    assert result["batch_tokens"] == [4096, 512]
    assert result["prompts"] == 3 and result["conversations"] == 6 and result["data"] == str(h4_file)
    # the same model and conversations: sorting and packing change the scores by float rounding only
    assert result["max_abs_score_diff"] <= 1e-5
    assert float(last.split(": ")[1].rstrip("x")) == pytest.approx(result["speedup_vs_padded_batches_of_8"], abs=0.006)
    assert list((tmp_path / "cache" / "bench").glob("reward-llama-tiny-*"))


def test_repro_bench_reads_the_kind_from_the_model_as_repro_score_does(tmp_path, h4_file, monkeypatch):
    # --kind defaulted to pairrm: a sequence classifier's folder crashed with an AttributeError ('pretrained_model')
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    assert cli.main(["bench", "--model", "builtin:tiny-reward-llama", "--data", str(h4_file), "--prompts", "2",
                     "--slice", "2", "--threads", "1", "--output-dir", str(tmp_path / "results")]) == 0
    [result_file] = (tmp_path / "results").glob("bench-reward-cpu-*.json")
    assert json.loads(result_file.read_text())["kind"] == "sequence_classifier"


def test_repro_bench_says_one_prompt_in_the_singular(tmp_path, h4_file, monkeypatch, capsys):
    # its own lines said "1 prompts" (and "slices of 1 prompts")
    monkeypatch.setenv("REPRO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    common = ["--size", "tiny", "--data", str(h4_file), "--prompts", "1", "--slice", "1", "--threads", "1",
              "--output-dir", str(tmp_path / "results")]
    assert cli.main(["bench", *common, "--skip", "bs1,bs8"]) == 0
    err = capsys.readouterr().err
    assert "repro bench: 1 prompt x 2 candidates," in err and "1 thread; slices of 1 prompt\n" in err
    assert cli.main(["bench", "--kind", "sequence_classifier", *common]) == 0
    err = capsys.readouterr().err
    assert "repro bench: 1 prompt, 2 conversations" in err and "cpu fp32, 1 thread\n" in err


def test_repro_bench_outside_a_checkout_says_where_the_harness_is(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli.bench, "harness", lambda: None)
    for argv in (["bench"], ["bench", "--model", "builtin:tiny-pairrm"], ["bench", "--help"]):  # options: argparse's
        assert cli.main(argv) == 2  # "unrecognized arguments" (a wheel knows none of the harness's options)
        assert "benchmarks/bench_scoring.py of a checkout" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["pairrm", "sequence_classifier"])
@pytest.mark.parametrize("budgets, why", [("abc", "expected integers separated by commas"),
                                          ("2048,0", "every budget must be >= 1")])
def test_repro_bench_refuses_bad_budgets_by_name(budgets, why, kind, tmp_path, capsys):
    assert cli.main(["bench", "--kind", kind, "--size", "tiny", "--batch-tokens", budgets,
                     "--output-dir", str(tmp_path / "results")]) == 2
    assert f"repro bench: error: --batch-tokens '{budgets}': {why}" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, least", [("--prompts", "0", 1), ("--slice", "0", 1), ("--threads", "0", 1),
                                                  ("--threads", "-2", 1), ("--job-prompts", "-1", 0)])
@pytest.mark.parametrize("kind", ["pairrm", "sequence_classifier"])
def test_repro_bench_refuses_counts_out_of_range_instead_of_running_with_the_default(option, value, least, kind,
                                                                                      tmp_path, capsys):
    # 0 read as "not given" ran with the default count, and a negative --threads reached torch
    assert cli.main(["bench", "--kind", kind, "--size", "tiny", option, value,
                     "--output-dir", str(tmp_path / "results")]) == 2
    assert f"repro bench: error: {option} {value} must be >= {least}" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


def test_h4_rows_take_the_last_assistant_turn_and_refuse_a_side_without_one(tmp_path):
    path = tmp_path / "rows.jsonl"
    turns = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "?"}]
    path.write_text(json.dumps({"prompt": "q", "chosen": turns, "rejected": "b"}) + "\n")
    assert read_rows(path)[0]["candidates"] == ["a", "b"]
    path.write_text(json.dumps({"prompt": "q", "chosen": [{"role": "user", "content": "q"}], "rejected": "b"}) + "\n")
    with pytest.raises(DataError, match="line 1 of .*'chosen' is neither a string nor a list of messages with an "
                                        "assistant message"):
        read_rows(path)


def test_repro_bench_writes_its_results_beside_the_script_wherever_it_is_started(tmp_path, monkeypatch):
    # it wrote into benchmarks/results of the current folder, which outside the checkout was a new stray folder
    monkeypatch.chdir(tmp_path)
    args = cli.build_parser("bench").parse_args(["bench"])
    assert args.output_dir == Path(bench.__file__).parent / "results"


@pytest.mark.parametrize("device_type, warm_rows", [("cpu", 2), ("cuda", 4)])
def test_side_by_side_timing_warms_each_contender_up_before_any_slice_is_timed(device_type, warm_rows, monkeypatch):
    # on a GPU the warm-up is a whole slice: the caching allocator grows before any timing, not in the first
    # contender's first timed slice (an H200 run read 0.83x for what was 1.06x)
    from repro.cli import measure

    monkeypatch.setattr(measure, "_sync", lambda device_type: None)
    monkeypatch.setattr(measure, "_start_peak", lambda device_type: None)
    calls: dict[str, list[int]] = {"a": [], "b": []}

    def contender(name):
        def run(prompts, candidates):
            calls[name].append(len(prompts))
            return [[0.0, 1.0] for _ in prompts]
        return measure.Contender(name, run)

    contenders = [contender("a"), contender("b")]
    prompts, candidates = [f"p{i}" for i in range(10)], [["x", "y"]] * 10
    lines: list[str] = []
    measure.alternate(contenders, prompts, candidates, 4, device_type, lines.append)
    assert calls == {"a": [warm_rows, 4, 4, 2], "b": [warm_rows, 4, 4, 2]}
    # the times are running totals, not the slice's: the line says so
    assert re.fullmatch(r"  slice 3/3, time so far: a \d+\.\ds, b \d+\.\ds", lines[-1]), lines
    assert [len(c.scores) for c in contenders] == [10, 10]  # the warm-up's scores are not kept
