"""`repro score` on a tiny checkpoint, offline: rows kept in order with their fields, scores and ranks added."""

from __future__ import annotations

import json
import re
import shutil

import datasets
import numpy as np
import pyarrow as pa
import pytest
from huggingface_hub import DatasetCard

from repro import compare
from repro.analysis.report import analyze, load
from repro.card import gather_facts, write_card
from repro.cli import build_parser, main
from repro.cli.score import read_rows
from repro.construct.pairs import build_row
from repro.exporters import export_rows
from repro.dataset_io import write_split
from repro.errors import EXIT_BUSY, DataError
from repro.formats import to_trl
from repro.parameters import AnalyzeParams, CardParams, build
from repro.paths import SPLIT, STAND_IN_MARKER
from repro.scorers.common import ranks_from_scores
from repro.scorers.pairrm import PairRM
from repro.scorers.tiny import build_tiny_reward_model
from repro.subject import declared_scorer, declared_stand_ins, mark_scorer


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def sppo_rows(train_rows):
    """SPPO-style rows from real UltraFeedback: a prompt, its candidates (2 or 3), and extra fields."""
    rows = []
    for k, r in enumerate(train_rows[:12]):
        cands = [r["chosen"][1]["content"], r["rejected"][1]["content"]] + (["I am not sure."] if k % 3 == 0 else [])
        rows.append({"prompt": r["prompt"], "candidates": cands, "prompt_id": r["prompt_id"], "n": k})
    return rows


def test_score_writes_input_rows_plus_scores_and_ranks_in_order(tmp_path, tiny_pairrm_dir, sppo_rows, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", sppo_rows)
    out = tmp_path / "out" / "scored.jsonl"
    assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out),
                 "--device", "cpu", "--dtype", "fp32", "--source-maxlength", "64", "--candidate-maxlength", "32"]) == 0
    assert "STAND-IN" in capsys.readouterr().err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [{k: v for k, v in r.items() if k not in ("scores", "ranks")} for r in rows] == sppo_rows
    direct = PairRM.load(tiny_pairrm_dir, device="cpu", source_maxlength=64, candidate_maxlength=32).score(
        [r["prompt"] for r in sppo_rows], [r["candidates"] for r in sppo_rows])
    for row, want in zip(rows, direct):
        np.testing.assert_allclose(row["scores"], want, rtol=0, atol=1e-6)
        assert row["ranks"] == ranks_from_scores(row["scores"]).tolist()
        assert len(row["scores"]) == len(row["candidates"])


def test_reference_backend_gives_the_same_scores(tmp_path, tiny_pairrm_dir, sppo_rows):
    src = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:5])
    outputs = {}
    for backend in ("repro", "llm-blender"):
        out = tmp_path / f"{backend}.jsonl"
        assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out),
                     "--device", "cpu", "--backend", backend, "--source-maxlength", "64",
                     "--candidate-maxlength", "32"]) == 0
        outputs[backend] = [json.loads(line) for line in out.read_text().splitlines()]
    for a, b in zip(outputs["repro"], outputs["llm-blender"]):
        np.testing.assert_allclose(a["scores"], b["scores"], rtol=0, atol=1e-5)
        assert a["ranks"] == b["ranks"]


def test_bad_options_exit_2_with_the_option_named(tmp_path, tiny_pairrm_dir, capsys):
    src = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "p", "candidates": ["a", "b"]}])
    # (--dtype fp8, --device gpu0: argparse refuses them, test_an_option_is_read_by_the_schemas_rule_...)
    assert main(["score", "--model", str(tmp_path / "missing"), "--input", str(src),
                 "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(tmp_path / "nope.jsonl"),
                 "--output", str(tmp_path / "o.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_chat_template_file_scores_a_reward_model_that_has_none(tmp_path, sppo_rows, capsys):
    """`repro score --chat-template FILE`: a reward model without a chat template is refused until given one, a
    missing file is named, and the file's template gives the scores load_scorer gives with it."""
    from repro.scorers import load_scorer
    from repro.scorers.tiny import DEBERTA_CHAT_TEMPLATE, build_tiny_reward_model

    folder = build_tiny_reward_model(tmp_path / "bare", "deberta", chat_template=False)
    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:4]), tmp_path / "out.jsonl"
    args = ["score", "--model", str(folder), "--input", str(src), "--output", str(out), "--device", "cpu"]
    assert main(args) == 2
    assert "no chat template" in capsys.readouterr().err
    assert main([*args, "--chat-template", str(tmp_path / "missing.jinja")]) == 2
    assert f"--chat-template {tmp_path / 'missing.jinja'} does not exist" in capsys.readouterr().err
    assert not out.exists()
    (tmp_path / "turns.jinja").write_text(DEBERTA_CHAT_TEMPLATE, encoding="utf-8")
    assert main([*args, "--chat-template", str(tmp_path / "turns.jinja")]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    want = load_scorer(folder, device="cpu", chat_template=DEBERTA_CHAT_TEMPLATE).score(
        [r["prompt"] for r in sppo_rows[:4]], [r["candidates"] for r in sppo_rows[:4]])
    for row, expected in zip(rows, want):
        np.testing.assert_allclose(row["scores"], expected, rtol=0, atol=1e-6)


def test_an_interrupted_score_continues_where_it_stopped(tmp_path, tiny_pairrm_dir, sppo_rows, monkeypatch, capsys):
    """Ctrl-C said "run the same command again to continue", but without --work-dir the chunks were in a temporary
    folder, gone with the process: now they are kept beside the output until it is written."""
    from repro.cli import score

    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows), tmp_path / "scored.jsonl"
    argv = ["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out), "--device", "cpu",
            "--chunk-size", "4", "--source-maxlength", "64", "--candidate-maxlength", "32"]
    real, resumed = score.score_candidates, []

    def interrupted(*args, **kwargs):  # every chunk scored, then Ctrl-C before the output is written
        real(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(score, "score_candidates", interrupted)
    assert main(argv) == 130 and "run the same command again to continue" in capsys.readouterr().err
    assert not out.exists() and len(list((tmp_path / "scored.jsonl.work").glob("chunk-*.json"))) == 3
    monkeypatch.setattr(score, "score_candidates", lambda *a, **k: resumed.append(result := real(*a, **k)) or result)
    assert main(argv) == 0
    assert resumed[0].info["chunks_resumed"] == 3 and len(out.read_text().splitlines()) == len(sppo_rows)
    assert not (tmp_path / "scored.jsonl.work").exists()  # the output holds it all: nothing left beside it


def test_a_score_that_fails_before_any_chunk_leaves_no_work_folder_of_its_own(tmp_path, tiny_pairrm_dir, sppo_rows,
                                                                              capsys):
    """`repro score ... --output o4.jsonl --output-index 2` on PairRM erred cleanly but left o4.jsonl.work/ holding only
    its lock. Now it goes; a --work-dir is the user's and stays, and a work folder holding chunks is kept."""
    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:4]), tmp_path / "o4.jsonl"
    argv = ["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out), "--device", "cpu",
            "--output-index", "2"]
    own = tmp_path / "o4.jsonl.work"
    assert main(argv) == 2 and "output_index does not apply" in capsys.readouterr().err
    assert not own.exists()
    assert main([*argv, "--work-dir", str(tmp_path / "mine")]) == 2
    assert (tmp_path / "mine").is_dir() and not own.exists()
    own.mkdir()
    (own / "chunk-000000.json").write_text("[]")  # a run before this one's finished chunk: kept for the next
    assert main(argv) == 2 and (own / "chunk-000000.json").is_file()


def test_a_finished_score_removes_only_its_own_work_from_the_folder_beside_the_output(tmp_path, tiny_pairrm_dir,
                                                                                     sppo_rows):
    """A finished score removed the whole <output>.work/ folder: a folder of that name holding a file someone made, or
    a run `repro run --out` made there (the run writes beside a score's chunks), went with it (red before). It removes
    its own chunks, their notes, its fingerprint and lock now, and the folder only where nothing else is left."""
    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:4]), tmp_path / "scored.jsonl"
    argv = ["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out), "--device", "cpu",
            "--chunk-size", "2", "--source-maxlength", "64", "--candidate-maxlength", "32"]
    own = tmp_path / "scored.jsonl.work"
    (own / "dataset").mkdir(parents=True)
    (own / "notes.txt").write_text("mine")
    (own / "manifest.json").write_text('{"notebooks": ["01_construct"]}')
    (own / "dataset" / "README.md").write_text("a run's card")
    assert main(argv) == 0 and len(out.read_text().splitlines()) == 4
    assert sorted(str(p.relative_to(own)) for p in own.rglob("*")) == ["dataset", "dataset/README.md",
                                                                      "manifest.json", "notes.txt"]
    assert (own / "notes.txt").read_text() == "mine" and (own / "dataset" / "README.md").read_text() == "a run's card"
    out.unlink()
    for path in (own / "notes.txt", own / "manifest.json", own / "dataset" / "README.md", own / "dataset"):
        path.unlink() if path.is_file() else path.rmdir()
    assert main(argv) == 0 and not own.exists()  # (nothing but its own work: the folder goes too)


