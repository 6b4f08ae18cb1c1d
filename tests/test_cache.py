"""The row cache (repro.cache): content keys, exact values, damaged entries, key formats, concurrent writers; and
the scoring and generation stages served from it."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from repro import cache as cache_module
from repro.cache import FORMAT_FILE, KEY_FORMAT, CacheError, RowCache, cached_chunk_fn, check_format
from repro.construct import generation, scoring
from repro.construct.generation import generate_candidates
from repro.errors import ReproError
from repro.manifest import Manifest
from repro.parameters import GenerationParams
from repro.paths import RunDir
from scoring_defaults import run_scoring
from repro.scorers import pairrm
from repro.scorers.tiny_policy import build_tiny_policy

LIMITS = dict(source_maxlength=64, candidate_maxlength=32)
pytestmark = pytest.mark.usefixtures("one_torch_thread")



def test_a_value_comes_back_bit_for_bit_under_a_key_of_namespace_and_row(tmp_path):
    cache = RowCache.open(tmp_path, "scores", {"model": "m", "dtype": "fp32"})
    values = [0.1 + 0.2, -1e-300, 5e-324, 123456.78901234567, -0.0]
    key = cache.key(["a prompt", ["x", "y"]])
    assert cache.put(key, values) == values
    again = RowCache.open(tmp_path, "scores", {"model": "m", "dtype": "fp32"})
    got = again.get(again.key(["a prompt", ["x", "y"]]))
    assert np.array(got).tobytes() == np.array(values).tobytes()
    # the key changes with anything that decides the value: the namespace, the prompt, a candidate
    keys = {key, RowCache(tmp_path, "scores", {"model": "m", "dtype": "fp16"}).key(["a prompt", ["x", "y"]]),
            cache.key(["a prompt ", ["x", "y"]]), cache.key(["a prompt", ["x", "z"]]),
            RowCache(tmp_path, "generation", {"model": "m", "dtype": "fp32"}).key(["a prompt", ["x", "y"]])}
    assert len(keys) == 4  # the stage is a folder, not part of the key: the same namespace there is another folder
    assert RowCache(tmp_path, "generation", {"model": "m", "dtype": "fp32"}).folder != cache.folder
    assert json.loads((tmp_path / FORMAT_FILE).read_text()) == {"key_format": KEY_FORMAT}


def test_only_missing_rows_are_computed_in_one_call_and_counted(tmp_path):
    calls = []

    def square(items):
        calls.append(list(items))
        return [[float(x) ** 2] for x in items]

    cache = RowCache.open(tmp_path, "scores", "ns")
    fn = cached_chunk_fn(square, cache)
    assert fn([1, 2, 3]) == [[1.0], [4.0], [9.0]]
    assert fn([2, 5, 3, 6]) == [[4.0], [25.0], [9.0], [36.0]]
    assert calls == [[1, 2, 3], [5, 6]]
    assert cache.counts.as_dict() == {"rows_from_cache": 2, "rows_computed": 5, "damaged_entries": 0,
                                      "key_format": KEY_FORMAT}
    # progress: rows from the cache count as done at once, the computed ones by the function itself
    advanced = []
    fn2 = cached_chunk_fn(lambda items, advance: (advance(len(items)), [[0.0] for _ in items])[1],
                          RowCache.open(tmp_path, "other", "ns"), reports_progress=True)
    fn2([1, 2], advanced.append)
    fn2([1, 2, 3], advanced.append)
    assert advanced == [2, 2, 1]


@pytest.mark.parametrize("damage", ["flip a digit", "truncate", "another key"])
def test_a_damaged_entry_is_said_set_aside_and_recomputed(tmp_path, capsys, damage):
    cache = RowCache.open(tmp_path, "scores", "ns")
    fn = cached_chunk_fn(lambda items: [[0.25, -0.25] for _ in items], cache)
    fn(["row"])
    path = cache.path(cache.key("row"))
    text = path.read_text()
    path.write_text({"flip a digit": text.replace("0.25", "0.35", 1), "truncate": text[: len(text) // 2],
                     "another key": text.replace(cache.key("row"), "0" * 64)}[damage])
    fresh = RowCache.open(tmp_path, "scores", "ns")
    assert cached_chunk_fn(lambda items: [[0.25, -0.25] for _ in items], fresh)(["row"]) == [[0.25, -0.25]]
    assert (fresh.counts.damaged_entries, fresh.counts.rows_computed) == (1, 1)
    err = capsys.readouterr().err
    assert f"the scores entry {path.name} is damaged" in err and "computed again" in err
    # the row is batched with other rows than when it was first made: said where it happens, not only in the README
    assert "it may differ from its first computation in the last bits (float rounding follows the batch)" in err
    kept = list((tmp_path / "damaged").iterdir())  # nothing is deleted
    assert len(kept) == 1 and kept[0].read_text() != text
    assert json.loads(path.read_text())["value"] == [0.25, -0.25]


def test_a_cache_of_another_key_format_is_refused_before_any_work_and_left_as_it_is(tmp_path):
    (tmp_path / FORMAT_FILE).write_text(json.dumps({"key_format": KEY_FORMAT + 1}))
    (tmp_path / "scores").mkdir()
    with pytest.raises(CacheError, match=f"key format {KEY_FORMAT + 1}.*reads and writes key format {KEY_FORMAT}"):
        RowCache.open(tmp_path, "scores", "ns")
    assert json.loads((tmp_path / FORMAT_FILE).read_text()) == {"key_format": KEY_FORMAT + 1}
    (tmp_path / "file").write_text("x")
    with pytest.raises(ReproError, match="The row cache \\S+file is an existing file, not a folder"):
        check_format(tmp_path / "file")
    # a folder inside a file: it was a NotADirectoryError traceback
    with pytest.raises(ReproError, match="The row cache \\S+file/sub lies inside \\S+file, which is a file"):
        check_format(tmp_path / "file" / "sub")
    check_format(tmp_path / "new", create=False)  # (--check) nothing written
    assert not (tmp_path / "new").exists()


def _writer(args):
    root, worker = args
    cache = RowCache.open(root, "scores", "ns")
    # every writer computes "its own" value for the same rows: the first written wins for everyone
    return [cache.put(cache.key(i), [float(worker), float(i)]) for i in range(40)]


def test_concurrent_writers_agree_on_the_first_value_and_leave_no_temporary_files(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        results = pool.map(_writer, [(str(tmp_path), w) for w in range(8)])
    assert all(r == results[0] for r in results)
    cache = RowCache(tmp_path, "scores", "ns")
    assert [cache.get(cache.key(i)) for i in range(40)] == results[0]
    assert not list(tmp_path.rglob("*.tmp"))


def test_rows_another_process_computes_are_waited_for_until_it_stops_crashed_too(tmp_path):
    """A process killed while it computes rows (their lock held) holds up no one: the waiting one computes them."""
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.cache import RowCache; "
                               "c = RowCache.open(sys.argv[1], 'scores', 'ns'); "
                               "held = c.computing([c.key(i) for i in range(3)]); held.__enter__(); "
                               "print('held', flush=True); time.sleep(60)", str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    cache = RowCache(tmp_path, "scores", "ns")
    try:
        assert holder.stdout.readline().strip() == "held"
        with ThreadPoolExecutor(1) as pool:
            done = pool.submit(cached_chunk_fn(lambda items: [2 * i for i in items], cache), [0, 1, 2])
            for _ in range(600):
                if cache.waited or time.sleep(0.1):
                    break
            assert cache.waited and not done.done()
            holder.kill()
            assert done.result(timeout=60) == [0, 2, 4]
    finally:
        holder.kill()
        holder.wait()
    assert (cache.counts.rows_computed, cache.counts.rows_from_cache) == (3, 0)


def test_a_process_forked_while_rows_are_computed_holds_up_no_one_once_they_are_stored(tmp_path):
    """vLLM's engine, forked inside a chunk's lock, shared its open file: a run waiting for those rows waited for the
    engine's whole life (and a notebook that ran its cell again after a Ctrl-C waited for itself)."""
    cache, other, forked = RowCache(tmp_path, "scores", "ns"), RowCache(tmp_path, "scores", "ns"), []

    def compute(items):  # an engine started with the first chunk, which lives on after it
        forked.append(multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True))
        forked[0].start()
        for _ in range(300):  # the other run waits for these rows before they are stored
            if other.waited or time.sleep(0.1):
                break
        return [2 * i for i in items]

    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(cached_chunk_fn(compute, cache), [0, 1, 2])
            for _ in range(300):  # (the lock taken first by this one)
                if forked or time.sleep(0.1):
                    break
            waiting = pool.submit(cached_chunk_fn(lambda items: [-1] * len(items), other), [0, 1, 2])
            assert first.result(timeout=60) == [0, 2, 4] and forked[0].is_alive()
            assert waiting.result(timeout=30) == [0, 2, 4] and other.waited  # (read, not computed again)
    finally:
        for p in forked:
            p.kill()
    assert (other.counts.rows_computed, other.counts.rows_from_cache) == (0, 3)


