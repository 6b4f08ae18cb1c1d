"""Resumable chunked work: reuse, invalidation, shares of a multi-process job, progress output."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from repro.cache import RowCache
from repro.errors import DataError
from repro.jobs import (JOB_FILE, PROGRESS_LINES_ENV, Progress, WorkersFailed, chunk_path, chunk_share, collect_chunks,
                        finished_chunks, idle_processes, launch_torchrun, merge_stats, num_chunks, run_chunked,
                        run_chunked_with_stats, safe_chunks)


def _digest_all(texts: list[str]) -> list[str]:
    return [hashlib.sha256(t.encode()).hexdigest()[:12] for t in texts]


@pytest.fixture
def prompts(train_rows) -> list[str]:
    return [row["prompt"] for row in train_rows[:53]]


class CountingFn:
    """A chunk function that records which chunks it was asked to compute."""

    def __init__(self):
        self.calls: list[list[str]] = []

    def __call__(self, chunk: list[str]) -> list[str]:
        self.calls.append(chunk)
        return _digest_all(chunk)


def test_results_in_input_order_and_rerun_reuses_every_chunk(tmp_path, prompts):
    fn = CountingFn()
    first = run_chunked(prompts, fn, work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    assert first == _digest_all(prompts)
    assert [len(c) for c in fn.calls] == [10, 10, 10, 10, 10, 3]
    assert sorted(p.name for p in tmp_path.glob("chunk-*.json")) == [chunk_path(tmp_path, i).name for i in range(6)]

    again = CountingFn()
    stats = run_chunked_with_stats(prompts, again, work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    assert again.calls == []
    assert stats.results == first
    assert (stats.chunks_total, stats.chunks_resumed, stats.items_resumed) == (6, 6, len(prompts))


def test_missing_chunks_are_recomputed_and_only_they(tmp_path, prompts):
    run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    chunk_path(tmp_path, 2).unlink()
    chunk_path(tmp_path, 5).unlink()
    fn = CountingFn()
    out = run_chunked(prompts, fn, work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    assert fn.calls == [prompts[20:30], prompts[50:53]]
    assert out == _digest_all(prompts)


@pytest.mark.parametrize("change", ["fingerprint", "chunk_size", "items"])
def test_changed_work_never_mixes_with_old_chunks(tmp_path, prompts, change, capsys):
    run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    assert capsys.readouterr().err == ""
    fingerprint, chunk_size, items = {"job": "a"}, 10, prompts
    if change == "fingerprint":
        fingerprint = {"job": "b"}
    elif change == "chunk_size":
        chunk_size = 7
    else:
        items = prompts[:-1] + ["a different last prompt"]
    fn = CountingFn()
    out = run_chunked(items, fn, work_dir=tmp_path, fingerprint=fingerprint, chunk_size=chunk_size)
    assert sum(len(c) for c in fn.calls) == len(items)  # everything recomputed
    assert out == _digest_all(items)
    stale = list(tmp_path.glob("stale-*"))
    assert len(stale) == 1 and len(list(stale[0].glob("chunk-*.json"))) == 6
    differ = {"fingerprint": "job ('a' there, 'b' now)", "chunk_size": "chunk_size (10 there, 7 now)",
              "items": "the rows"}[change]  # the chunks were set aside without a word
    assert capsys.readouterr().err == (f"repro: 6 finished chunks in {tmp_path} were made with other settings: "
                                       f"{differ}; they are set aside in {stale[0]} (not reused).\n")


def test_chunks_set_aside_say_the_rows_the_row_cache_gives_back(tmp_path, prompts, capsys):
    # an interrupted run continued with a smaller limit: "2 finished chunks ... were made with other settings:
    # num_items (300 there, 64 now), the rows; they are set aside in ... (not reused)", then every row came back from
    # the row cache (rows_from_cache 64, rows_computed 0): the settings that decide a row had not changed
    cache = RowCache.open(tmp_path / "cache", "scores", {"job": "a"})
    run_chunked(prompts, CountingFn(), work_dir=tmp_path / "w", fingerprint={"job": "a"}, chunk_size=10, cache=cache)
    capsys.readouterr()
    fn, fewer = CountingFn(), prompts[:23] + ["a prompt never scored"]
    cache = RowCache.open(tmp_path / "cache", "scores", {"job": "a"})
    run = run_chunked_with_stats(fewer, fn, work_dir=tmp_path / "w", fingerprint={"job": "a"}, chunk_size=10,
                                 cache=cache)
    assert fn.calls == [["a prompt never scored"]] and run.results == _digest_all(fewer)
    assert (run.cache["rows_from_cache"], run.cache["rows_computed"]) == (23, 1)
    stale = next((tmp_path / "w").glob("stale-*"))
    assert capsys.readouterr().err == (
        f"repro: 6 finished chunks in {tmp_path / 'w'} were made with other settings: num_items (53 there, 24 now), "
        f"the rows; they are set aside in {stale} (not reused as chunks, but the settings that decide a row are the "
        f"same: the row cache in {tmp_path / 'cache'} gives back 23 of this run's 24 rows, not made again; the 1 row it "
        f"lacks is made).\n")
    # other settings that decide a row: the cache holds none of its rows, and nothing says it would give them back
    cache = RowCache.open(tmp_path / "cache", "scores", {"job": "b"})
    run = run_chunked_with_stats(fewer, CountingFn(), work_dir=tmp_path / "w", fingerprint={"job": "b"},
                                 chunk_size=10, cache=cache)
    (other,) = set((tmp_path / "w").glob("stale-*")) - {stale}
    assert run.cache["rows_from_cache"] == 0
    assert capsys.readouterr().err.endswith(f"job ('a' there, 'b' now); they are set aside in {other} (not reused).\n")
    # the same settings, but the run that made the chunks kept no rows in this row cache (cache: false, another one)
    run_chunked(prompts, CountingFn(), work_dir=tmp_path / "x", fingerprint={"job": "c"}, chunk_size=10)
    cache = RowCache.open(tmp_path / "cache", "scores", {"job": "c"})
    run = run_chunked_with_stats(fewer, CountingFn(), work_dir=tmp_path / "x", fingerprint={"job": "c"},
                                 chunk_size=10, cache=cache)
    assert run.cache["rows_computed"] == 24
    assert capsys.readouterr().err.endswith(f"(not reused: the row cache in {tmp_path / 'cache'} holds none of this "
                                            f"run's 24 rows).\n")


def test_chunks_of_other_code_say_who_made_them_not_code_null_there(tmp_path, prompts, capsys):
    # chunks an older repro made (its fingerprint holds no `code`), then upgraded: "were made with other settings: code
    # (null there, '7aaadc9d571f4cf6' now)"; of other code it said "code ('a' there, 'b' now)"
    scoring, generation = {"what": "pairrm-scores"}, {"stage": "generation", "batch_size": 2}
    steps = [(scoring, {**scoring, "code": "a"}, "by an older repro that did not record its code"),
             ({**scoring, "code": "a"}, {**scoring, "code": "b"}, "by other scoring code"),
             (generation, {**generation, "code": "c"}, "by an older repro that did not record its code"),
             ({**generation, "code": "c"}, {**generation, "batch_size": 4, "code": "d"},
              "by other generation code and with other settings: batch_size (2 there, 4 now)")]
    for n, (was, now, said) in enumerate(steps):
        run_chunked(prompts, CountingFn(), work_dir=tmp_path / str(n), fingerprint=was, chunk_size=10)
        run_chunked(prompts, CountingFn(), work_dir=tmp_path / str(n), fingerprint=now, chunk_size=10)
        err = capsys.readouterr().err
        assert f"repro: 6 finished chunks in {tmp_path / str(n)} were made {said}; they are set aside in " in err, err
        assert "null there" not in err


def test_a_row_cache_keys_rows_by_its_own_key_function_in_every_use(tmp_path, prompts, capsys):
    # the key of an item was given twice (run_job's cache_key and run_chunked_with_stats'); the cache now carries it:
    # rows numbered anew (generation's items: the row number is no part of the key) come back from the row cache,
    # and the notice of chunks set aside counts them by the same key
    items = [{"row": i, "text": t} for i, t in enumerate(prompts)]
    texts = lambda chunk: _digest_all([item["text"] for item in chunk])  # noqa: E731
    cache = RowCache.open(tmp_path / "cache", "scores", "ns", key_of=lambda item: item["text"])
    run_chunked(items, texts, work_dir=tmp_path / "w", fingerprint={"job": "a"}, chunk_size=10, cache=cache)
    capsys.readouterr()
    renumbered = [{**item, "row": item["row"] + 1000} for item in items[:24]]
    cache = RowCache.open(tmp_path / "cache", "scores", "ns", key_of=lambda item: item["text"])
    run = run_chunked_with_stats(renumbered, texts, work_dir=tmp_path / "w", fingerprint={"job": "a"},
                                 chunk_size=10, cache=cache)
    assert run.results == _digest_all(prompts[:24])
    assert (run.cache["rows_from_cache"], run.cache["rows_computed"]) == (24, 0)
    assert "the row cache in" in (err := capsys.readouterr().err) and "gives back 24 of this run's 24 rows" in err


@pytest.mark.parametrize("damage", [b"\xff\xfe{", b"[]"])
def test_a_fingerprint_file_not_utf8_or_no_mapping_is_damaged_too(tmp_path, prompts, capsys, damage):
    # --check said "set aside" of them, then the run stopped on a UnicodeDecodeError (a list: AttributeError)
    run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    (tmp_path / "fingerprint.json").write_bytes(damage)
    assert run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10) == \
        _digest_all(prompts)
    assert "its fingerprint.json is damaged" in capsys.readouterr().err


def test_a_damaged_fingerprint_file_sets_the_chunks_aside_saying_so(tmp_path, prompts, capsys):
    # a truncated fingerprint.json read as "made with other settings" (stale-None), which nothing had changed
    run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    (tmp_path / "fingerprint.json").write_text('{"dig')
    fn = CountingFn()
    assert run_chunked(prompts, fn, work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10) == _digest_all(prompts)
    assert sum(len(c) for c in fn.calls) == len(prompts)  # no telling what they were made with: made again
    assert capsys.readouterr().err == (f"repro: 6 finished chunks in {tmp_path} cannot be told to be this work's: "
                                       f"its fingerprint.json is damaged (not what repro writes); they are set aside "
                                       f"in {tmp_path / 'stale-damaged'} (not reused).\n")
    # one chunk: said in the singular ("1 finished chunk(s) ... they are" read like a form), here and when stopped
    run_chunked(prompts[:3], CountingFn(), work_dir=tmp_path / "one", fingerprint={"job": "a"}, chunk_size=10)
    run_chunked(prompts[:3], CountingFn(), work_dir=tmp_path / "one", fingerprint={"job": "b"}, chunk_size=10)
    stale = next((tmp_path / "one").glob("stale-*"))
    assert capsys.readouterr().err == (f"repro: 1 finished chunk in {tmp_path / 'one'} was made with other settings: "
                                       f"job ('a' there, 'b' now); it is set aside in {stale} (not reused).\n")
    assert safe_chunks(tmp_path / "one") == f"1 finished chunk (every stage's) is safe in {tmp_path / 'one'}"


def test_a_digest_that_is_a_path_is_a_damaged_fingerprint_and_moves_nothing_out_of_the_run(tmp_path, prompts,
                                                                                             capsys):
    # a copied run's work/scoring/fingerprint.json, digest "../../../../../outside" (and a folder stale-.. beside it):
    # the set-aside made <run>/../outside and moved the chunks and the fingerprint file there, out of the run
    work = tmp_path / "run" / "work" / "scoring"
    run_chunked(prompts, CountingFn(), work_dir=work, fingerprint={"job": "a"}, chunk_size=10)
    (work / "stale-..").mkdir()
    fingerprint = json.loads((work / "fingerprint.json").read_text())
    (work / "fingerprint.json").write_text(json.dumps({**fingerprint, "digest": "../../../../../outside"}))
    assert run_chunked(prompts, CountingFn(), work_dir=work, fingerprint={"job": "a"}, chunk_size=10) == \
        _digest_all(prompts)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert len(list((work / "stale-damaged").glob("chunk-*.json"))) == 6
    assert "its fingerprint.json is damaged (not what repro writes)" in capsys.readouterr().err
    # the re-check: a hex digest whose stale- folder is a link out of the run, an outside file of a chunk's name there
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "chunk-000000.json").write_text("precious")
    (work / "fingerprint.json").write_text(json.dumps({**fingerprint, "digest": "abcdef"}))
    (work / "stale-abcdef").symlink_to(outside)
    run_chunked(prompts, CountingFn(), work_dir=work, fingerprint={"job": "a"}, chunk_size=10)
    assert [p.name for p in outside.iterdir()] == ["chunk-000000.json"]
    assert (outside / "chunk-000000.json").read_text() == "precious"
    assert not (work / "stale-abcdef").is_symlink() and len(list((work / "stale-abcdef").glob("chunk-*.json"))) == 6


def test_shares_cover_the_chunks_once_and_merge_to_the_single_process_result(tmp_path, prompts):
    for n_chunks in (0, 1, 5, 6, 17):
        for world in (1, 2, 3, 8):
            shares = [chunk_share(n_chunks, r, world) for r in range(world)]
            assert [i for s in shares for i in s] == list(range(n_chunks))
            assert max(map(len, shares)) - min(map(len, shares)) <= 1
            # rank 0, whose bar a run shows, has work whenever any rank has (it showed "100 % (0/0)" and waited)
            assert len(shares[0]) == max(map(len, shares))

    fp = {"job": "shared"}
    n = num_chunks(len(prompts), 10)
    per_rank = []
    for rank in range(3):
        fn = CountingFn()
        part = run_chunked(prompts, fn, work_dir=tmp_path, fingerprint=fp, chunk_size=10, share=(rank, 3))
        share = chunk_share(n, rank, 3)
        lo, hi = share.start * 10, min(len(prompts), share.stop * 10)
        assert part == _digest_all(prompts[lo:hi])
        per_rank.append(part)
    assert collect_chunks(prompts, work_dir=tmp_path, fingerprint=fp, chunk_size=10) == _digest_all(prompts)
    assert sum(per_rank, []) == _digest_all(prompts)


def test_collect_chunks_refuses_missing_or_foreign_work(tmp_path, prompts):
    fp = {"job": "x"}
    run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint=fp, chunk_size=10, share=(0, 2))
    with pytest.raises(RuntimeError, match="chunk 3 is missing"):
        collect_chunks(prompts, work_dir=tmp_path, fingerprint=fp, chunk_size=10)
    with pytest.raises(RuntimeError, match="another fingerprint"):
        collect_chunks(prompts, work_dir=tmp_path, fingerprint={"job": "y"}, chunk_size=10)


def test_a_chunk_file_of_the_wrong_length_is_an_error_not_silently_used(tmp_path, prompts):
    run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    chunk_path(tmp_path, 1).write_text(json.dumps(["only one"]))
    with pytest.raises(DataError, match="chunk-000001.json holds 1 results, expected 10"):
        run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)
    chunk_path(tmp_path, 1).write_text('{"trunc')  # damaged on disk (chunks are written whole): the same advice
    with pytest.raises(DataError, match=r"chunk-000001.json is not JSON \(Unterminated string.*\); delete it to "
                                        r"recompute that chunk"):
        run_chunked(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": "a"}, chunk_size=10)


def test_fn_returning_the_wrong_count_is_reported(tmp_path, prompts):
    with pytest.raises(RuntimeError, match="chunk 0 returned 9 results for 10 items"):
        run_chunked(prompts, lambda chunk: chunk[:-1], work_dir=tmp_path, fingerprint={}, chunk_size=10)


def test_progress_lines_every_few_percent_not_every_update():
    stream = io.StringIO()
    bar = Progress(200, desc="scoring", unit="prompt", stream=stream, every_percent=5)
    assert bar.bar is False  # a StringIO is not a terminal
    for _ in range(200):
        bar.advance(1)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 20  # 5 %, 10 %, ..., 95 %, then the final line
    assert lines[0].startswith("scoring:   5% (10/200 prompts), ") and "ETA" in lines[0]
    assert lines[-1].startswith("scoring: 100% (200/200 prompts), ") and " in " in lines[-1]
    one = Progress(1, desc="scoring", unit="prompt", stream=stream)  # not "(1/1 prompts)"
    one.advance(1)
    one.close()
    assert stream.getvalue().splitlines()[-1].startswith("scoring: 100% (1/1 prompt), ")


def test_progress_counts_resumed_items_but_not_in_the_rate(tmp_path, prompts):
    def crash_at_chunk_3(chunk):
        if chunk == prompts[30:40]:
            raise KeyboardInterrupt
        return _digest_all(chunk)

    with pytest.raises(KeyboardInterrupt):
        run_chunked(prompts, crash_at_chunk_3, work_dir=tmp_path, fingerprint={"job": "p"}, chunk_size=10)
    stream = io.StringIO()
    bar = Progress(len(prompts), desc="work", stream=stream, every_percent=10)
    seen: list[int] = []

    def fn(chunk, advance):
        for _ in chunk:
            advance(1)
            seen.append(bar.done)
        return _digest_all(chunk)

    out = run_chunked(prompts, fn, work_dir=tmp_path, fingerprint={"job": "p"}, chunk_size=10, progress=bar,
                      fn_reports_progress=True)
    bar.close()
    assert out == _digest_all(prompts)
    assert seen == list(range(31, len(prompts) + 1))
    assert bar.skipped == 30 and bar.done == len(prompts)
    text = stream.getvalue()
    assert text.splitlines()[0] == f"work: 30/{len(prompts)} items resumed from earlier work"
    assert len(text.splitlines()) <= 2 + 10
    assert text.splitlines()[-1].startswith(f"work: 100% ({len(prompts)}/{len(prompts)} items, 30 resumed), ")
    # all resumed: no rate of nothing ("0.00 items/s" said the work was slow)
    stream = io.StringIO()
    with Progress(len(prompts), desc="work", stream=stream) as again:
        run_chunked(prompts, fn, work_dir=tmp_path, fingerprint={"job": "p"}, chunk_size=10, progress=again,
                    fn_reports_progress=True)
    assert stream.getvalue().splitlines()[-1].startswith(
        f"work: 100% ({len(prompts)}/{len(prompts)} items, {len(prompts)} resumed), in ")


def test_terminal_bar_shows_resumed_and_computed_items():
    stream = io.StringIO()
    bar = Progress(40, desc="scoring", unit="prompt", stream=stream, bar=True)
    bar.skip(30)
    for _ in range(10):
        bar.advance(1)
    bar.close()
    final = stream.getvalue().split("\r")[-1]
    assert "40/40" in final and "prompt/s" in final
    assert bar._tqdm.initial == 30  # resumed items stay out of tqdm's rate


def test_processes_that_get_no_chunk_are_said_with_the_chunk_size_that_gives_each_work():
    # part2_mini_1's generation on 8 GPUs: chunks per rank [1, 0, 1, 0, 0, 1, 0, 0], and nothing said
    assert [len(chunk_share(3, rank, 8)) for rank in range(8)] == [1, 0, 1, 0, 0, 1, 0, 0]
    assert idle_processes(5183, 2048, 8, "generation", "generation_chunk_size") == (
        "8 processes, 3 chunks of generation (5183 prompts, generation_chunk_size 2048): 5 would be idle, and one does "
        "2048 prompts where an even share is 648; set generation_chunk_size ≤ 740 for all to work (648: even shares).")
    assert num_chunks(5183, 740) == 8 and num_chunks(5183, 741) == 7  # the bound is exact
    # `repro score --num-processes 2` on the demo's 40 prompts: rank 1 did nothing
    assert idle_processes(40, 256, 2, "scoring") == (
        "2 processes, 1 chunk of scoring (40 prompts, chunk_size 256): 1 would be idle, and one does 40 prompts where "
        "an even share is 20; set chunk_size ≤ 39 for all to work (20: even shares).")
    assert idle_processes(3, 256, 8, "scoring") == ("8 processes, 1 chunk of scoring (3 prompts, chunk_size 256): 7 "
                                                    "would be idle: 3 prompts keep at most 3 busy; use 3 processes "
                                                    "or fewer.")
    assert idle_processes(5, 1, 8, "x") == ("8 processes, 5 chunks of x (5 prompts, chunk_size 1): 3 would be idle: "
                                            "5 prompts keep at most 5 busy; use 5 processes or fewer.")
    # every process gets a chunk (an uneven tail is not idleness), or there is nothing to do: nothing said
    assert idle_processes(40, 16, 3, "scoring") is None and idle_processes(40, 16, 1, "scoring") is None
    assert idle_processes(0, 16, 8, "scoring") is None


def test_failed_torchrun_workers_raise_a_clear_error_that_keeps_the_work(tmp_path, torchrun_processes):
    # the success path is covered by scoring's and generation's N-process tests; here a worker entry that fails
    (tmp_path / "chunk-000000.json").write_text("[1]")
    with pytest.raises(WorkersFailed, match=r"(?s)2 torchrun demo processes failed.*finished chunks are kept.*"
                                            r"no_such_entry"):
        launch_torchrun({"x": 1}, torchrun_processes, "repro.jobs:no_such_entry", work_dir=tmp_path, progress=False,
                        what="demo")
    assert (tmp_path / "chunk-000000.json").read_text() == "[1]"
    assert json.loads((tmp_path / JOB_FILE).read_text()) == {"x": 1}


def test_setup_runs_once_before_the_first_row_computed_and_its_time_is_not_the_bars(tmp_path, prompts, monkeypatch):
    # scoring loads its weights there: a model loading inside the first chunk had counted as scoring time in the
    # bar's rate and ETA (an 8B reward model: minutes), and a run with nothing to compute loads nothing
    clock = iter(range(0, 10_000, 1))
    monkeypatch.setattr("repro.jobs.time.monotonic", lambda: float(next(clock)))
    calls = []

    def setup():
        calls.append(1)
        for _ in range(100):  # 100 ticks of the fake clock
            next(clock)

    bar = Progress(len(prompts), desc="work", enabled=False)
    run = run_chunked_with_stats(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": 1}, chunk_size=10,
                                 progress=bar, setup=setup)
    assert calls == [1] and run.seconds < 100 and bar.elapsed < 100
    again = run_chunked_with_stats(prompts, CountingFn(), work_dir=tmp_path, fingerprint={"job": 1}, chunk_size=10,
                                   setup=setup)
    assert calls == [1] and again.chunks_resumed == again.chunks_total  # every chunk done: no setup


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # (gone between the look-up and the status)
        return False


def test_torchrun_workers_stop_when_the_process_that_launched_them_dies(tmp_path, torchrun_processes):
    # a kernel restarted in JupyterLab (SIGKILL), or a process killed: its workers went on to the end, on GPUs a
    # re-run would share
    launcher = (f"from repro.jobs import launch_torchrun; launch_torchrun({{'folder': {str(tmp_path)!r}}}, "
                f"{torchrun_processes}, 'killed_run:sleep_in_worker', work_dir={str(tmp_path)!r}, progress=False)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", launcher], env=env)
    try:
        deadline = time.monotonic() + 180
        while len(workers := [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]) < torchrun_processes:
            assert proc.poll() is None and time.monotonic() < deadline, "the workers never started"
            time.sleep(0.2)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60
        while alive := [pid for pid in workers if _running(pid)]:
            assert time.monotonic() < deadline, f"workers {alive} still run after the launching process died"
            time.sleep(0.2)
    finally:
        for pid in [int(p.name.split("-")[1]) for p in tmp_path.glob("worker-*")]:
            with contextlib.suppress(psutil.Error):
                psutil.Process(pid).kill()


class _Kernel:
    def __init__(self, allow_stdin):
        self._allow_stdin = allow_stdin


class _Shell:
    def __init__(self, allow_stdin):
        self.kernel = _Kernel(allow_stdin)


@pytest.mark.parametrize("allow_stdin", [True, False])
def test_a_widget_bar_only_in_a_live_notebook(monkeypatch, allow_stdin, capsys):
    """JupyterLab sends allow_stdin=True with each cell, papermill (nbclient) False: widget bar vs lines."""
    import sys

    import IPython
    from tqdm.notebook import tqdm as notebook_tqdm

    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell(allow_stdin))
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.delenv(PROGRESS_LINES_ENV, raising=False)
    shown = []  # (display or update, text) as IPython's display machinery receives them

    class Handle:
        def update(self, obj, raw):
            shown.append(("update", obj["text/plain"]))

    def display(obj, raw, display_id=None):
        assert raw and display_id is (None if allow_stdin else True)
        shown.append(("display", obj["text/plain"]))
        return Handle()

    monkeypatch.setattr(IPython.display, "display", display)
    bar = Progress(20, desc="scoring", unit="prompt")
    bar.skip(5)
    for _ in range(15):
        bar.advance(1)
    bar.close()
    assert sys.stderr.getvalue() == ""  # no stderr lines beside the widget or the updated output
    if allow_stdin:
        assert isinstance(bar._tqdm, notebook_tqdm) and bar._tqdm.n == 20 and bar._tqdm.initial == 5
        # the widget's text, which a saved notebook keeps, is its first ("0%"): the final line is shown under it
        assert len(shown) == 1 and shown[0][0] == "display"
        assert shown[0][1].startswith("scoring: 100% (20/20 prompts, 5 resumed), ") and " in " in shown[0][1]
    else:  # papermill: one output, updated in place, ending with the final line
        assert bar._tqdm is None
        assert [kind for kind, _ in shown] == ["display"] + ["update"] * (len(shown) - 1) and len(shown) > 2
        assert shown[-1][1].startswith("scoring: 100% (20/20 prompts, 5 resumed), ")


def test_progress_lines_for_a_terminal_that_streams_the_notebook(monkeypatch):
    """`repro run --log-output` streams stderr to the terminal: there the progress stays lines."""
    import sys

    import IPython

    monkeypatch.setattr(IPython, "get_ipython", lambda: _Shell(False))
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv(PROGRESS_LINES_ENV, "1")
    with Progress(10, desc="scoring", unit="prompt") as bar:
        bar.advance(10)
    assert sys.stderr.getvalue().splitlines()[-1].startswith("scoring: 100% (10/10 prompts)")


def test_finished_chunks_are_every_jobs_chunks_but_not_the_stale_ones(tmp_path):
    work = tmp_path / "stale-run" / "work"  # a run folder whose own name looks stale counts all the same
    for rel in ("scoring/chunk-000000.json", "scoring/chunk-000001.json", "generation/chunk-000000.json",
                "scoring/stale-abc/chunk-000000.json", "scoring/fingerprint.json"):
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text("[]")
    assert sorted(str(p.relative_to(work)) for p in finished_chunks(work)) == [
        "generation/chunk-000000.json", "scoring/chunk-000000.json", "scoring/chunk-000001.json"]


def test_merged_stats_add_counts_and_count_maps_of_every_process_and_keep_the_slowest_time():
    # rank 1 ran out of memory and finished at a lower budget: the merged record says so, not rank 0's alone
    ranks = [{"chunks_resumed": 1, "items_resumed": 4, "seconds": 2.0, "device": "cuda:0",
              "batch_tokens_used": {"16384": 8}},
             {"chunks_resumed": 0, "items_resumed": 0, "seconds": 5.0, "device": "cuda:1",
              "batch_tokens_used": {"16384": 2, "8192": 6}}]
    merged = merge_stats(ranks, summed=("batch_tokens_used",))
    assert merged["batch_tokens_used"] == {"16384": 10, "8192": 6}
    assert (merged["chunks_resumed"], merged["items_resumed"], merged["seconds"]) == (1, 4, 5.0)
    assert merged["processes"] == 2 and merged["devices"] == ["cuda:0", "cuda:1"]


def test_rows_from_the_row_cache_are_not_counted_in_the_rate(tmp_path, prompts, monkeypatch):
    # one scoring output showed "1.08 prompts/s" under the bar (rows from the row cache counted as computed) and
    # prompts_per_second 0.5 in the table beneath it (rows computed / time): the line now counts as the table does
    clock = [0.0]
    monkeypatch.setattr("repro.jobs.time.monotonic", lambda: clock[0])

    def fn(chunk, advance):
        for _ in chunk:
            clock[0] += 1.0  # a second a row computed
            advance(1)
        return _digest_all(chunk)

    cache = RowCache.open(tmp_path / "cache", "scores", "ns")
    run_chunked_with_stats(prompts[:30], fn, work_dir=tmp_path / "a", fingerprint={"job": 1}, chunk_size=10,
                           cache=cache, fn_reports_progress=True)
    stream = io.StringIO()
    bar = Progress(len(prompts), desc="scoring", unit="prompt", stream=stream, every_percent=50)
    run = run_chunked_with_stats(prompts, fn, work_dir=tmp_path / "b", fingerprint={"job": 1}, chunk_size=10,
                                 progress=bar, cache=RowCache.open(tmp_path / "cache", "scores", "ns"),
                                 fn_reports_progress=True)
    bar.close()
    assert (run.cache["rows_from_cache"], run.cache["rows_computed"], run.seconds) == (30, 23, 23.0)
    assert bar.rate == 23 / run.seconds  # as score_candidates' prompts_per_second: rows computed / time
    assert stream.getvalue().splitlines()[-1] == (f"scoring: 100% ({len(prompts)}/{len(prompts)} prompts, 30 from "
                                                  f"the row cache), 1.00 prompts/s, in 0m23s")


def test_rows_the_row_cache_gave_an_interrupted_call_are_counted_when_its_chunks_are_resumed(tmp_path, prompts):
    # after a resume, the rows the row cache gave the chunks an interrupted call finished were counted as made here
    # (`rows_from_cache` is this call's): each chunk's note now keeps them; a chunk whose note does not (an older
    # repro's) is counted as not known, not guessed
    run_chunked(prompts[:15], _digest_all, work_dir=tmp_path / "fill", fingerprint={"job": 1}, chunk_size=10,
                cache=RowCache.open(tmp_path / "cache", "scores", "ns"))
    calls = []

    def stops_at_the_second_call(chunk):
        calls.append(chunk)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return _digest_all(chunk)

    common = dict(work_dir=tmp_path / "a", fingerprint={"job": 1}, chunk_size=10)
    with pytest.raises(KeyboardInterrupt):  # chunk 0 all from the cache, chunk 1 half, then stopped in chunk 2
        run_chunked(prompts[:30], stops_at_the_second_call, cache=RowCache.open(tmp_path / "cache", "scores", "ns"),
                    **common)
    assert [len(c) for c in calls] == [5, 10]
    run = run_chunked_with_stats(prompts[:30], _digest_all, cache=RowCache.open(tmp_path / "cache", "scores", "ns"),
                                 **common)
    assert run.results == _digest_all(prompts[:30]) and run.items_resumed == 20
    assert (run.cache["rows_from_cache"], run.cache["rows_computed"], run.cache["resumed_from_cache"]) == (0, 10, 15)
    assert "resumed_unknown" not in run.cache
    # notes of an older repro (none): the 30 rows resumed are said to be of unknown origin
    for note in (tmp_path / "a").glob("note-*.json"):
        note.unlink()
    run = run_chunked_with_stats(prompts[:30], _digest_all, cache=RowCache.open(tmp_path / "cache", "scores", "ns"),
                                 **common)
    assert run.cache["resumed_unknown"] == 30 and "resumed_from_cache" not in run.cache
    # two processes' counts add up
    assert merge_stats([{"chunks_resumed": 0, "items_resumed": 0, "seconds": 1.0, "cache": c} for c in (
        {"rows_from_cache": 1, "resumed_from_cache": 2}, {"rows_from_cache": 0, "resumed_unknown": 4})])["cache"] == {
        "rows_from_cache": 1, "rows_computed": 0, "damaged_entries": 0, "resumed_from_cache": 2, "resumed_unknown": 4,
        "key_format": 1}