def test_a_second_score_of_the_same_output_is_busy_while_the_first_runs(tmp_path, tiny_pairrm_dir, sppo_rows, capsys):
    """Two `repro score` of one --output at once (a job submitted twice) both scored every row into one work folder,
    and both exited 0; now the second is refused as busy (exit 75) while the first holds it, as `repro run` is."""
    import subprocess
    import sys

    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows), tmp_path / "scored.jsonl"
    argv = ["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out), "--device", "cpu",
            "--source-maxlength", "64", "--candidate-maxlength", "32"]
    first = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.paths import RunDir; "
                              "RunDir(sys.argv[1]).hold('`repro score`'); print('held', flush=True); time.sleep(60)",
                              str(tmp_path / "scored.jsonl.work")], stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "held"
        assert main(argv) == EXIT_BUSY
        assert (f"--output {out}: `repro score` (pid {first.pid}, since " in (err := capsys.readouterr().err)
                and "is writing it now" in err and "wait for it to finish" in err)
        assert not out.exists()
    finally:
        first.kill()
        first.wait()
    assert main(argv) == 0 and len(out.read_text().splitlines()) == len(sppo_rows)  # once it has ended


def test_a_second_score_of_the_same_output_with_another_work_dir_is_busy(tmp_path, sppo_rows, capsys):
    """Two `repro score` of one --output with different --work-dir both scored and both wrote it (the second over the
    first, their markers' entries able to disagree); now the second is refused as busy (exit 75) while the first runs,
    as two of one work folder are."""
    import subprocess
    import sys

    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:3]), tmp_path / "scored.jsonl"
    argv = ["score", "--model", "builtin:tiny-pairrm", "--input", str(src), "--output", str(out), "--device", "cpu"]
    # the first: a real `repro score`, stopped where it scores (its locks taken) until the test ends it
    first = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.cli import main, score; "
                              "score.score_candidates = lambda *a, **k: print('scoring', flush=True) or "
                              "time.sleep(60); main(sys.argv[1:])", *argv, "--work-dir", str(tmp_path / "w1")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "scoring"
        assert main([*argv, "--work-dir", str(tmp_path / "w2")]) == EXIT_BUSY
        err = capsys.readouterr().err
        assert f"--output {out}: `repro score` (pid {first.pid}, since " in err and "wait for it to finish" in err
        assert not out.exists()
    finally:
        first.kill()
        first.wait()
    assert main([*argv, "--work-dir", str(tmp_path / "w2")]) == 0 and len(out.read_text().splitlines()) == 3
    assert {p.name for p in tmp_path.iterdir()} == {"in.jsonl", "scored.jsonl", STAND_IN_MARKER, "w1", "w2"}


def test_a_work_dir_whose_lock_is_a_link_out_of_it_is_refused_as_a_run_folder_is(tmp_path, sppo_rows, capsys):
    """`repro score --work-dir DIR` took its lock through DIR/.repro-run.lock, a link to a file elsewhere (a copied
    folder), writing over that file, where `repro run` refuses a run folder whose parts are links out of it."""
    src, out, work = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:3]), tmp_path / "scored.jsonl", tmp_path / "w"
    (elsewhere := tmp_path / "elsewhere.txt").write_text("someone else's file")
    work.mkdir()
    (work / ".repro-run.lock").symlink_to(elsewhere)
    argv = ["score", "--model", "builtin:tiny-pairrm", "--input", str(src), "--output", str(out), "--device", "cpu"]
    assert main([*argv, "--work-dir", str(work)]) == 2
    assert (f"--work-dir {work}: {work}'s .repro-run.lock is a link to {elsewhere}, out of it: a run removes and "
            f"writes files there, so it is refused, with --force too.") in capsys.readouterr().err
    assert elsewhere.read_text() == "someone else's file" and not out.exists()
    assert not (tmp_path / "scored.jsonl.work").exists()  # (refused before any lock was taken)


def test_chunks_of_other_settings_are_set_aside_with_a_line_saying_so(tmp_path, tiny_pairrm_dir, sppo_rows, capsys):
    """A re-run with another --batch-tokens moved the finished chunks to stale-<hash>/ and scored all again without a
    word: one line now says how many, which settings differ, and where they were kept."""
    src, work = write_jsonl(tmp_path / "in.jsonl", sppo_rows), tmp_path / "work"
    argv = ["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(tmp_path / "o.jsonl"),
            "--device", "cpu", "--chunk-size", "4", "--work-dir", str(work), "--force"]
    assert main(argv) == 0 and "set aside" not in capsys.readouterr().err
    assert main([*argv, "--batch-tokens", "4096"]) == 0
    err = capsys.readouterr().err
    stale = next(work.glob("stale-*"))
    assert re.search(rf"3 finished chunks in {work} were made with other settings: batch_tokens \(\d+ there, "
                     rf"4096 now\); they are set aside in {stale} \(not reused\)\.\n", err), err
    assert len(list(stale.glob("chunk-*.json"))) == 3


def test_a_parquet_input_is_scored_like_the_same_rows_in_jsonl(tmp_path, tiny_pairrm_dir, sppo_rows):
    """--input rows.parquet was read as jsonl: 'line 1 of …parquet is not UTF-8 text'. Its rows are scored now."""
    import datasets

    datasets.Dataset.from_list(sppo_rows[:5]).to_parquet(tmp_path / "in.parquet")
    outputs = []
    for src in (write_jsonl(tmp_path / "in.jsonl", sppo_rows[:5]), tmp_path / "in.parquet"):
        out = tmp_path / f"{src.suffix[1:]}.jsonl"
        assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out),
                     "--device", "cpu", "--source-maxlength", "64", "--candidate-maxlength", "32"]) == 0
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] and len(outputs[1].splitlines()) == 5
    # a column JSON has no type for (a timestamp) is kept as its text, not a TypeError once every row is scored
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(sppo_rows[:2]).append_column("made", pa.array([0, 1], pa.timestamp("s")))
    pq.write_table(table, tmp_path / "dated.parquet")
    assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(tmp_path / "dated.parquet"), "--output",
                 str(tmp_path / "dated.jsonl"), "--device", "cpu"]) == 0
    assert json.loads((tmp_path / "dated.jsonl").read_text().splitlines()[1])["made"] == "1970-01-01 00:00:01"


def test_a_dataset_folder_of_one_split_is_scored_like_its_parquet_file(tmp_path, tiny_pairrm_dir, sppo_rows):
    """A hub-layout folder (data/train-00000-of-00001.parquet) was refused: "give the path of a jsonl file in it"."""
    import datasets

    folder = tmp_path / "hub"
    write_split(datasets.Dataset.from_list(sppo_rows[:3]), folder, "train")
    datasets.Dataset.from_list(sppo_rows[:3]).save_to_disk(tmp_path / "saved")  # one Dataset: no split
    outputs = []
    for src in (folder, folder / "data" / "train-00000-of-00001.parquet", tmp_path / "saved"):
        out = tmp_path / f"{src.name}.jsonl"
        assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(out),
                     "--device", "cpu"]) == 0
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] == outputs[2] and len(outputs[0].splitlines()) == 3


def test_a_cut_conversation_is_one_warning_line_and_one_prompt_is_singular(tmp_path, capsys):
    """The cut was told as a raw RuntimeWarning with its source line, and the summary said '1 prompts scored'."""
    src, out = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "word " * 3000, "candidates": ["Yes."]}]), tmp_path / "o.jsonl"
    assert main(["score", "--model", "builtin:tiny-reward-llama", "--input", str(src), "--output", str(out),
                 "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^repro score: warning: reward model 'builtin:tiny-reward-llama': 1 row had a "
                     r"conversation longer than max_length=2048 tokens, "
                     r"cut to its first 2048 tokens \(candidates cut alike score alike\)\.$", err, flags=re.M), err
    assert "RuntimeWarning" not in err and "warnings.warn" not in err
    assert "repro score: 1 prompt scored with builtin:tiny-reward-llama" in err


def test_max_length_is_the_reward_models_limit(tmp_path, capsys):
    # the cut's message said "scorer option max_length", which repro score had no option for
    rows = [{"prompt": "word " * 40, "candidates": ["Yes."]}, {"prompt": "name " * 40, "candidates": ["No."]}]
    src, out = write_jsonl(tmp_path / "in.jsonl", rows), tmp_path / "o.jsonl"
    assert main(["score", "--model", "builtin:tiny-reward-llama", "--input", str(src), "--output", str(out),
                 "--device", "cpu", "--max-length", "16"]) == 0
    assert "2 rows had conversations longer than max_length=16 tokens, cut to their first 16 tokens" \
        in capsys.readouterr().err
    # beyond the positions the model has: said (DeBERTa reads further; 100000 was killed for memory)
    assert main(["score", "--model", "builtin:tiny-reward-deberta", "--input", str(src), "--output", str(out),
                 "--force", "--device", "cpu", "--max-length", "100000"]) == 0
    assert re.search(r"max_length=100000 is above the max_position_embeddings \(\d+\) of reward "
                     r"model 'builtin:tiny-reward-deberta'", capsys.readouterr().err)
    # absolute positions (GPT-2's) fail beyond them: refused before any work (it was an IndexError in the job)
    from transformers import AutoTokenizer, GPT2Config, GPT2ForSequenceClassification

    from repro.scorers.tiny import build_builtin
    tokenizer = AutoTokenizer.from_pretrained(build_builtin("builtin:tiny-reward-llama"))
    GPT2ForSequenceClassification(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=16, n_layer=1, n_head=2,
                                             num_labels=1, pad_token_id=tokenizer.pad_token_id)).save_pretrained(
        tmp_path / "gpt2")
    tokenizer.save_pretrained(tmp_path / "gpt2")
    assert main(["score", "--model", str(tmp_path / "gpt2"), "--input", str(src), "--output", str(out), "--force",
                 "--device", "cpu", "--max-length", "256"]) == 2
    assert "max_length=256 is above the max_position_embeddings (64) of reward model" in capsys.readouterr().err