# ------------------------------------------------------------------------------------------------
# the stages
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def job(train_rows):
    rows = train_rows[120:132]
    return [r["prompt"] for r in rows], [[r["chosen"][-1]["content"], r["rejected"][-1]["content"]] for r in rows]


def test_scoring_from_the_cache_gives_the_computing_runs_bytes_and_computes_nothing(job, tiny_pairrm_dir, tmp_path):
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), chunk_size=4, progress=False, cache_dir=tmp_path / "cache", **LIMITS)
    # "another member" scores rows 4..11 first, in its own chunks
    other = run_scoring(prompts[4:], candidates[4:], work_dir=tmp_path / "other", **common)
    assert other.info["cache"]["rows_computed"] == 8
    alone = run_scoring(prompts[4:], candidates[4:], model=str(tiny_pairrm_dir), chunk_size=4, progress=False,
                        work_dir=tmp_path / "alone", **LIMITS)
    assert "cache" not in alone.info and alone.scores == other.scores
    # a run of rows 0..11: the first chunk is computed, the two others come from the cache, exactly
    mixed = run_scoring(prompts, candidates, work_dir=tmp_path / "mixed", **common)
    assert (mixed.info["cache"]["rows_from_cache"], mixed.info["cache"]["rows_computed"]) == (8, 4)
    assert mixed.info["prompts_computed"] == 4  # the scorer's own count: rows from the cache are not computed
    assert np.array(mixed.scores[4:]).tobytes() == np.array(other.scores).tobytes()
    direct = run_scoring(prompts, candidates, model=str(tiny_pairrm_dir), chunk_size=4, progress=False,
                         work_dir=tmp_path / "direct", **LIMITS)
    assert mixed.scores[:4] == direct.scores[:4]  # the computed chunk was computed as a run alone computes it
    # everything is there now: a third run computes nothing and gets the same bytes
    again = run_scoring(prompts, candidates, work_dir=tmp_path / "again", **common)
    assert again.info["cache"]["rows_computed"] == 0 == again.info["prompts_computed"] and again.scores == mixed.scores
    # another scorer setting is another namespace: nothing shared
    other_dtype = run_scoring(prompts[:2], candidates[:2], work_dir=tmp_path / "bf", batch_tokens=4096,
                              **common)
    assert other_dtype.info["cache"]["rows_from_cache"] == 0


