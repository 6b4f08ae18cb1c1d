"""The scoring job end to end on a tiny checkpoint: order and budget invariance, torchrun processes, resume
after kill -9, invalidation of old chunks, progress output and early errors."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from repro.errors import DataError, ParameterError
from repro.scorers import load_scorer
from repro.scorers.common import BudgetedBatches, ranks_from_scores
from repro.construct.scoring import ScoringJob, job_fingerprint
from scoring_defaults import run_scoring, with_run_defaults
from repro import manifest
from repro.jobs import fingerprint_of
from repro.parameters import ConstructParams, default_batch_tokens


# short limits keep the tiny model fast; most real answers are truncated, exercising the per-prompt budget
LIMITS = dict(source_maxlength=64, candidate_maxlength=32)
# the engine's fp32 tolerance against llm-blender; batches of other shapes round differently, never more
TOLERANCE = 1e-5
pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny models: extra threads only spin


@pytest.fixture(scope="module")
def job(train_rows) -> tuple[list[str], list[list[str]]]:
    """16 real prompts with 2 to 4 candidates (chosen, rejected, then answers borrowed from other rows)."""
    rows = train_rows[100:116]
    prompts = [r["prompt"] for r in rows]
    candidates = []
    for i, r in enumerate(rows):
        cands = [r["chosen"][-1]["content"], r["rejected"][-1]["content"]]
        if i % 3 == 0:
            cands.append(rows[(i + 5) % len(rows)]["chosen"][-1]["content"])
        if i % 5 == 0:
            cands.append(rows[(i + 7) % len(rows)]["rejected"][-1]["content"])
        candidates.append(cands)
    return prompts, candidates


@pytest.fixture(scope="module")
def reference(job, tiny_pairrm_dir, tmp_path_factory):
    """One uninterrupted single-process run (chunks of 5 prompts: 5, 5, 5, 1) that other runs are compared with."""
    prompts, candidates = job
    work = tmp_path_factory.mktemp("reference-work")
    result = run_scoring(prompts, candidates, model=str(tiny_pairrm_dir), work_dir=work, chunk_size=5,
                         progress=False, **LIMITS)
    return result, work


def _chunk_bytes(work_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(work_dir.glob("chunk-*.json"))}


def _max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def test_reference_run_scores_every_candidate_like_the_scorer_itself(job, reference, tiny_pairrm_dir):
    prompts, candidates = job
    result, work = reference
    assert [len(s) for s in result.scores] == [len(c) for c in candidates]
    direct = load_scorer(str(tiny_pairrm_dir), **LIMITS).score(prompts, candidates)
    assert _max_diff(result.scores, [list(s) for s in direct]) <= TOLERANCE
    for s in result.scores:
        assert abs(sum(s)) < 1e-6  # PairRM scores of a prompt sum to 0
    info = result.info
    assert (info["prompts"], info["chunks"], info["chunks_resumed"], info["processes"]) == (16, 4, 0, 1)
    assert info["dtype"] == "fp32" and info["device"] == "cpu" and info["prompts_per_second"] > 0
    assert len(_chunk_bytes(work)) == 4
    # no budget given (the run's default): a CPU's, 1.6x faster there than a GPU's (benchmarks/RESULTS.md)
    assert ConstructParams().batch_tokens is None and info["batch_tokens"] == default_batch_tokens("cpu") == 2048
    assert default_batch_tokens("cuda") == 16384 and default_batch_tokens("mps") == 2048


def test_a_run_whose_chunks_are_all_done_loads_no_weights(job, reference, tiny_pairrm_dir, monkeypatch):
    # a re-run after an interruption in 02_analyze or 03_card executes 01_construct again: on a GPU, loading PairRM's
    # 1.7 GB (or an 8B reward model, per process) for no chunk to score
    prompts, candidates = job
    result, work = reference

    def no_weights(*args, **kwargs):
        raise AssertionError("the weights were loaded")

    monkeypatch.setattr("repro.scorers.pairrm.load_pairrm_model", no_weights)
    resumed = run_scoring(prompts, candidates, model=str(tiny_pairrm_dir), work_dir=work, chunk_size=5,
                          progress=False, **LIMITS)
    assert resumed.info["chunks_resumed"] == 4 and resumed.scores == result.scores
    timings = ("seconds", "scoring_seconds", "load_seconds", "prompts_per_second", "prompts_computed",
               "chunks_resumed", "batch_tokens_used")  # (a resumed run records every prompt's budget)
    assert {k: v for k, v in resumed.info.items() if k not in timings} == {
        k: v for k, v in result.info.items() if k not in timings}
    assert resumed.info["batch_tokens_used"] == {str(result.info["batch_tokens"]): len(prompts)}


@pytest.mark.parametrize("damage, held", [(lambda row: row[:1], r"\[-?\d\S*\]"), (lambda row: None, "null")])
def test_a_chunk_of_the_right_length_whose_row_is_no_scores_is_refused_naming_it(job, reference, tiny_pairrm_dir,
                                                                                 tmp_path, damage, held):
    # a row's scores cut to one was used as finished: the run ended "complete" a row short, its manifest saying it was
    # dropped for "fewer_than_two_candidates"; scores null: a bare TypeError ('>' between NoneType) naming no file
    prompts, candidates = job
    work = tmp_path / "work"
    shutil.copytree(reference[1], work)
    damaged = work / "chunk-000001.json"
    rows = json.loads(damaged.read_text())
    rows[0] = damage(rows[0])
    damaged.write_text(json.dumps(rows))
    kwargs = dict(model=str(tiny_pairrm_dir), work_dir=work, chunk_size=5, progress=False, **LIMITS)
    with pytest.raises(DataError, match=rf"PairRM scoring: {re.escape(str(damaged))} holds {held} for its result 1 of "
                                        rf"5, not 3 scores \(one number per candidate\); delete it to recompute that "
                                        rf"chunk\.$"):
        run_scoring(prompts, candidates, **kwargs)
    damaged.unlink()  # as said: that chunk alone is scored again
    resumed = run_scoring(prompts, candidates, **kwargs)
    assert resumed.info["chunks_resumed"] == 3 and resumed.scores == reference[0].scores


def test_a_bad_setting_fails_before_the_finished_work_is_touched(job, tiny_pairrm_dir, tmp_path):
    # with the weights loaded at the first chunk, a typo (here a limit below 3) set the finished chunks aside, as
    # work of other settings, before its error: the corrected command then scored everything again
    prompts, candidates = job
    work = tmp_path / "work"
    kwargs = dict(model=str(tiny_pairrm_dir), work_dir=work, chunk_size=5, progress=False)
    run_scoring(prompts, candidates, **kwargs, **LIMITS)
    before = sorted(p.name for p in work.iterdir())
    with pytest.raises(ParameterError, match=r"candidate_maxlength: must be >= 3 \(got 2\)"):
        run_scoring(prompts, candidates, **kwargs, **{**LIMITS, "candidate_maxlength": 2})
    assert sorted(p.name for p in work.iterdir()) == before  # no stale-*/
    assert run_scoring(prompts, candidates, **kwargs, **LIMITS).info["chunks_resumed"] == 4


def test_shuffled_input_and_other_budgets_give_the_same_scores(job, reference, tiny_pairrm_dir, tmp_path):
    prompts, candidates = job
    expected = reference[0].scores
    order = list(range(len(prompts)))
    random.Random(7).shuffle(order)
    longest_pass = LIMITS["source_maxlength"] + 2 * (LIMITS["candidate_maxlength"] + LIMITS["source_maxlength"] // 2)
    # one pass per batch in chunks of 3 prompts; everything in one batch and one chunk
    for i, (chunk_size, batch_tokens) in enumerate([(3, longest_pass), (16, 1 << 20)]):
        result = run_scoring([prompts[k] for k in order], [candidates[k] for k in order],
                             model=str(tiny_pairrm_dir), work_dir=tmp_path / f"w{i}", chunk_size=chunk_size,
                             batch_tokens=batch_tokens, progress=False, **LIMITS)
        back = [None] * len(order)
        for pos, k in enumerate(order):
            back[k] = result.scores[pos]
        assert _max_diff(back, expected) <= TOLERANCE, (chunk_size, batch_tokens)
        for got, want in zip(back, expected):
            gaps = np.diff(np.sort(want))
            if gaps.size == 0 or gaps.min() > 1e-4:  # ranks are only comparable away from near-ties
                assert list(ranks_from_scores(got)) == list(ranks_from_scores(want))


def test_the_same_prompts_in_another_order_give_bit_identical_scores(job, tiny_pairrm_dir):
    # within one batch plan the engine sorts passes by length and text: the input order cannot matter at all
    prompts, candidates = job
    scorer = load_scorer(str(tiny_pairrm_dir), **LIMITS)
    first = scorer.score(prompts, candidates, batch_tokens=700)
    order = list(range(len(prompts)))[::-1]
    second = scorer.score([prompts[k] for k in order], [candidates[k] for k in order], batch_tokens=700)
    for pos, k in enumerate(order):
        assert second[pos].tobytes() == first[k].tobytes()


def test_two_torchrun_processes_give_byte_identical_chunks_and_scores(job, reference, tiny_pairrm_dir, tmp_path,
                                                                      capfd, torchrun_processes):
    prompts, candidates = job
    result = run_scoring(prompts, candidates, model=str(tiny_pairrm_dir), work_dir=tmp_path, chunk_size=5,
                         num_processes=torchrun_processes, progress=True, **LIMITS)
    assert result.scores == reference[0].scores
    assert _chunk_bytes(tmp_path) == _chunk_bytes(reference[1])
    assert result.info["processes"] == 2 and result.info["chunks"] == 4
    assert not (tmp_path / "torchrun-job.json").exists() and not (tmp_path / "torchrun-result.json").exists()
    err = capfd.readouterr().err
    assert "PairRM scoring (rank 0 of 2: its share)" in err  # the workers' progress is relayed


def test_torchrun_processes_say_the_rows_the_row_cache_gives_back_of_work_set_aside(job, tiny_pairrm_dir, tmp_path,
                                                                                     capfd, torchrun_processes):
    # a run continued in 2 processes with more rows and another chunk size said "3 finished chunks ... they are set
    # aside in ... (not reused)", then took the 12 rows it had made from the row cache (as one process says it does)
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), work_dir=tmp_path / "w", cache_dir=tmp_path / "cache", progress=True,
                  **LIMITS)
    run_scoring(prompts[:12], candidates[:12], chunk_size=5, **common)
    capfd.readouterr()
    result = run_scoring(prompts, candidates, chunk_size=4, num_processes=torchrun_processes, **common)
    assert (result.info["cache"]["rows_from_cache"], result.info["cache"]["rows_computed"]) == (12, 4)
    (stale,) = (tmp_path / "w").glob("stale-*")
    assert (f"they are set aside in {stale} (not reused as chunks, but the settings that decide a row are the same: "
            f"the row cache in {tmp_path / 'cache'} gives back 12 of this run's 16 rows, not made again; the 4 rows it "
            f"lacks are made).") in " ".join(capfd.readouterr().err.split())


def test_a_run_killed_with_sigkill_resumes_to_byte_identical_results(job, reference, tiny_pairrm_dir, tmp_path,
                                                                    kill_during_scoring):
    prompts, candidates = job
    work = tmp_path / "work"
    kwargs = with_run_defaults(model=str(tiny_pairrm_dir), work_dir=str(work), chunk_size=5, progress=False, **LIMITS)
    kill_during_scoring(tmp_path, "repro.scorers.pairrm:PairRM", prompts, candidates, kwargs)
    assert sorted(_chunk_bytes(work)) == ["chunk-000000.json", "chunk-000001.json"]

    resumed = run_scoring(prompts, candidates, **kwargs)
    assert resumed.info["chunks_resumed"] == 2 and resumed.info["prompts_computed"] == len(prompts) - 10
    assert resumed.scores == reference[0].scores
    assert _chunk_bytes(work) == _chunk_bytes(reference[1])
    assert json.dumps(resumed.scores) == json.dumps(reference[0].scores)


@pytest.mark.parametrize("change", ["candidate_maxlength", "model", "inputs"])
def test_changed_parameters_or_inputs_invalidate_old_chunks(job, reference, tiny_pairrm_dir, tmp_path, change):
    prompts, candidates = job
    work = tmp_path / "work"
    base = dict(model=str(tiny_pairrm_dir), work_dir=work, chunk_size=5, progress=False, **LIMITS)
    first = run_scoring(prompts, candidates, **base)
    assert run_scoring(prompts, candidates, **base).info["chunks_resumed"] == 4  # unchanged: all reused

    changed = dict(base)
    if change == "candidate_maxlength":
        changed["candidate_maxlength"] = 40
    elif change == "model":
        from repro.scorers.tiny import build_tiny_pairrm

        changed["model"] = str(build_tiny_pairrm(tmp_path / "other-model", seed=1))
    else:
        candidates = [list(c) for c in candidates]
        candidates[-1][0] = "An edited answer. " + candidates[-1][0]
    second = run_scoring(prompts, candidates, **changed)
    assert second.info["chunks_resumed"] == 0 and second.info["prompts_computed"] == len(prompts)
    assert second.scores[-1] != first.scores[-1]
    stale = list(work.glob("stale-*"))
    assert len(stale) == 1 and len(list(stale[0].glob("chunk-*.json"))) == 4


def test_the_fingerprint_covers_what_decides_the_scores_and_nothing_else(tiny_pairrm_dir):
    settings = {k: v for k, v in with_run_defaults(kind="pairrm", batch_tokens=2048).items() if k != "num_processes"}
    base = ScoringJob(model=str(tiny_pairrm_dir), work_dir="work/scoring", source_maxlength=None,
                      candidate_maxlength=None, progress=True, **settings)
    digest = fingerprint_of(job_fingerprint(base))
    for field, value in [("dtype", "bf16"), ("source_maxlength", 1000), ("candidate_maxlength", 400),
                         ("backend", "llm-blender"), ("batch_tokens", 4096)]:
        assert fingerprint_of(job_fingerprint(replace(base, **{field: value}))) != digest, field
    # the budget decides the batches, hence the rounding (test_pairrm's mid-size test); where the work is
    # written and whether progress is shown do not
    for field, value in [("work_dir", "elsewhere"), ("progress", False)]:
        assert fingerprint_of(job_fingerprint(replace(base, **{field: value}))) == digest, field
    # a reward model's options decide its scores: each one changed gives other work
    reward = replace(base, kind="sequence_classifier", options={"max_length": 64, "output_index": 0,
                                                                "chat_template": "{{ messages[0].content }}"})
    digests = {fingerprint_of(job_fingerprint(replace(reward, options={**reward.options, **change})))
               for change in ({}, {"max_length": 16}, {"output_index": 1}, {"chat_template": "{{ messages }}"})}
    assert len(digests) == 4


def test_a_tokenizers_upgrade_gives_other_scoring_work_and_an_unrelated_package_not(tiny_pairrm_dir, monkeypatch):
    # token ids decide the scores: after a tokenizers upgrade every old chunk was reused (rows_computed 0) while the
    # manifest recorded the new version; llm-blender's version counts where it scores, and only there
    settings = {k: v for k, v in with_run_defaults(kind="pairrm", batch_tokens=2048).items() if k != "num_processes"}
    repro_job = ScoringJob(model=str(tiny_pairrm_dir), work_dir="work/scoring", source_maxlength=None,
                           candidate_maxlength=None, progress=True, **settings)
    blender_job = replace(repro_job, backend="llm-blender")
    installed = manifest.package_versions()

    def digests(**versions):
        monkeypatch.setattr(manifest, "package_versions", lambda: {**installed, **versions})
        return [fingerprint_of(job_fingerprint(j)) for j in (repro_job, blender_job)]

    before = digests()
    assert digests(seaborn="0.0.1") == before
    assert [a != b for a, b in zip(digests(tokenizers="0.0.1"), before)] == [True, True]
    assert [a != b for a, b in zip(digests(**{"llm-blender": "0.0.1"}), before)] == [False, True]


def test_progress_prints_a_line_per_few_percent_with_rate_and_eta(job, tiny_pairrm_dir, tmp_path, capsys):
    prompts, candidates = job
    run_scoring(prompts, candidates, model=str(tiny_pairrm_dir), work_dir=tmp_path, chunk_size=8,
                progress=True, **LIMITS)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("PairRM scoring")]
    assert 2 <= len(lines) <= 21  # at most one per 5 %, plus the final line; never one per update
    assert "prompts/s" in lines[0] and "ETA" in lines[0]
    assert lines[-1].startswith("PairRM scoring: 100% (16/16 prompts)")


def test_bad_requests_fail_before_any_work(job, tiny_pairrm_dir, tmp_path):
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), work_dir=tmp_path / "w", progress=False)
    with pytest.raises(ParameterError, match=r"num_processes: must be >= 1 \(got 0\)"):
        run_scoring(prompts, candidates, num_processes=0, **common)
    # the Python API: a count that is no whole number gave int()'s ValueError, or was cut (chunk_size=2.5: 2); a
    # limit of 2 passed (">= 1") to be refused inside the load, after the work folder was made. The schema's rule now
    whole = "Input should be a valid integer"
    for name, value, words in (("chunk_size", 2.5, whole), ("num_processes", "two", whole),
                               ("source_maxlength", "long", whole),
                               ("candidate_maxlength", 0, "must be >= 3"), ("source_maxlength", 2, "must be >= 3"),
                               ("batch_tokens", True, "must be a number, not true or false")):
        with pytest.raises(ParameterError, match=re.escape(f"{name}: {words}")):
            run_scoring(prompts, candidates, **{**common, name: value})
    with pytest.raises(ParameterError, match="no CUDA GPU"):
        run_scoring(prompts, candidates, device="cuda", num_processes=2, **common)
    with pytest.raises(ParameterError, match=r"dtype: .* \(got 'fp8'\)"):
        run_scoring(prompts, candidates, dtype="fp8", **common)
    bad = [list(c) for c in candidates]
    bad[3] = bad[3][:1]
    with pytest.raises(DataError, match="Row 3"):
        run_scoring(prompts, bad, num_processes=2, **common)
    assert not (tmp_path / "w").exists()


def test_repro_score_under_your_own_torchrun_writes_the_single_process_scores_once(job, reference, tiny_pairrm_dir,
                                                                                     tmp_path, torchrun_processes):
    # what each node runs in a multi-node job: every rank executes `repro score`, rank 0 writes the output
    prompts, candidates = job
    rows = [{"prompt": p, "candidates": c, "row": i} for i, (p, c) in enumerate(zip(prompts, candidates))]
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={torchrun_processes}", "-m", "repro.cli",
           "score", "--model", str(tiny_pairrm_dir), "--input", str(tmp_path / "in.jsonl"), "--output",
           str(tmp_path / "out.jsonl"), "--chunk-size", "5", "--source-maxlength", "64", "--candidate-maxlength", "32",
           "--device", "cpu"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["row"] for r in out] == list(range(len(rows)))
    assert [r["scores"] for r in out] == reference[0].scores
    assert _chunk_bytes(tmp_path / "out.jsonl.work") == _chunk_bytes(reference[1])
    assert done.stderr.count("prompts scored with") == 1  # one writer


class _CountingBatches(BudgetedBatches):
    """BudgetedBatches' loop alone: zeros for every item, an out-of-memory at forward call `fail_at`."""

    device, dtype = torch.device("cpu"), "fp32"

    def __init__(self, fail_at: int):
        self.calls, self.fail_at = 0, fail_at

    def _forward(self, batch):
        self.calls += 1
        if self.calls == self.fail_at:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return np.zeros(len(batch))