def test_paths_from_the_home_folder_as_typed(tmp_path, monkeypatch, capsys):
    # `--output=~/s.jsonl` and a quoted '~/rows.jsonl': no shell expands the ~ there
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    home.mkdir()
    write_jsonl(home / "rows.jsonl", [{"prompt": "Name a prime.", "candidates": ["Seven.", "Eight."]}])
    assert main(["score", "--model", "builtin:tiny-pairrm", "--input", "~/rows.jsonl", "--output=~/s.jsonl",
                 "--device", "cpu"]) == 0, capsys.readouterr().err
    assert len((home / "s.jsonl").read_text().splitlines()) == 1 and not (tmp_path / "~").exists()


def test_nan_scores_are_refused_with_the_row_named_before_any_output(tmp_path, capsys):
    """A reward model whose head gives NaN (fp16/bf16 overflow) was written as `"scores": [NaN, NaN], "ranks": [1, 1]`
    (not JSON) with exit 0; now the first such row and its prompt are named, with what to try, and nothing is
    written."""
    from safetensors.torch import load_file, save_file

    from repro.scorers.tiny import build_tiny_reward_model

    folder = build_tiny_reward_model(tmp_path / "nan")
    weights = load_file(folder / "model.safetensors")
    weights["score.weight"][:] = float("nan")
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    src = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "Name a prime.", "candidates": ["Seven.", "Eight."]}] * 2)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--model", str(folder), "--input", str(src), "--output", str(out), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert re.search(r"row 1 of 2 \(prompt 'Name a prime\.'\): the scores contain NaN or infinity \(\[nan, nan\]\): "
                     r"the scorer failed on this row\..*fp32", err), err
    assert not out.exists()
    # an overflow to infinity is no score either (JSON has no Infinity)
    for bad in ([float("inf"), 1.0], [0.0, float("-inf")]):
        with pytest.raises(DataError, match=r"contain NaN or infinity"):
            ranks_from_scores(bad)


def test_every_layout_repro_writes_is_scored_on_every_candidate_it_holds(tmp_path, tiny_pairrm_dir, sppo_rows,
                                                                          capsys):
    """An RLHFlow output was refused ("'prompt' is list; expected a string") and SPPO's and Snorkel's were scored on
    their chosen/rejected pair alone; now each layout's every candidate is scored (SELM's rows hold only the pair),
    as the same texts are in `{"prompt", "candidates"}` rows."""
    from repro.construct.pairs import build_row
    from repro.exporters import export_rows

    rows = [r for r in sppo_rows if len(r["candidates"]) == 3][:3]
    scored = [build_row({"prompt_id": r["prompt_id"]}, r["prompt"], r["candidates"], [0.5, -1.0, 2.0],
                        messages="chosen", keep_all_candidates=True, pick=(2, 1)) for r in rows]
    args = ["--model", str(tiny_pairrm_dir), "--device", "cpu", "--source-maxlength", "64",
            "--candidate-maxlength", "32"]

    def score(src, said="(3 candidates a prompt)"):  # the summary line says what was scored
        out = tmp_path / f"{src.name}.scored.jsonl"
        assert main(["score", "--input", str(src), "--output", str(out), *args]) == 0
        assert f"-> {out} {said}" in capsys.readouterr().err
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]

    want = score(write_jsonl(tmp_path / "plain.jsonl", [{k: r[k] for k in ("prompt", "candidates")} for r in rows]))
    said = {"sppo": "generate_<i>", "snorkel": "all_generated_responses", "rlhflow": "responses"}
    for name in ("seed", "sppo", "snorkel", "rlhflow", "selm"):
        ds = export_rows(name, scored, [(2, 1)] * len(scored), keep_all_candidates=name == "seed")
        files = [write_jsonl(tmp_path / f"{name}.jsonl", ds.to_list()), tmp_path / f"{name}.parquet"]
        ds.to_parquet(files[1])
        # the pair is all a SELM row holds: its chosen and rejected answers
        texts = [[r["candidates"][2], r["candidates"][1]] for r in rows] if name == "selm" else \
            [w["candidates"] for w in want]
        for src in files:
            got = score(src, "(2 candidates a prompt: their chosen and rejected)" if name == "selm" else
                        f"(3 candidates a prompt, from {said[name]})" if name in said else "(3 candidates a prompt)")
            # the input rows, in order, + the texts scored; RLHFlow's prompt (a [user] message) as the text scored;
            # a pair's scores (SELM's) as its score_chosen / score_rejected too; the columns the new scores replace
            # (kept as input_<name>) aside: test_rows_that_list_every_candidate_get_their_pair_and_scores_...
            new = [{k for k in g if k.startswith("input_") or f"input_{k}" in g} | {"scores", "ranks"} for g in got]
            assert [{k: v for k, v in g.items() if k not in n} for g, n in zip(got, new)] == \
                [{k: v for k, v in (r | {"prompt": w["prompt"], "candidates": c} | (dict(zip(
                    ("score_chosen", "score_rejected"), g["scores"])) if name == "selm" else {})).items() if k not in n}
                 for r, w, c, g, n in zip(ds.to_list(), want, texts, got, new)], (name, src.suffix)
            assert bool(new[0] - {"scores", "ranks"}) == (name in ("seed", "sppo", "snorkel", "rlhflow"))
            if name != "selm":
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g["scores"], w["scores"], rtol=0, atol=1e-6)
                    assert g["ranks"] == w["ranks"]


def test_rows_of_another_layout_or_a_null_candidate_column_are_refused_not_scored_on_their_pair(tmp_path, sppo_rows):
    """Each row is read by its own layout: a file whose layout changes is refused naming the row (it scored the
    plain rows on the SPPO rows' pair alone, or said 'got [null, null, null]' of valid candidates); a row whose
    layout's candidate column is null is refused naming it (it was scored on its chosen/rejected pair)."""
    three, two = [r for r in sppo_rows if len(r["candidates"]) == 3][:2], [r for r in sppo_rows
                                                                          if len(r["candidates"]) == 2][:2]
    scored = [build_row({"prompt_id": r["prompt_id"]}, r["prompt"], r["candidates"], [2.0, -1.0, 0.5][:len(
        r["candidates"])], messages="chosen", keep_all_candidates=True, pick=(0, 1)) for r in three + two]
    plain = [{k: r[k] for k in ("prompt", "candidates")} for r in three + two]
    sppo = [*export_rows("sppo", scored[:2], [(0, 1)] * 2).to_list(), *export_rows("sppo", scored[2:], [(0, 1)] * 2)
            .to_list()]  # 3 generate_i columns, then 2
    assert [r["candidates"] for r in read_rows(write_jsonl(tmp_path / "ragged.jsonl", sppo))] == \
        [r["candidates"] for r in plain]
    # each layout by the name its recipe has in the README, not repro's code name ("sppo's layout", "seed's"); a
    # plain row and an H4 row by what they are (both were "the seed dataset's (in 'candidates')", an H4 row has none)
    sppo_in, plain_in = "SPPO's layout (candidates in 'generate_<i>')", "a row of prompt and candidates"
    h4 = [{"prompt": r["prompt"], "chosen": r["candidates"][0], "rejected": r["candidates"][1]} for r in plain]
    seed = export_rows("seed", scored, [(0, 1)] * 4, keep_all_candidates=True).to_list()
    h4_in, seed_in = "an H4 row (candidates: its chosen and rejected)", \
        "the seed dataset's layout (candidates in 'candidates')"
    for name, rows, first, third in (("plain_sppo", plain[:2] + sppo[2:], plain_in, sppo_in),
                                     ("sppo_plain", sppo[:2] + plain[2:], sppo_in, plain_in),
                                     ("h4_sppo", h4[:2] + sppo[2:], h4_in, sppo_in),
                                     ("sppo_seed", sppo[:2] + seed[2:], sppo_in, seed_in),
                                     # a row of neither was "a row of prompt and candidates" too
                                     ("sppo_half", sppo[:2] + [{"prompt": "a", "chosen": "x"}],
                                      sppo_in, "a row of neither 'candidates' nor 'chosen' and 'rejected'")):
        says = f"{third}, but line 1 holds {first}"
        with pytest.raises(DataError, match=rf"^line 3 of \S+ holds {re.escape(says)}: give a file of one layout"):
            read_rows(write_jsonl(tmp_path / f"{name}.jsonl", rows))
    for name, column, called in (("snorkel", "all_generated_responses", "Snorkel's"),
                                 ("rlhflow", "responses", "RLHFlow's"), ("seed", "candidates", "the seed dataset's")):
        rows = export_rows(name, scored, [(0, 1)] * 4, keep_all_candidates=True).to_list()
        rows[1][column] = None
        with pytest.raises(DataError, match=rf"line 2 of \S+: '{column}' is null; rows of {called} layout are scored "
                                            r"on their every candidate.*not compare with"):
            read_rows(write_jsonl(tmp_path / f"{name}.jsonl", rows))
    rows = [{**sppo[0], "generate_best": sppo[0]["generate_0"]}]  # a generate_ column not numbered
    with pytest.raises(DataError, match=r"line 1 of \S+ holds SPPO's columns, but not of their types \(ValueError: .*"
                                        r"give its every row the columns repro writes for SPPO's layout\."):
        read_rows(write_jsonl(tmp_path / "unnumbered.jsonl", rows))