def test_generation_from_the_cache_computes_nothing_and_gives_the_same_rows(tmp_path, train_rows):
    policy = build_tiny_policy(tmp_path / "policy")
    rows = [{"prompt": r["prompt"], "prompt_id": r["prompt_id"]}
            for r in sorted(train_rows[:40], key=lambda r: len(r["prompt"]))[:6]]
    p = GenerationParams(policy_model=str(policy), max_new_tokens=8, reference_max_new_tokens=8, n_candidates=2,
                         temperature=0.8, generation_batch_size=4, generation_chunk_size=4, generation_device="cpu")
    cache = tmp_path / "cache"
    first = generate_candidates(rows[:4], p, tmp_path / "a", cache_dir=cache)
    manifest = Manifest(RunDir(tmp_path / "run"))
    manifest.start_run({}, ["01_construct"])
    both = generate_candidates(rows, p, tmp_path / "b", manifest=manifest, cache_dir=cache)
    entry = manifest.read()["generation"]["cache"]
    assert (entry["rows_from_cache"], entry["rows_computed"]) == (4, 2)
    assert both[:4] == first
    assert both == generate_candidates(rows, p, tmp_path / "c")  # as a run without the cache makes them
    # another seed is another namespace
    reseeded = GenerationParams(**{**p.model_dump(), "generation_seed": 1})
    manifest2 = Manifest(RunDir(tmp_path / "run2"))
    manifest2.start_run({}, ["01_construct"])
    generate_candidates(rows[:2], reseeded, tmp_path / "d", manifest=manifest2, cache_dir=cache)
    assert manifest2.read()["generation"]["cache"]["rows_computed"] == 2