def test_progress_reports_each_prompt_once_when_its_last_item_is_done_across_an_out_of_memory_restart():
    plan = [SimpleNamespace(length=n) for n in (10, 9, 8, 7, 6, 5, 4, 3)]
    # prompt 5 shares its items with prompts 1 and 2; prompt 6 needs none (it is never reported, and no error)
    needed = [[0, 7], [1], [2, 3], [4], [5, 6], [1, 2], []]
    for fail_at in (0, 1, 2, 3):
        reported: list[int] = []
        out = _CountingBatches(fail_at)._run(plan, list(range(8)), 20, needed, reported.append)
        assert out.shape == (8,) and sum(reported) == 6 and all(n > 0 for n in reported)
        if fail_at == 0:  # batches of 20 tokens: items 0-1, 2-3 (prompts 1, 2, 5 done), 4-5, 6-7 (3, 4, then 0)
            assert reported == [1, 2, 2, 1]


def test_rows_scored_after_an_out_of_memory_are_cached_as_the_lower_budgets(job, tiny_pairrm_dir, tmp_path,
                                                                             monkeypatch):
    """The row cache keyed them on the budget the scorer started at: a later run at that budget, on a machine that
    had the memory, was served scores batched at the lower one (other float rounding) as its own."""
    from repro.scorers.pairrm import PairRM

    original = PairRM._forward

    def small_gpu(self, batch):
        if sum(p.length for p in batch) > 600:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return original(self, batch)

    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), chunk_size=5, device="cpu", progress=False, cache_dir=tmp_path / "c",
                  **LIMITS)
    with monkeypatch.context() as patch:
        patch.setattr(PairRM, "_forward", small_gpu)
        with pytest.warns(RuntimeWarning, match="out of memory"):
            lowered = run_scoring(prompts, candidates, work_dir=tmp_path / "w1", batch_tokens=2000, **common)
    used = lowered.info["batch_tokens_used"]
    assert len(used) == 1 and sum(used.values()) == len(prompts)  # every prompt at one lower budget
    budget = int(next(iter(used)))
    again = run_scoring(prompts, candidates, work_dir=tmp_path / "w2", batch_tokens=2000, **common)
    assert again.info["cache"]["rows_from_cache"] == 0  # scored at 2000 here, not served the lower budget's rows
    at_lower = run_scoring(prompts, candidates, work_dir=tmp_path / "w3", batch_tokens=budget, **common)
    assert at_lower.info["cache"]["rows_from_cache"] == len(prompts)  # the lower budget's own run is served them
    assert at_lower.scores == lowered.scores