def test_a_bad_row_is_counted_from_1_in_every_kind_of_input(tmp_path):
    """A parquet file's, a dataset folder's and a saved dataset's rows were numbered from 0 ('row 1' was the second
    row) where a jsonl file's lines count from 1; each says 'row 2' of the second row now, as a viewer numbers it."""
    import datasets

    rows = [{"prompt": "p", "candidates": ["a", "b"]}, {"prompt": None, "candidates": ["a", "b"]}]
    ds = datasets.Dataset.from_list(rows)
    ds.to_parquet(tmp_path / "in.parquet")
    write_split(ds, tmp_path / "hub", "train")
    ds.save_to_disk(tmp_path / "saved")
    for src, where in ((write_jsonl(tmp_path / "in.jsonl", rows), "line 2"), (tmp_path / "in.parquet", "row 2"),
                       (tmp_path / "hub", "row 2"), (tmp_path / "saved", "row 2")):
        with pytest.raises(DataError, match=rf"^{where} of \S+( \(split train\))?: 'prompt' is null; expected a "
                                            r"string\."):
            read_rows(src)


def test_a_null_candidate_of_a_layout_is_refused_naming_its_column_and_row(tmp_path):
    """An SPPO table whose `generate_1` was null in one row was refused as "'generate_<i>' must be a list of at least
    two strings …, or give 'chosen' and 'rejected'", naming no column (the row held both); now the column and the row
    are named, and a null text in Snorkel's or RLHFlow's list is counted in it."""
    import datasets

    scored = [build_row({"prompt_id": f"p{k}"}, f"Prompt {k}?", ["One.", "Two.", "Three."], [2.0, -1.0, 0.5],
                        messages="chosen", keep_all_candidates=True, pick=(0, 1)) for k in range(3)]
    rows = export_rows("sppo", scored, [(0, 1)] * 3).to_list()
    rows[1]["generate_1"] = None
    jsonl, parquet = write_jsonl(tmp_path / "sppo.jsonl", rows), tmp_path / "sppo.parquet"
    datasets.Dataset.from_list(rows).to_parquet(parquet)
    for src, where in ((jsonl, "line 2"), (parquet, "row 2")):
        with pytest.raises(DataError, match=rf"^{where} of \S+: 'generate_1' is null; rows of SPPO's layout are "
                                            r"scored on their every candidate: fill it in, or leave the row out\.$"):
            read_rows(src)
    rows[1]["generate_1"], rows[2]["generate_0"] = rows[0]["generate_1"], rows[2]["generate_0"][:1]  # no answer
    with pytest.raises(DataError, match=r"^line 3 of \S+: 'generate_0' is \[\{\"content\": \"Prompt 2\?\", \"role\": "
                                        r"\"user\"\}\], not a conversation with an assistant message's text; rows "
                                        r"of SPPO's layout"):
        read_rows(write_jsonl(tmp_path / "unanswered.jsonl", rows))
    for name, column, called in (("snorkel", "all_generated_responses", "Snorkel's"), ("rlhflow", "responses",
                                                                                        "RLHFlow's")):
        rows = export_rows(name, scored, [(0, 1)] * 3).to_list()
        rows[2][column][1] = None
        with pytest.raises(DataError, match=rf"^line 3 of \S+: candidate 2 of 3 in '{column}' is null; rows of "
                                            rf"{called} layout are scored on their every candidate"):
            read_rows(write_jsonl(tmp_path / f"{name}.jsonl", rows))


def test_a_score_list_that_does_not_fit_its_candidates_is_refused_naming_the_line(tmp_path):
    """A Snorkel row whose score list was one short or one too long was read without a word (one short whose pair
    sat past its end stopped on "not of their types (IndexError: list index out of range)"); it is refused now,
    naming the line, its prompt_id, the column and what to do, as seed_view does (tests/test_exporters.py)."""
    scored = [build_row({"prompt_id": f"p{k}"}, f"Prompt {k}?", ["One.", "Two.", "Three."], [2.0, -1.0, 0.5],
                        messages="chosen", keep_all_candidates=True, pick=(0, 1)) for k in range(3)]
    for scores, problem in (([2.0, -1.0], "holds 2 scores for 3 candidates"), ([2.0, -1.0, 0.5, 1.0], "holds 4")):
        rows = export_rows("snorkel", scored, [(0, 1)] * 3).to_list()
        rows[1]["all_rm_scores"] = scores
        with pytest.raises(DataError, match=rf"^line 2 of \S+, prompt_id 'p1': 'all_rm_scores' {problem}\b.*give each "
                                            r"candidate in 'all_generated_responses' one score"):
            read_rows(write_jsonl(tmp_path / "snorkel.jsonl", rows))


def test_batch_tokens_typed_as_a_whole_float_is_that_count(tmp_path, tiny_pairrm_dir, sppo_rows, capsys):
    """`--batch-tokens 2048.0` was "invalid int value", while a params file and the Python API take 2048.0."""
    src = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:2])
    argv = ["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--device", "cpu", "--force"]
    assert main([*argv, "--output", str(tmp_path / "a.jsonl"), "--batch-tokens", "2048.0"]) == 0
    assert main([*argv, "--output", str(tmp_path / "b.jsonl"), "--batch-tokens", "2048"]) == 0
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()
    with pytest.raises(SystemExit):
        main([*argv, "--output", str(tmp_path / "c.jsonl"), "--batch-tokens", "1.5"])
    assert ("argument --batch-tokens: Input should be a valid integer, unable to parse string as an integer (got "
            "'1.5').") in capsys.readouterr().err


def test_an_option_is_read_by_the_schemas_rule_where_it_enters_and_named(tmp_path, capsys):
    """`repro score --source-maxlength 2` was refused inside PairRM's load, naming a Python argument
    ("source_maxlength=2 (given) must be >= 3"), and `--dtype half` scored in fp16 while `--set dtype=half` was
    refused: each option is now read by the schema's rule (repro.parameters) as argparse reads it, and named."""
    src = write_jsonl(tmp_path / "in.jsonl", [{"prompt": "p", "candidates": ["a", "b"]}])
    argv = ["score", "--model", "builtin:tiny-pairrm", "--input", str(src), "--output", str(tmp_path / "out.jsonl")]
    for option, value, words in (("--source-maxlength", "2", "must be >= 3"),
                                 ("--candidate-maxlength", "long", "Input should be a valid integer"),
                                 ("--batch-tokens", "0", "must be >= 1"), ("--chunk-size", "0", "must be >= 1"),
                                 ("--num-processes", "0", "must be >= 1"), ("--max-length", "-5", "must be >= 1"),
                                 ("--output-index", "-1", "must be >= 0"),
                                 ("--device", "tpu", "must be one of auto, cpu, cuda, cuda:N or mps"),
                                 ("--dtype", "fp8", "Input should be 'auto', 'fp32', 'fp16' or 'bf16'")):
        with pytest.raises(SystemExit) as stopped:
            main([*argv, option, value])
        assert stopped.value.code == 2
        assert re.search(rf"repro score: error: argument {option}: {re.escape(words)}.* \(got {value!r}\)\.\n",
                         capsys.readouterr().err)
    assert list(tmp_path.iterdir()) == [src]  # refused before anything was written
    args = build_parser("score").parse_args([*argv, "--dtype", "half", "--device", " CUDA:1", "--chunk-size", "8.0"])
    assert (args.dtype, args.device, args.chunk_size) == ("fp16", "cuda:1", 8)


def test_trls_rows_are_scored_on_their_pair_and_02_analyze_reads_the_new_scores(tmp_path, tiny_pairrm_dir,
                                                                               train_rows, capsys):
    """TRL's conversational rows (to_trl's: `prompt` [user turn], `chosen` / `rejected` [assistant turn]) were refused
    ("'prompt' is list; expected a string (or, as in RLHFlow's rows, a conversation ...)"), its reward-modelling rows
    (strings and a `margin`) taken for RLHFlow's ("'responses' is missing"); an H4 row's new `scores` were written
    beside its GPT-4 `score_chosen` / `score_rejected`, which 02_analyze then read. Now each is scored on its pair,
    its `score_chosen` / `score_rejected` (`score_margin`) are the new scores, the input's kept as `input_<name>`."""
    h4 = [{k: r[k] for k in ("prompt", "prompt_id", "chosen", "rejected", "score_chosen", "score_rejected")}
          for r in train_rows[:3]]
    reward = [{"prompt": r["prompt"], "chosen": r["chosen"][-1]["content"], "rejected": r["rejected"][-1]["content"],
               "margin": 1.5} for r in h4]
    args = ["--model", str(tiny_pairrm_dir), "--device", "cpu", "--source-maxlength", "64",
            "--candidate-maxlength", "32"]

    def score(name, rows):
        out = tmp_path / f"{name}.scored.jsonl"
        assert main(["score", "--input", str(write_jsonl(tmp_path / f"{name}.jsonl", rows)), "--output", str(out),
                     *args]) == 0
        return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()], capsys.readouterr().err

    want, said = score("h4", h4)
    assert "their chosen and rejected" in said and "input_score_chosen" in said
    for got, row, pair in zip(want, h4, reward):
        assert got["candidates"] == [pair["chosen"], pair["rejected"]]
        assert [got["score_chosen"], got["score_rejected"]] == got["scores"]
        assert [got["input_score_chosen"], got["input_score_rejected"]] == [row["score_chosen"], row["score_rejected"]]
    data = load(AnalyzeParams(dataset=str(tmp_path / "h4.scored.jsonl"), run_dir=str(tmp_path / "run")))
    np.testing.assert_array_equal(data.score_chosen, [g["scores"][0] for g in want])
    for name, rows in (("trl", to_trl(datasets.Dataset.from_list(h4)).to_list()), ("reward", reward)):
        got, said = score(name, rows)
        assert "their chosen and rejected" in said and ("input_score_chosen" in said) == (name == "trl")
        for g, w, row in zip(got, want, rows):
            assert g["prompt"] == w["prompt"] and g["candidates"] == w["candidates"], name
            np.testing.assert_allclose(g["scores"], w["scores"], rtol=0, atol=1e-6)
            assert [g["score_chosen"], g["score_rejected"]] == g["scores"]
            # the input's fields kept (the prompt as its text); its own scores (to_trl's margin too) as input_<name>
            ours = ("score_chosen", "score_rejected", "score_margin")
            kept = {k: v for k, v in row.items() if k not in ("prompt", *ours)}
            assert {k: g[k] for k in kept} == kept and [g.get(f"input_{k}") for k in ours] == [row.get(k) for k in ours]
            assert g.get("score_margin") == (g["scores"][0] - g["scores"][1] if name == "trl" else None)