def edited_copy(folder, module_file, old: str = "", new: str = ""):
    """A copy of a module of repro's in `folder`, `old` replaced by `new` once (the text must be there)."""
    text = Path(module_file).read_text(encoding="utf-8")
    assert old in text
    folder.mkdir(parents=True)
    copy = folder / Path(module_file).name
    copy.write_text(text.replace(old, new, 1), encoding="utf-8")
    return copy


def test_rows_made_by_other_scoring_or_generation_code_are_made_again_not_served(job, tiny_pairrm_dir, tmp_path,
                                                                                 monkeypatch, train_rows):
    # the key held repro's version (0.1.0), which does not move with the code: a fix to the scoring arithmetic,
    # pulled from git, was served the scores the code before it made; a docstring, comment or layout edit decides no
    # number and keeps the rows
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), chunk_size=4, progress=False, cache_dir=tmp_path / "cache", **LIMITS)
    docstring = pairrm.PairRM.__doc__.strip().splitlines()[0]
    edits = [("", "", 4), (docstring, docstring + " (edited)", 0), ("\nclass PairRM(", "\n# a note\nclass PairRM(", 0),
             ("\n\n\nclass PairRM(", "\n\nclass PairRM(", 0), ("\nclass PairRM(", "\nSOMETHING = 1\nclass PairRM(", 4)]
    for n, (old, new, computed) in enumerate(edits):
        code = (edited_copy(tmp_path / "code" / str(n), pairrm.__file__, old, new), Path(scoring.__file__))
        monkeypatch.setattr(scoring, "SCORING_CODE", code)
        again = run_scoring(prompts[:4], candidates[:4], work_dir=tmp_path / f"w{n}", **common)
        assert again.info["cache"]["rows_computed"] == computed, (old, new)

    policy = build_tiny_policy(tmp_path / "policy")
    rows = [{"prompt": r["prompt"], "prompt_id": r["prompt_id"]}
            for r in sorted(train_rows[:40], key=lambda r: len(r["prompt"]))[:2]]
    p = GenerationParams(policy_model=str(policy), max_new_tokens=4, reference_max_new_tokens=4, n_candidates=2,
                         generation_batch_size=2, generation_chunk_size=2, generation_device="cpu")
    computed = []
    policy_class = "\n@dataclass(frozen=True)\nclass Policy:"
    for n, edit in enumerate([("", ""), ("", ""), (policy_class, "\nX = 1" + policy_class)]):
        code = (edited_copy(tmp_path / "gen" / str(n), generation.__file__, *edit),)
        monkeypatch.setattr(generation, "GENERATION_CODE", code)
        manifest = Manifest(RunDir(tmp_path / f"run{n}"))
        manifest.start_run({}, ["01_construct"])
        generate_candidates(rows, p, tmp_path / f"g{n}", manifest=manifest, cache_dir=tmp_path / "cache")
        computed.append(manifest.read()["generation"]["cache"]["rows_computed"])
    assert computed == [2, 0, 2]