def test_a_run_that_ran_out_of_memory_records_the_prompts_scored_at_each_budget(job, tiny_pairrm_dir, tmp_path,
                                                                                 monkeypatch):
    from repro.scorers.pairrm import PairRM

    original = PairRM._forward

    def small_gpu(self, batch):
        if sum(p.length for p in batch) > 600:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return original(self, batch)

    monkeypatch.setattr(PairRM, "_forward", small_gpu)
    prompts, candidates = job
    with pytest.warns(RuntimeWarning, match="out of memory"):
        info = run_scoring(prompts, candidates, model=str(tiny_pairrm_dir), work_dir=tmp_path / "w", batch_tokens=2000,
                           chunk_size=5, device="cpu", progress=False, **LIMITS).info
    used = info["batch_tokens_used"]
    assert sum(used.values()) == len(prompts) and min(map(int, used)) < 2000  # every prompt, at a lowered budget


def test_a_chunk_note_whose_budgets_are_not_numbers_leaves_its_prompts_budget_unknown(job, tiny_pairrm_dir, tmp_path):
    """A chunk's note naming a budget that is no number (a copied work dir, edited by hand) went into the manifest's
    `batch_tokens_used` as it was, where 03_card stopped with a bare ValueError (int("high")). Now its prompts are
    those of no known budget, as an older repro's chunks."""
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), work_dir=tmp_path / "w", batch_tokens=2000, chunk_size=4, device="cpu",
                  progress=False, **LIMITS)
    run_scoring(prompts, candidates, **common)
    (tmp_path / "w" / "note-000000.json").write_text(json.dumps({"rows_from_cache": 0, "made_with": {"high": 4}}))
    info = run_scoring(prompts, candidates, **common).info
    assert info["chunks_resumed"] == 4
    assert info["batch_tokens_used"] == {"2000": 12} and info["batch_tokens_unknown"] == 4