def test_rows_that_list_every_candidate_get_their_pair_and_scores_from_the_new_scores(tmp_path, tiny_pairrm_dir,
                                                                                   sppo_rows, capsys):
    """The seed's rows kept with every candidate (keep_all_candidates), Snorkel's and RLHFlow's were written with the
    new `scores` beside their old `candidate_scores` (`all_rm_scores`, `rewards`), chosen / rejected and their scores,
    which 02_analyze then read. Now those columns follow the new scores (chosen the best, rejected the worst, the
    card's tie rule; messages the new chosen conversation), the input's kept as `input_<name>`."""
    rows = [r for r in sppo_rows if len(r["candidates"]) == 3][:4]
    old = [[2.0, 0.5, -1.0], [-1.0, 2.0, 0.5], [0.5, -1.0, 2.0], [2.0, -1.0, 0.5]]
    built = [build_row({"prompt_id": r["prompt_id"], "reference_response": "Ref."}, r["prompt"], r["candidates"], s,
                       messages="chosen", keep_all_candidates=True) for r, s in zip(rows, old)]
    args = ["--model", str(tiny_pairrm_dir), "--device", "cpu", "--source-maxlength", "64", "--candidate-maxlength",
            "32"]
    listed = {"seed": "candidate_scores", "snorkel": "all_rm_scores", "rlhflow": "rewards"}
    changed = 0
    for name, column in listed.items():
        given = export_rows(name, built, [(s.index(max(s)), s.index(min(s))) for s in old],
                            keep_all_candidates=True).to_list()
        src, out = write_jsonl(tmp_path / f"{name}.jsonl", given), tmp_path / f"{name}.scored.jsonl"
        assert main(["score", "--input", str(src), "--output", str(out), *args]) == 0
        said = capsys.readouterr().err
        got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        for g, row, r in zip(got, given, rows):
            s = g["scores"]
            best, worst = s.index(max(s)), len(s) - 1 - s[::-1].index(min(s))  # first best, last worst
            text = {side: (r["candidates"][best], r["candidates"][worst])[k] for k, side in enumerate(("chosen",
                                                                                                       "rejected"))}
            as_given = {side: text[side] if isinstance(row[side], str) else
                        [{"content": r["prompt"], "role": "user"}, {"content": text[side], "role": "assistant"}]
                        for side in text}
            assert g[column] == s and {side: g[side] for side in text} == as_given, name
            assert g.get("score_chosen") == (s[best] if name == "seed" else None)
            assert g.get("margin") == (s[best] - s[worst] if name == "rlhflow" else None)
            if name == "seed":
                assert g["score_rejected"] == s[worst] and g["messages"] == g["chosen"]
                assert g["reference_response"] == "Ref." and g["prompt_id"] == row["prompt_id"]
            # the input's values of what changed, as input_<name>
            assert {k.removeprefix("input_"): v for k, v in g.items() if k.startswith("input_")} == \
                {k: row[k] for k in (column, "chosen", "rejected", "score_chosen", "score_rejected", "margin",
                                     "messages") if k in row}
            changed += g["chosen"] != row["chosen"]
        assert f"input_{column}" in said and "input_chosen" in said, name
        data = load(AnalyzeParams(dataset=str(out), run_dir=str(tmp_path / f"run_{name}")))
        np.testing.assert_array_equal(data.score_chosen, [max(g["scores"]) for g in got])
        np.testing.assert_array_equal(data.score_rejected, [min(g["scores"]) for g in got])
    assert changed  # (some pair is not the old one: the test tells the new from the old)