def test_a_resumed_stage_counts_the_rows_the_row_cache_gave_its_interrupted_call(job, tiny_pairrm_dir, tmp_path,
                                                                                 monkeypatch, train_rows):
    # scoring and generation interrupted after chunks the row cache served, then resumed: the manifest (and the card)
    # said 0 rows came from the row cache, counting only the resumed call's
    prompts, candidates = job
    common = dict(model=str(tiny_pairrm_dir), chunk_size=4, progress=False, cache_dir=tmp_path / "cache", **LIMITS)
    run_scoring(prompts[:6], candidates[:6], work_dir=tmp_path / "fill", **common)
    score, calls = pairrm.PairRM.score, []

    def stops_at_the_second_chunk(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return score(self, *args, **kwargs)

    monkeypatch.setattr(pairrm.PairRM, "score", stops_at_the_second_chunk)
    with pytest.raises(KeyboardInterrupt):  # chunk 0 from the cache, chunk 1 half (2 rows scored), then stopped
        run_scoring(prompts, candidates, work_dir=tmp_path / "a", **common)
    monkeypatch.setattr(pairrm.PairRM, "score", score)
    info = run_scoring(prompts, candidates, work_dir=tmp_path / "a", **common).info
    assert info["chunks_resumed"] == 2 and info["prompts_computed"] == 4
    assert (info["cache"]["rows_from_cache"], info["cache"]["resumed_from_cache"]) == (0, 6)
    # where it resumed, every prompt's budget is recorded (a record without: an older repro's, which kept its call's)
    assert info["batch_tokens_used"] == {str(info["batch_tokens"]): len(prompts)}

    policy = build_tiny_policy(tmp_path / "policy")
    rows = [{"prompt": r["prompt"], "prompt_id": r["prompt_id"]}
            for r in sorted(train_rows[:40], key=lambda r: len(r["prompt"]))[:6]]
    p = GenerationParams(policy_model=str(policy), max_new_tokens=8, reference_max_new_tokens=8, n_candidates=2,
                         temperature=0.8, generation_batch_size=2, generation_chunk_size=2, generation_device="cpu")
    kept = [item["row"] for item in generation._Plan([r["prompt"] for r in rows], p).kept]  # (longest first)
    generate_candidates([rows[i] for i in kept[:3]], p, tmp_path / "g_fill", cache_dir=tmp_path / "cache")
    chunk, calls = generation._generate_chunk, []

    def stops_at_the_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return chunk(*args, **kwargs)

    monkeypatch.setattr(generation, "_generate_chunk", stops_at_the_second)
    with pytest.raises(KeyboardInterrupt):  # chunk 0 from the cache, chunk 1 half (1 row made), then stopped
        generate_candidates(rows, p, tmp_path / "g", cache_dir=tmp_path / "cache")
    monkeypatch.setattr(generation, "_generate_chunk", chunk)
    manifest = Manifest(RunDir(tmp_path / "run"))
    manifest.start_run({}, ["01_construct"])
    generate_candidates(rows, p, tmp_path / "g", manifest=manifest, cache_dir=tmp_path / "cache")
    entry = manifest.read()["generation"]
    assert entry["prompts_resumed"] == 4 and entry["cache"]["resumed_from_cache"] == 3
    assert (entry["cache"]["rows_from_cache"], entry["cache"]["rows_computed"]) == (0, 2)


def test_two_runs_generating_the_same_rows_at_once_compute_them_once(tmp_path, train_rows, monkeypatch):
    """Family members that differ only in their scorer, run at once (--jobs 2, Slurm array tasks): the first to need
    a chunk's rows computes them, the other waits for it (saying so once) and reads them from the cache."""
    policy = build_tiny_policy(tmp_path / "policy")
    rows = [{"prompt": r["prompt"], "prompt_id": r["prompt_id"]}
            for r in sorted(train_rows[:40], key=lambda r: len(r["prompt"]))[:4]]
    p = GenerationParams(policy_model=str(policy), max_new_tokens=8, reference_max_new_tokens=8, n_candidates=2,
                         temperature=0.8, generation_batch_size=4, generation_chunk_size=4, generation_device="cpu")
    chunk, computing, said, waited = generation._generate_chunk, [], [], threading.Event()

    def in_step(*args, **kwargs):  # a member computing goes on once the other computes too, or waits for its rows
        computing.append(1)
        for _ in range(600):
            if len(computing) == 2 or waited.wait(0.1):
                break
        return chunk(*args, **kwargs)

    def member(name):
        manifest = Manifest(RunDir(tmp_path / name))
        manifest.start_run({}, ["01_construct"])
        out = generate_candidates(rows, p, tmp_path / name / "work", manifest=manifest, cache_dir=tmp_path / "cache")
        return out, manifest.read()["generation"]["cache"]

    monkeypatch.setattr(generation, "_generate_chunk", in_step)
    monkeypatch.setattr(cache_module, "notice", lambda text: (said.append(text), waited.set()))
    with ThreadPoolExecutor(2) as pool:
        (a, counts_a), (b, counts_b) = pool.map(member, ["a", "b"])
    assert a == b and len(computing) == 1
    assert sorted((c["rows_computed"], c["rows_from_cache"]) for c in (counts_a, counts_b)) == [(0, 4), (4, 0)]
    assert len(said) == 1 and "waits for" in said[0], said