def test_a_resumed_run_records_the_budget_of_every_prompt_resumed_and_cached_too(job, tiny_pairrm_dir, tmp_path,
                                                                                  monkeypatch):
    """`batch_tokens_used` counted only the chunks scored in this call: a run stopped after a chunk scored at 2000
    and resumed on a machine short of memory recorded {'<low>': 12} of 16 prompts, and one lowered, stopped and
    resumed with memory enough recorded nothing (the card then gave one budget for every prompt). Each chunk's
    budgets are kept beside it in the work dir; rows from the row cache count at the budget of their namespace."""
    from repro.scorers.pairrm import PairRM

    forward, score, state = PairRM._forward, PairRM.score, {"calls": 0, "stop_at": None, "small": False}

    def device(self, batch):
        if state["small"] and sum(p.length for p in batch) > 600:
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return forward(self, batch)

    def stopping(self, *args, **kwargs):  # a chunk's call; the one at `stop_at` is interrupted
        state["calls"] += 1
        if state["calls"] == state["stop_at"]:
            raise KeyboardInterrupt
        return score(self, *args, **kwargs)

    monkeypatch.setattr(PairRM, "_forward", device)
    monkeypatch.setattr(PairRM, "score", stopping)
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), batch_tokens=2000, chunk_size=4, device="cpu", progress=False, **LIMITS)

    def scored(work, stop_at=None, small=False, **more):
        state.update(calls=0, stop_at=stop_at, small=small)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # (the out-of-memory's)
            if stop_at is None:
                return run_scoring(prompts, candidates, work_dir=work, **common, **more).info
            with pytest.raises(KeyboardInterrupt):
                run_scoring(prompts, candidates, work_dir=work, **common, **more)

    low = int(next(iter(scored(tmp_path / "all_low", small=True)["batch_tokens_used"])))
    assert low < 2000
    scored(tmp_path / "a", stop_at=2)  # chunk 0 at 2000, then stopped
    info = scored(tmp_path / "a", small=True)  # resumed short of memory
    assert info["chunks_resumed"] == 1 and info["batch_tokens_used"] == {"2000": 4, str(low): 12}
    assert "batch_tokens_unknown" not in info
    scored(tmp_path / "b", stop_at=3, small=True)  # chunks 0 and 1 at the lowered budget, then stopped
    info = scored(tmp_path / "b")  # resumed with memory enough
    assert info["chunks_resumed"] == 2 and info["batch_tokens_used"] == {str(low): 8, "2000": 8}
    # a work dir an older repro left (no record of its chunks' budgets): their prompts' budget is said not known
    scored(tmp_path / "old", stop_at=2)
    for note in (tmp_path / "old").glob("note-*.json"):
        note.unlink()
    info = scored(tmp_path / "old", small=True)
    assert info["batch_tokens_used"] == {str(low): 12} and info["batch_tokens_unknown"] == 4
    # rows from the row cache: the first chunk scored here (lowered), the rest from the lower budget's namespace
    scored(tmp_path / "fill", small=True, cache_dir=tmp_path / "cache")
    info = scored(tmp_path / "c", small=True, cache_dir=tmp_path / "cache")
    assert info["cache"]["rows_from_cache"] == 12 and info["batch_tokens_used"] == {str(low): 16}