def test_sppos_rows_get_their_pair_scores_and_probabilities_from_the_new_scores(tmp_path, tiny_pairrm_dir, sppo_rows,
                                                                                 capsys):
    """SPPO's rows came back with the new `scores` beside their old `rm_scores`, `probability`, `chosen_probs*` and
    pair, which SPPO's trainer and 02_analyze read: the row said two things. Now these are computed from the new scores
    as the recipe computes them (exporters.sppo_columns), the input's kept as `input_<name>`; a row of SPPO's published
    layout, 7 scores for its 5 `generate_i` (two of texts not scored here), keeps them, and the run says so."""
    rows = [r for r in sppo_rows if len(r["candidates"]) == 3][:4]
    old = [[2.0, 0.5, -1.0], [-1.0, 2.0, 0.5], [0.5, -1.0, 2.0], [2.0, -1.0, 0.5]]
    built = [build_row({"prompt_id": r["prompt_id"]}, r["prompt"], r["candidates"], s, messages="chosen",
                       keep_all_candidates=True) for r, s in zip(rows, old)]
    given = export_rows("sppo", built, [(s.index(max(s)), s.index(min(s))) for s in old]).to_list()
    src, out = write_jsonl(tmp_path / "sppo.jsonl", given), tmp_path / "sppo.scored.jsonl"
    assert main(["score", "--input", str(src), "--output", str(out), "--model", str(tiny_pairrm_dir), "--device", "cpu",
                 "--source-maxlength", "64", "--candidate-maxlength", "32"]) == 0
    said = capsys.readouterr().err
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    derived = ("chosen", "rejected", "probability", "rm_scores", "chosen_probs", "chosen_probs_win",
               "chosen_probs_lose")
    for g, row, r in zip(got, given, rows):
        s = g["scores"]
        # the row 01_construct writes in SPPO's layout from these scores and the pair they pick
        pick = s.index(max(s)), len(s) - 1 - s[::-1].index(min(s))
        want = export_rows("sppo", [build_row({"prompt_id": r["prompt_id"]}, r["prompt"], r["candidates"], s,
                                              messages="chosen", keep_all_candidates=True, pick=pick)], [pick])[0]
        assert {k: g[k] for k in derived} == {k: want[k] for k in derived}
        assert {k: g[f"input_{k}"] for k in derived} == {k: row[k] for k in derived}
    assert "the input's are kept as input_" in said and "keep the input's" not in said
    np.testing.assert_array_equal(load(AnalyzeParams(dataset=str(out), run_dir=str(tmp_path / "run"))).score_chosen,
                                  [max(g["scores"]) for g in got])
    published = [{**row, "rm_scores": [9.0, -9.0, *row["rm_scores"]]} for row in given]  # SPPO's issue #27
    assert main(["score", "--input", str(write_jsonl(tmp_path / "seven.jsonl", published)), "--output",
                 str(tmp_path / "seven.scored.jsonl"), "--model", str(tiny_pairrm_dir), "--device", "cpu",
                 "--source-maxlength", "64", "--candidate-maxlength", "32"]) == 0
    assert "4 rows keep the input's rm_scores / probability / chosen_probs" in capsys.readouterr().err
    kept = [json.loads(line) for line in (tmp_path / "seven.scored.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [{k: v for k, v in g.items() if k not in ("candidates", "scores", "ranks")} for g in kept] == published


def test_repicked_rows_keep_their_conversation_and_rows_without_the_list_keep_their_pair(tmp_path, tiny_pairrm_dir,
                                                                                         sppo_rows, capsys):
    """RLHFlow's rows with a system turn came back with chosen / rejected as [user, assistant] (the system turn gone);
    the seed's rows with candidates but no candidate_scores had their pair picked again (docs/scoring.md re-picks only
    rows that list every candidate's score). Now only the last assistant turn's content changes, and rows without the
    list keep their chosen / rejected and scores."""
    rows = [r for r in sppo_rows if len(r["candidates"]) == 3][:4]
    system = {"role": "system", "content": "You are terse."}
    rlhflow = [{"prompt": [system, {"role": "user", "content": r["prompt"]}], "responses": r["candidates"],
                "rewards": [3.0, 1.0, -2.0], "margin": 5.0,
                **{side: [system, {"role": "user", "content": r["prompt"]},
                          {"role": "assistant", "content": r["candidates"][k]}]
                   for side, k in (("chosen", 0), ("rejected", 2))}} for r in rows]
    seed = [build_row({"prompt_id": r["prompt_id"], "reference_response": "Ref."}, r["prompt"], r["candidates"],
                      [2.0, 0.5, -1.0], messages="chosen", keep_all_candidates=True) for r in rows]
    seed = [{k: v for k, v in row.items() if k != "candidate_scores"} for row in seed]
    args = ["--model", str(tiny_pairrm_dir), "--device", "cpu", "--source-maxlength", "64", "--candidate-maxlength",
            "32"]
    got, said = {}, {}
    for name, given in (("rlhflow", rlhflow), ("seed", seed)):
        src, out = write_jsonl(tmp_path / f"{name}.jsonl", given), tmp_path / f"{name}.scored.jsonl"
        assert main(["score", "--input", str(src), "--output", str(out), *args]) == 0
        said[name] = capsys.readouterr().err
        got[name] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    for g, row, r in zip(got["rlhflow"], rlhflow, rows):
        s = g["scores"]
        best, worst = s.index(max(s)), len(s) - 1 - s[::-1].index(min(s))
        for side, k in (("chosen", best), ("rejected", worst)):
            assert g[side] == row[side][:-1] + [{"role": "assistant", "content": r["candidates"][k]}]
        assert g["input_chosen"] == row["chosen"] and g["rewards"] == s
    for g, row in zip(got["seed"], seed):
        assert {k: g[k] for k in row if k != "prompt"} == {k: v for k, v in row.items() if k != "prompt"}
        assert not [k for k in g if k.startswith("input_")] and len(g["scores"]) == 3
    # the kept pair's scores are not the new `scores`: 02_analyze checks no invariant across the two (it counted
    # "chosen is the best" of the given pair by the stand-in's scores: 0 of 30)
    assert "4 rows keep the input's score_chosen / score_rejected" in said["seed"] and "keep the input's" not in said["rlhflow"]
    metrics = analyze(build(AnalyzeParams, {"dataset": str(tmp_path / "seed.scored.jsonl"), "run_dir":
                                            str(tmp_path / "run"), "bootstrap_resamples": 100})).metrics
    assert metrics["invariants"]["candidate_scores"] is None, metrics["invariants"]


def score_h4(out, model, rows, *more):
    """`repro score` of H4 rows (their pair: two candidates each) into `out`; the rows it wrote."""
    out.parent.mkdir(parents=True, exist_ok=True)
    src = write_jsonl(out.parent / f"input-{out.stem}.jsonl", rows)
    assert main(["score", "--model", str(model), "--input", str(src), "--output", str(out), "--device", "cpu",
                 "--source-maxlength", "64", "--candidate-maxlength", "32", *more]) == 0
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def analysed_and_carded(dataset, run, known_recipe=None, split=SPLIT):
    """02_analyze's metrics and 03_card's two halves (English, Chinese) of `dataset` (its `split`) in run directory
    `run`."""
    metrics = analyze(build(AnalyzeParams, {"dataset": str(dataset), "run_dir": str(run), "dataset_split": split,
                                            "bootstrap_resamples": 100})).metrics
    params = build(CardParams, {"card_dataset": str(dataset), "run_dir": str(run), "known_recipe": known_recipe,
                                "card_split": split})
    text = DatasetCard.load(write_card(gather_facts(params))).text
    return metrics, text[:text.index("# 「")], text[text.index("# 「"):]


@pytest.fixture(scope="module")
def scored_h4(tmp_path_factory, tiny_pairrm_dir, train_rows):
    """Six H4 rows of the fixture (GPT-4 ratings as their scores) scored by `repro score` with the tiny stand-in: its
    folder, which each test copies, and the rows it wrote."""
    out = tmp_path_factory.mktemp("scored") / "h4.jsonl"
    return out.parent, score_h4(out, tiny_pairrm_dir, train_rows[:6])


def test_the_pairrm_checks_of_rows_repro_score_wrote_count_its_scores(tmp_path, scored_h4):
    """Rows `repro score` wrote give each candidate one score (`scores`), yet 02_analyze read none (`candidate_scores`
    null) and the card said antisymmetry and the zero sum were "not applicable: no row gives each of its candidates
    one score (`candidate_scores`)". Now both count them."""
    folder, rows = scored_h4
    metrics, en, zh = analysed_and_carded(shutil.copytree(folder, tmp_path / "scored") / "h4.jsonl", tmp_path / "run")
    best = sum(r["scores"][0] >= r["scores"][1] for r in rows)  # the pairs kept H4's chosen: these scores may not
    assert metrics["invariants"]["candidate_scores"] == {
        "rows": 6, "candidates_per_row": {"min": 2, "max": 2, "mean": 2.0}, "sum_to_zero_holds": 6,
        "sum_to_zero_atol": 1e-4, "two_candidate_rows": 6, "antisymmetry_holds_among_two_candidate_rows": 6,
        "chosen_is_best_and_rejected_is_worst": best}
    assert "- `score_chosen` = −`score_rejected` in rows with two candidates: holds in 6 of 6 rows." in en
    assert "- a row's candidate scores sum to 0: holds in 6 of 6 rows." in en
    assert f"- `chosen` is the best candidate and `rejected` the worst: holds in {best} of 6 rows." in en
    assert "- 两个候选的行中 `score_chosen` = −`score_rejected`：在 6 行中有 6 行成立。" in zh
    assert "- 每行候选得分之和为 0：在 6 行中有 6 行成立。" in zh
    assert "not applicable" not in en and "不适用" not in zh


def test_a_stand_ins_scores_are_marked_beside_them_and_02_analyze_and_03_card_say_so(tmp_path, tiny_pairrm_dir,
                                                                                       train_rows, capsys):
    """`repro score` with a stand-in said "a random STAND-IN" on stderr only: 02_analyze on its output wrote scorer
    null and scores_from_stand_in null, and 03_card had no stand-in banner nor tag. Now the repro_stand_in.json beside
    the output names the file and its scorer (as a run's manifest names it), and both read it."""
    out = tmp_path / "scored" / "h4.jsonl"
    score_h4(out, tiny_pairrm_dir, train_rows[:4])
    assert f"({STAND_IN_MARKER} beside it says so)" in capsys.readouterr().err
    marked = json.loads((out.parent / STAND_IN_MARKER).read_text())["files"]["h4.jsonl"]
    assert {k: marked[k] for k in ("model", "kind", "stand_in", "device", "dtype")} == {
        "model": str(tiny_pairrm_dir), "kind": "pairrm", "stand_in": True, "device": "cpu", "dtype": "fp32"}
    metrics, en, zh = analysed_and_carded(out, tmp_path / "run")
    assert metrics["scores_from_stand_in"] is True and metrics["scorer"]["model"] == str(tiny_pairrm_dir)
    assert (f"> **Stand-in scores.** `score_chosen` and `score_rejected` come from `{tiny_pairrm_dir.name}`, a "
            f"stand-in ranker that this project builds offline (PairRM's architecture, not its weights), as a marker "
            f"in its folder declares (`repro_stand_in.json`).") in en
    assert f"> **替身分数。** `score_chosen` 与 `score_rejected` 来自 `{tiny_pairrm_dir.name}`" in zh
    assert (f"| scorer model | `{tiny_pairrm_dir.name}` (a stand-in, not PairRM), recorded by `repro score` beside the "
            f"file |") in en
    assert f"| 评分模型 | `{tiny_pairrm_dir.name}`（替身评分器，并非 PairRM），由 `repro score` 记录在文件旁 |" in zh
    assert "stand-in-scores" in DatasetCard.load(tmp_path / "run" / "dataset" / "README.md").data.tags
    assert declared_stand_ins(str(out.parent / "input-h4.jsonl")) == {}  # the folder's other file is no stand-in's


def test_a_real_scorer_is_recorded_beside_repro_scores_output_and_02_analyze_and_03_card_read_it(
        tmp_path, tiny_pairrm_dir, scored_h4, train_rows, capsys):
    """A checkpoint that is no stand-in was recorded nowhere beside `repro score`'s output: 02_analyze wrote scorer null
    and its scale "as PairRM's are (no record names the scorer: read as PairRM's)", as did the card. Now the marker
    names every file's scorer (`stand_in` false for this one), which both read; scoring a stand-in's rows again with
    it takes the stand-in flag away."""
    out = shutil.copytree(scored_h4[0], tmp_path / "scored") / "h4.jsonl"  # a stand-in's, marked as one
    real = shutil.copytree(tiny_pairrm_dir, tmp_path / "no-stand-in", ignore=shutil.ignore_patterns(STAND_IN_MARKER))
    score_h4(out, real, train_rows[:6], "--force")
    assert "STAND-IN" not in capsys.readouterr().err
    marked = json.loads((out.parent / STAND_IN_MARKER).read_text())["files"]["h4.jsonl"]
    assert {k: marked[k] for k in ("model", "kind", "stand_in")} == {"model": str(real), "kind": "pairrm",
                                                                      "stand_in": False}
    assert declared_stand_ins(str(out)) == {} and declared_stand_ins(str(out.parent)) == {}
    metrics, en, zh = analysed_and_carded(out, tmp_path / "run")
    assert metrics["scorer"] == {"model": str(real), "kind": "pairrm", "stand_in": False, "declared": "marker"}
    assert metrics["scores_from_stand_in"] is False
    assert "These scores are real-valued logits, as PairRM's are: " in metrics["scale"]["sentence"]
    assert "as PairRM's logits are (" in en and "与 PairRM 的 logit 相同（" in zh
    assert "no record names the scorer" not in en + metrics["scale"]["sentence"] and "没有记录说明评分模型" not in zh
    assert "Stand-in scores" not in en and "stand-in-scores" not in DatasetCard.load(
        tmp_path / "run" / "dataset" / "README.md").data.tags
    assert "| scorer model | `no-stand-in` (PairRM), recorded by `repro score` beside the file |" in en
    assert "Studying PairRM as a judge" in en and "研究 PairRM 作为评判者" in zh


def test_the_card_of_rows_a_real_reward_model_scored_names_it_and_offers_them_for_training(tmp_path, train_rows):
    """03_card of rows that a real (no stand-in) reward model scored through `repro score`: its scale sentence read
    them as that reward model's logits, yet "What is known of its making" said "scorer model: unknown" and Typical uses
    "Not recommended for training as it stands: what scored these pairs is not known to this card". Now the table
    shows the scorer `repro score` recorded beside the file, and the uses are those of preference pairs."""
    model = build_tiny_reward_model(tmp_path / "rm", "llama")
    (model / STAND_IN_MARKER).unlink()  # a checkpoint of no stand-in
    out = tmp_path / "scored" / "h4.jsonl"
    out.parent.mkdir()
    src = write_jsonl(tmp_path / "input.jsonl", train_rows[:6])
    assert main(["score", "--model", str(model), "--input", str(src), "--output", str(out), "--device", "cpu"]) == 0
    metrics, en, zh = analysed_and_carded(out, tmp_path / "run")
    assert metrics["scorer"] == {"model": str(model), "kind": "sequence_classifier", "stand_in": False,
                                 "declared": "marker"}
    assert "as a reward model's logits are (" in en and "与奖励模型的 logit 相同（" in zh
    assert "| scorer model | `rm` (sequence classifier), recorded by `repro score` beside the file |" in en
    assert "| 评分模型 | `rm`（序列分类器），由 `repro score` 记录在文件旁 |" in zh
    assert ("what is known of its making comes only from the `known_recipe` parameter and from the scorer that `repro "
            "score` recorded beside the file, and everything else") in en
    assert "只采用 `known_recipe` 参数给出的信息，以及 `repro score` 在文件旁记录的评分模型，其余一律标为未知" in zh
    uses, uses_zh = en.split("## Typical uses")[1], zh.split("## 常用场景")[1]
    assert "- Offline preference optimisation (DPO and its variants)" in uses and "not known to this card" not in uses
    assert "离线偏好优化（DPO 及其变体）" in uses_zh and "本卡片不知道这些偏好对由什么评分" not in uses_zh
    assert "stand-in" not in en.lower() and "替身" not in zh and "PairRM as a judge" not in uses


@pytest.fixture(scope="module")
def scored_by_rm(tmp_path_factory, train_rows):
    """Eight H4 rows that a tiny real (no stand-in) reward model scored through `repro score` into a folder of their
    own (its input elsewhere), which each test copies; and the model."""
    base = tmp_path_factory.mktemp("rm")
    model = build_tiny_reward_model(base / "rm", "llama")
    (model / STAND_IN_MARKER).unlink()  # a checkpoint of no stand-in
    src = write_jsonl(base / "pairs.jsonl", train_rows[:8])
    out = base / "real_out" / "scored.jsonl"
    assert main(["score", "--model", str(model), "--input", str(src), "--output", str(out), "--device", "cpu"]) == 0
    return out.parent, model


def test_a_marker_entry_for_a_file_since_deleted_is_ignored_and_dropped(tmp_path, scored_by_rm):
    """A stand-in's trial output, deleted from a folder whose one file a real reward model scored, kept its entry in
    repro_stand_in.json: the folder was declared a stand-in's (its scores noise) and the entry was never removed. Now
    entries for files no longer there are ignored when the marker is read, and dropped when it is written."""
    folder = shutil.copytree(scored_by_rm[0], tmp_path / "real_out")
    (trial := folder / "trial.jsonl").write_text((folder / "scored.jsonl").read_text())
    mark_scorer(trial, {"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    assert declared_stand_ins(str(trial))["scorer"]["stand_in"] is True  # while the trial is there
    trial.unlink()
    assert declared_stand_ins(str(folder)) == {}
    recorded = json.loads((folder / STAND_IN_MARKER).read_text())["files"]
    assert set(recorded) == {"scored.jsonl", "trial.jsonl"}
    mark_scorer(folder / "scored.jsonl", recorded["scored.jsonl"])  # written again (repro score --force)
    assert json.loads((folder / STAND_IN_MARKER).read_text())["files"] == {"scored.jsonl": recorded["scored.jsonl"]}


def test_an_output_beside_a_damaged_marker_is_refused_before_scoring(tmp_path, sppo_rows, capsys):
    """repro_stand_in.json, read without a shape, was written over where damaged (the other files' entries lost). Read
    in its shape now, an --output beside a damaged one is refused before any scoring (not once its rows are scored),
    naming the marker and the place in it, saying what to do; nothing is written."""
    src, out = write_jsonl(tmp_path / "in.jsonl", sppo_rows[:3]), tmp_path / "scored.jsonl"
    (marker := tmp_path / STAND_IN_MARKER).write_text('{"files": {"other.jsonl": {"stand_in": "no"}}}')
    assert main(["score", "--model", "builtin:tiny-pairrm", "--input", str(src), "--output", str(out),
                 "--device", "cpu"]) == 2
    assert capsys.readouterr().err == (
        f'repro score: error: {marker} holds "no" as its files["other.jsonl"]["stand_in"] where true or false belongs, '
        f"not what `repro score` writes: delete it and score its files again (`repro score --force`), else a card "
        f"names no scorer of them.\n")
    assert not out.exists() and marker.read_text() == '{"files": {"other.jsonl": {"stand_in": "no"}}}'


def test_the_folder_of_rows_one_real_scorer_scored_is_read_as_that_scorers(tmp_path, scored_by_rm):
    """Given the folder that holds `repro score`'s output (not the file), 02_analyze wrote scorer null and its scale
    "as PairRM's are (no record names the scorer: read as PairRM's)", the card "These scores break PairRM's sign order
    in 8 of 8 rows", and compare took PairRM to have maybe scored them. Now a folder whose data files one recorded
    scorer scored reads as that scorer, as the file does."""
    folder = shutil.copytree(scored_by_rm[0], tmp_path / "real_out")
    real = {"model": str(scored_by_rm[1]), "kind": "sequence_classifier", "stand_in": False, "declared": "marker"}
    assert declared_scorer(str(folder)) == declared_scorer(str(folder / "scored.jsonl")) == real
    metrics, en, zh = analysed_and_carded(folder, tmp_path / "run", split="train")
    assert metrics["scorer"] == real and metrics["scores_from_stand_in"] is False
    assert "as a reward model's logits are (" in en and "与奖励模型的 logit 相同（" in zh
    assert "sign order in" not in en and "违反 PairRM 的符号顺序" not in zh and "no record names" not in en
    assert "| scorer model | `rm` (sequence classifier), recorded by `repro score` beside the file |" in en
    side = compare.Side("candidate", [str(folder)], "train", pa.table({}), np.zeros(0, int))
    assert not compare.pairrm_may_have_scored(side, None)  # a reward model's, as recorded


def test_a_folder_of_rows_different_scorers_scored_is_refused_naming_them(tmp_path, scored_by_rm):
    """A folder of two files `repro score` wrote with different scorers (a real reward model's, a stand-in's) was read
    as a stand-in's (where both were real: as no one's, read as PairRM's), its scores as one scorer's. Now 02_analyze
    and 03_card refuse it, naming each scorer and a file of it, and say to give one file."""
    folder = shutil.copytree(scored_by_rm[0], tmp_path / "real_out")
    (folder / "other.jsonl").write_text((folder / "scored.jsonl").read_text())
    mark_scorer(folder / "other.jsonl", {"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    said = (rf"{re.escape(str(folder))} holds files `repro score` scored with different scorers \(other.jsonl: "
            rf"builtin:tiny-pairrm, a stand-in; scored.jsonl: {re.escape(str(scored_by_rm[1]))}\).*Give one of them")
    with pytest.raises(DataError, match=said):
        analyze(build(AnalyzeParams, {"dataset": str(folder), "dataset_split": "train",
                                      "run_dir": str(tmp_path / "run")}))
    with pytest.raises(DataError, match=said):
        gather_facts(build(CardParams, {"card_dataset": str(folder), "card_split": "train",
                                        "run_dir": str(tmp_path / "card")}))


def test_a_folders_split_is_read_as_the_scorer_of_its_own_files(tmp_path, scored_by_rm, train_rows):
    """A folder holding the scored split beside an unscored test split read as no one's (as PairRM's), and beside a
    split another scorer scored was refused, though only one split is read. Now only the read split's files count."""
    folder = shutil.copytree(scored_by_rm[0], tmp_path / "real_out")
    real = {"model": str(scored_by_rm[1]), "kind": "sequence_classifier", "stand_in": False, "declared": "marker"}
    (folder / "scored.jsonl").rename(folder / "train.jsonl")  # (train.jsonl and test.jsonl: datasets' two splits)
    mark_scorer(folder / "train.jsonl", {k: v for k, v in real.items() if k != "declared"})
    write_jsonl(folder / "test.jsonl", train_rows[8:11])
    assert declared_scorer(str(folder), "train") == real and declared_scorer(str(folder), "test") is None
    mark_scorer(folder / "test.jsonl", {"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    assert declared_scorer(str(folder), "train") == real
    assert declared_scorer(str(folder), "test")["model"] == "builtin:tiny-pairrm"


def test_a_split_read_by_its_files_own_name_is_read_as_the_scorer_of_that_file(tmp_path, scored_by_rm, train_rows):
    """train_prefs.jsonl (a real reward model's, through `repro score`) beside test_prefs.jsonl: split train_prefs,
    read from train_prefs.jsonl alone, was looked up by datasets' split names (which call it "train"), so its scorer
    came out unknown beside an unscored test_prefs.jsonl (the card: "These scores break PairRM's sign order in 8 of 8
    rows") and refused as "different scorers" beside a stand-in's. Now the split's scorer is that of the files the
    loader reads for it."""
    folder = shutil.copytree(scored_by_rm[0], tmp_path / "real_out")
    real = {"model": str(scored_by_rm[1]), "kind": "sequence_classifier", "stand_in": False, "declared": "marker"}
    (folder / "scored.jsonl").rename(folder / "train_prefs.jsonl")
    mark_scorer(folder / "train_prefs.jsonl", {k: v for k, v in real.items() if k != "declared"})
    write_jsonl(folder / "test_prefs.jsonl", train_rows[8:11])
    assert declared_scorer(str(folder), "train_prefs") == real and declared_scorer(str(folder), "test_prefs") is None
    metrics, en, zh = analysed_and_carded(folder, tmp_path / "run", split="train_prefs")
    assert metrics["scorer"] == real
    assert "| scorer model | `rm` (sequence classifier), recorded by `repro score` beside the file |" in en
    assert "sign order in" not in en and "违反 PairRM 的符号顺序" not in zh
    mark_scorer(folder / "test_prefs.jsonl", {"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    assert declared_scorer(str(folder), "train_prefs") == real and declared_stand_ins(str(folder), "train_prefs") == {}
    assert declared_scorer(str(folder), "test_prefs")["model"] == "builtin:tiny-pairrm"


def test_the_scorer_repro_score_recorded_is_named_over_the_one_known_recipe_names(tmp_path, train_rows):
    """known_recipe naming GPT-4 hid the reward model that `repro score` recorded beside the file and that made
    score_chosen: the table said GPT-4, the recorded model appeared nowhere, while the banner said facts come from the
    scorer recorded beside the file, and the limitations "only those given in `known_recipe`". Now the table names the
    recorded scorer, a sentence says known_recipe names another, and the limitation names the record too."""
    model = build_tiny_reward_model(tmp_path / "rm", "llama")
    (model / STAND_IN_MARKER).unlink()
    out = tmp_path / "scored" / "h4.jsonl"
    out.parent.mkdir()
    src = write_jsonl(tmp_path / "input.jsonl", train_rows[:6])
    assert main(["score", "--model", str(model), "--input", str(src), "--output", str(out), "--device", "cpu"]) == 0
    _, en, zh = analysed_and_carded(out, tmp_path / "run", {"scorer": "GPT-4 (openbmb/UltraFeedback ratings)"})
    assert "| scorer model | `rm` (sequence classifier), recorded by `repro score` beside the file |" in en
    assert "| 评分模型 | `rm`（序列分类器），由 `repro score` 记录在文件旁 |" in zh
    assert ("`known_recipe` names GPT-4 (openbmb/UltraFeedback ratings) as the scorer, but these scores are those of "
            "`rm` (sequence classifier), recorded by `repro score` beside the file; the input's own values are kept as "
            "`input_score_chosen`, `input_score_rejected`.") in en
    assert ("`known_recipe` 给出的评分模型是 GPT-4 (openbmb/UltraFeedback ratings)，但这些分数出自 `rm`（序列分类器），"
            "由 `repro score` 记录在文件旁；输入数据原有的值保留为 `input_score_chosen`、`input_score_rejected`。") in zh
    assert ("- This project did not build the dataset: facts about its making are only those given in `known_recipe` "
            "and the scorer that `repro score` recorded beside the file; the rest is unknown.") in en
    assert ("- 本项目并未构建该数据集：关于其构建过程，只有 `known_recipe` 给出的信息，以及 `repro score` "
            "在文件旁记录的评分模型，其余均为未知。") in zh


def test_a_relative_model_path_is_recorded_as_a_local_checkpoint(tmp_path, monkeypatch, train_rows):
    """`repro score --model models/my-rm` recorded "models/my-rm" beside the file, and the card showed `models/my-rm`
    as if a hub id. Now it records the checkpoint's full path, as a run records a local scorer, and the card names it
    by its last name."""
    model = build_tiny_reward_model(tmp_path / "models" / "my-rm", "llama")
    (model / STAND_IN_MARKER).unlink()
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "scored" / "h4.jsonl"
    out.parent.mkdir()
    src = write_jsonl(tmp_path / "input.jsonl", train_rows[:6])
    assert main(["score", "--model", "models/my-rm", "--input", str(src), "--output", str(out), "--device", "cpu"]) == 0
    assert declared_scorer(str(out))["model"] == str(model)
    _, en, zh = analysed_and_carded(out, tmp_path / "run")
    assert "| scorer model | `my-rm` (sequence classifier), recorded by `repro score` beside the file |" in en
    assert "| 评分模型 | `my-rm`（序列分类器），由 `repro score` 记录在文件旁 |" in zh
    assert "models/my-rm" not in en + zh


def test_the_card_states_the_scale_as_02_analyze_read_it(tmp_path, scored_h4):
    """metrics.json's scale said "as PairRM's are (no record names the scorer: read as PairRM's) ... PairRM's invariants
    ... are expected to hold if PairRM made them", the card of the same rows "as a reward model's logits are ... ties
    should be rare", without the invariants. Now the card says what the analysis read, in both languages: PairRM's
    (its stand-in marked beside the rows), read as PairRM's (the rows alone), a reward model's (one marked)."""
    folder, _ = scored_h4
    reward = {"model": "builtin:tiny-reward-llama", "kind": "sequence_classifier", "stand_in": True}
    said = {  # rows: (metrics.json's sentence, the card's English and Chinese sentences)
        "marked": ("These scores are real-valued logits, as PairRM's are: ",
                   "as PairRM's logits are (12 distinct values", "ties should be rare and PairRM's invariants should "
                   "hold.", "与 PairRM 的 logit 相同（12 个不同取值", "平局应当罕见，PairRM 的不变量应当成立。"),
        "bare": ("as PairRM's are (no record names the scorer: read as PairRM's)",
                 "off any rating grid; no record names the scorer: read as PairRM's)", "PairRM's invariants should "
                 "hold if PairRM made them.", "没有记录说明评分模型：按 PairRM 的分数解读）",
                 "PairRM 的不变量应当成立（如果分数出自 PairRM）。"),
        "reward": ("as a reward model's logits are", "as a reward model's logits are (12 distinct values",
                   "ties should be rare; a reward model's scores need not sum to 0 over a row's candidates, so "
                   "`score_chosen` ≥ 0 ≥ `score_rejected` need not hold.", "与奖励模型的 logit 相同（12 个不同取值",
                   "平局应当罕见；奖励模型的分数在一行的各候选之间不必和为 0，因此 "
                   "`score_chosen` ≥ 0 ≥ `score_rejected` 不必成立。")}
    for case, (sentence, *card) in said.items():
        rows = shutil.copytree(folder, tmp_path / case, ignore=shutil.ignore_patterns(
            *[STAND_IN_MARKER] * (case != "marked"))) / "h4.jsonl"
        if case == "reward":
            (rows.parent / STAND_IN_MARKER).write_text(json.dumps({"files": {"h4.jsonl": reward}}))
        metrics, en, zh = analysed_and_carded(rows, tmp_path / f"run-{case}")
        assert sentence in metrics["scale"]["sentence"], case
        scale = next(line for line in en.splitlines() if line.startswith("- Scale, as the analysis reads it: "))
        scale_zh = next(line for line in zh.splitlines() if line.startswith("- 分析给出的尺度判断："))
        assert card[0] in scale and card[1] in scale and card[2] in scale_zh and card[3] in scale_zh, (case, scale)


def test_the_card_describes_the_columns_repro_score_adds(tmp_path, scored_h4):
    """The card's schema said of `scores`, `ranks`, `input_score_chosen` and `input_score_rejected` "Not a column of
    the seed dataset's schema; no description is known", though repro score writes them (docs/scoring.md)."""
    folder, _ = scored_h4
    _, en, zh = analysed_and_carded(shutil.copytree(folder, tmp_path / "scored") / "h4.jsonl", tmp_path / "run")

    def described(half):  # {column: its description} of the features table
        rows = (line.strip().strip("|").split("|") for line in half.splitlines() if line.startswith("| `"))
        return {cells[0].strip(" `"): cells[2].strip() for cells in rows if len(cells) == 3}

    en, zh = described(en), described(zh)
    assert en["scores"] == ("The score of each candidate by `repro score`, in the order of `candidates` (higher is "
                            "better).")
    assert en["ranks"] == ("The rank of each candidate by its score, in the order of `candidates` (1 = best; equal "
                           "scores share the better rank).")
    for side in ("chosen", "rejected"):
        assert en[f"input_score_{side}"] == (f"The input's `score_{side}`, kept under this name by `repro score`, "
                                             f"which wrote `score_{side}` anew from its own scores.")
        assert zh[f"input_score_{side}"] == (f"输入数据原有的 `score_{side}`，由 `repro score` 以此列名保留；"
                                             f"`score_{side}` 已按它自己的得分重新写出。")
    assert zh["scores"] == "`repro score` 给每个候选回复的得分，顺序与 `candidates` 一致（越高越好）。"
    assert zh["ranks"] == "每个候选回复按得分的名次，顺序与 `candidates` 一致（1 为最佳；得分相同者并列较好的名次）。"
