"""`repro run` into a run directory that holds a run: other parameters refused unless --force, which leaves
nothing of the old run behind (the card cites no file this run did not make); resumable work is kept."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import datasets
import pytest

from conftest import hub_source
from repro.cli import main
from repro.errors import EXIT_BUSY, Busy, DataError, ParameterError
from repro.manifest import Manifest
from repro.construct import stages
from repro.parameters import ConstructParams, GenerationParams, build, load_params_file
from repro.paths import KERNEL, RunDir
from repro.cli import run as runner
from repro.cli.rerun import changed_parameters, clear_previous_run, replace_run, writing
from repro.cli.run import resolve_parameters
from repro.revisions import run_fingerprint
from repro.sources import demo_path

ROOT = Path(__file__).resolve().parents[1]


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def previous_run(tmp_path):
    """A run directory as `repro run params/demo.yaml` and a comparison left it (the outputs stand-ins)."""
    return made_run(tmp_path / "demo")


def made_run(root: Path, *overrides: str) -> RunDir:
    """A run directory as `repro run params/demo.yaml --set OVERRIDE...` and a comparison left it."""
    run = RunDir(root)
    values = load_params_file(ROOT / "params" / "demo.yaml", list(overrides))
    values["run_dir"] = str(run.root)
    Manifest(run).start_run(resolve_parameters(values), ["01_construct", "02_analyze", "03_card"])
    for relative, text in (("compare.json", "{}"), ("figures/compare_scores.png", "png"),
                           ("tables/compare_pairs.csv", "a,b"), ("metrics.json", "{}"),
                           ("dataset/README.md", "## Reproduction"), ("notebooks/03_card.ipynb", "{}")):
        (run.root / relative).parent.mkdir(parents=True, exist_ok=True)
        (run.root / relative).write_text(text)
        Manifest(run).add_outputs(run.root / relative)
    run.work.mkdir()
    (run.work / "kept.txt").write_text("resumable work lives here")
    (run.root / "selfcheck.json").write_text(json.dumps({"tool": "repro selfcheck"}))  # (a report: it is kept)
    Manifest(run).update(status="complete")
    return run


def test_other_parameters_are_refused_naming_them(previous_run, capsys, monkeypatch):
    before = files_of(previous_run.root)
    assert main(["run", "demo", "--out", str(previous_run.root), "--set", "limit=8", "--set", "chunk_size=4"]) == 2
    err = capsys.readouterr().err
    assert "REFUSED  run directory" in err
    assert "holds a run with other parameters: limit (null there, 8 now). Give another --out" in err  # chunk_size:
    assert ("Give another --out for this run, continue that one with its values (`--set limit=null`), or pass "
            "--force") in err
    # a list's value quoted for a shell (it split `--set candidate_columns=["resp0", "resp1", ...]` at its spaces)
    assert main(["run", "demo", "--out", str(previous_run.root), "--set", "candidate_columns=[resp0, resp1]"]) == 2
    assert """(`--set 'candidate_columns=["resp0", "resp1", "resp2", "resp3"]'`)""" in capsys.readouterr().err
    # it said "its resumable work/ is kept", as if a changed generation value would reuse the candidates; then "where
    # the generation and scoring values that made them are the same", as if rows other code made came back too
    assert ("pass --force: its outputs are removed first (its work/ stays, and the rows it made come back from the row "
            "cache where the generation and scoring values and the code that made them are the same, whatever the "
            "rows or chunking now; changed ones make their rows again)") in " ".join(err.split())
    assert files_of(previous_run.root) == before
    # into the default folder (no --out, no run_dir in the file): the flag that changes it is --out, not "run_dir"
    monkeypatch.setattr("repro.paths.default_run_dir", lambda name: previous_run.root)
    assert main(["run", "demo", "--set", "limit=8"]) == 2
    assert "Give another --out for this run" in capsys.readouterr().err
    assert main(["run", "demo", "--set", f"run_dir={previous_run.root}", "--set", "limit=8"]) == 2
    assert "Give another run_dir for this run" in capsys.readouterr().err
    assert main(["run", "--check", "demo", "--out", str(previous_run.root), "--set", "limit=8"]) == 1
    assert "REFUSED  run directory" in capsys.readouterr().out
    # the same parameters continue the run there; so do values of how the work runs (chunk_size, batch_tokens,
    # num_processes, the row cache): they do not change the data, and the check says which differ and what they cost
    assert main(["run", "--check", "demo", "--out", str(previous_run.root)]) == 0
    assert ("continues the run there, same parameters; it completed, but nothing records what made it (a notebook "
            "run on its own since, or an older repro): 01_construct, 02_analyze, 03_card run again)"
            ) in capsys.readouterr().out
    how = ["--set", "chunk_size=4", "--set", "num_processes=2", "--set", "batch_tokens=4096"]
    assert main(["run", "--check", "demo", "--out", str(previous_run.root), *how]) == 0
    out = capsys.readouterr().out
    assert ("continues the run there, same data parameters; how the work runs differs: batch_tokens (2048 there, "
            "4096 now), chunk_size (16 there, 4 now), num_processes (1 there, 2 now)") in out
    assert "finished work of another batch_tokens or chunk_size is set aside in work/ and computed again" in out
    chunks = ["--set", "chunk_size=4"]  # the row cache (on by default) keeps rows whatever the chunks
    assert main(["run", "--check", "demo", "--out", str(previous_run.root), *chunks]) == 0
    assert ("of another chunk_size is set aside in work/ (the batches, hence the float rounding, follow it); the row "
            "cache gives back the rows it holds, as they were scored") in capsys.readouterr().out
    assert main(["run", "--check", "demo", "--out", str(previous_run.root), *chunks, "--set", "cache=false"]) == 0
    assert "of another chunk_size is set aside in work/ and computed again (the batches" in capsys.readouterr().out


def test_a_run_that_recorded_a_split_its_dataset_lacks_is_not_told_to_continue_with_it(tmp_path, capsys):
    """An older repro let 03_card record card_split='trian_prefs'; `--check` then advised continuing that run with
    `--set card_split=trian_prefs`, a value the run refuses (once 01_construct and 02_analyze had run again). Now it
    says why its values cannot continue it, and --force (or another folder) is the advice."""
    run = made_run(tmp_path / "demo", "card_split=trian_prefs")
    assert main(["run", "--check", "demo", "--out", str(run.root)]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "holds a run with other parameters: card_split ('trian_prefs' there, 'train_prefs' now). Give another " \
           "--out for this run, or pass --force: its outputs are removed first" in out
    assert "--set card_split=trian_prefs" not in out
    assert ("Its own values cannot continue it: Parameter card_split='trian_prefs': this run's dataset at "
            f"{run.dataset} will have no such split (it will have ['train_prefs']). Did you mean 'train_prefs'?") in out
    assert main(["run", "--check", "demo", "--out", str(run.root), "--force"]) == 0
    assert main(["run", "--check", "demo", "--out", str(run.root), "--set", "card_split=trian_prefs"]) == 1
    assert "REFUSED  card_split: Parameter card_split='trian_prefs'" in capsys.readouterr().out


def test_a_source_rewritten_in_place_is_recorded_and_told_by_the_check(tmp_path, capsys):
    # the same path, other rows: `--check` said "same parameters" and the run silently built from the new rows; the
    # manifest did not say which rows a local source held
    from repro.revisions import local_content

    source = tmp_path / "rows.jsonl"
    source.write_text((ROOT / "src" / "repro" / "data" / "demo_prompts.jsonl").read_text())
    values = {**load_params_file(ROOT / "params" / "demo.yaml"), "source": str(source), "run_dir": str(tmp_path / "r"),
              "notebooks": ["01_construct"]}
    own = {k: v for k, v in resolve_parameters(values).items() if k in ConstructParams.model_fields}
    stages.load(stages.begin(build(ConstructParams, own, "test")))
    recorded = Manifest(RunDir(tmp_path / "r")).read()["stages"]["load"]["content"]
    assert recorded == {"file": hashlib.sha256(source.read_bytes()).hexdigest()} == local_content(str(source))
    args = ["run", "--check", "demo", "--out", str(tmp_path / "r"), "--set", f"source={source}",
            "--set", "notebooks=[01_construct]"]
    assert main(args) == 0 and "continues the run there, same parameters;" in capsys.readouterr().out
    source.write_text(source.read_text().replace("Python", "Rust"))
    assert main(args) == 0
    assert ("same data parameters; the source's content changed since the run was built from it: 01_construct "
            "builds again from the new rows") in capsys.readouterr().out


def test_a_run_directory_another_repro_run_is_writing_is_refused_until_it_is_done(previous_run, capsys,
                                                                                  stubbed_notebooks):
    # two terminals, one run directory: the second run waited for nothing and wrote over the first one's manifest
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.cli.rerun import writing; "
                               "from repro.paths import RunDir; cm = writing(RunDir(sys.argv[1])); cm.__enter__(); "
                               "print('held', flush=True); time.sleep(60)", str(previous_run.root)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        before = files_of(previous_run.root)
        # busy exits 75 (EX_TEMPFAIL: the same command again, later), as a busy member does; it was 2, a usage error's
        assert main(["run", "demo", "--out", str(previous_run.root), "--force", "--set", "limit=8"]) == EXIT_BUSY == 75
        out, err = capsys.readouterr()
        assert out == ""
        assert f"BUSY     run directory: `repro run` (pid {holder.pid}, since " in err
        assert "is writing to it now: wait for it to finish, or give another --out" in err
        assert files_of(previous_run.root) == before  # --force removed nothing
        assert main(["run", "--check", "demo", "--out", str(previous_run.root)]) == 1
        assert "BUSY     run directory" in capsys.readouterr().out
        with pytest.raises(Busy, match="is writing to it now"):  # (one that took the folder since the checks)
            with writing(previous_run):
                pass
    finally:
        holder.kill()
        holder.wait()
    # the holder gone (even killed), the directory is free: the run goes on (papermill stubbed)
    assert main(["run", "demo", "--out", str(previous_run.root)]) == 0


def test_a_complete_run_asked_for_again_has_nothing_to_do_while_it_is_as_it_was(demo_run_copy, capsys, monkeypatch):
    # `repro run params/demo.yaml` twice: the second executed every notebook again (as long as the first)
    from repro.cli import run as runner

    started = []
    monkeypatch.setattr(runner, "run_notebooks", lambda values, root, **kw: started.append(root) or 0)
    again = ["run", "demo", "--out", str(demo_run_copy)]
    before = files_of(demo_run_copy)
    assert main(again) == 0 and not started and files_of(demo_run_copy) == before
    assert (f"nothing to do: {demo_run_copy} holds a complete run of these parameters, code and packages, with every "
            f"output it recorded") in capsys.readouterr().out  # (it reads no local file nor hub id)
    assert main([*again[:1], "--check", *again[1:]]) == 0 and not started
    assert main([*again, "--set", "num_processes=2", "--set", "cache=false"]) == 0 and not started  # how it runs
    assert main([*again, "--set", "chunk_size=8"]) == 0 and len(started) == 1  # other batches: other rounding
    assert main([*again, "--force"]) == 0 and len(started) == 2  # --force: its notebooks again
    # an output gone or edited, a self-check the card would cite now, a notebook run on its own since
    # (it may have made other numbers): the run goes on
    figure = next(demo_run_copy.glob("figures/*.png"))
    figure.rename(figure.with_suffix(".bak"))
    capsys.readouterr()
    assert main([*again[:1], "--check", *again[1:]]) == 0  # and --check says why
    assert (f"it completed, but its output {figure.relative_to(demo_run_copy)} is gone or was changed: 01_construct, "
            f"02_analyze, 03_card run again") in capsys.readouterr().out
    assert main(again) == 0 and len(started) == 3
    # a plain run says it too (it ran everything again unsaid)
    assert (f"  run directory: {demo_run_copy} (continues the run there, same parameters; it completed, but its output "
            f"{figure.relative_to(demo_run_copy)} is gone or was changed: 01_construct, 02_analyze, 03_card run again)"
            in capsys.readouterr().out)
    figure.with_suffix(".bak").rename(figure)
    assert main(again) == 0 and len(started) == 3
    from repro import revisions
    with monkeypatch.context() as m:  # a notebook's code edited, or another torch installed
        m.setattr(revisions, "code_digest", lambda: "edited")
        m.setattr(revisions, "package_versions", lambda: {"torch": "0.0.1"})
        assert main([*again[:1], "--check", *again[1:]]) == 0 and len(started) == 3
        assert ("it completed, but its code and packages changed: 01_construct, 02_analyze, 03_card run again"
                in capsys.readouterr().out)
    metrics = demo_run_copy / "metrics.json"  # an output edited in place, its size kept
    kept = metrics.read_bytes()
    metrics.write_bytes(kept.replace(b"1", b"2", 1))
    assert main(again) == 0 and len(started) == 4
    metrics.write_bytes(kept)
    (demo_run_copy / "selfcheck.json").write_text(json.dumps({"tool": "repro selfcheck", "when": "2026-12-04"}))
    assert main(again) == 0 and len(started) == 5
    (demo_run_copy / "selfcheck.json").unlink()
    manifest = Manifest(demo_run_copy)
    manifest.ensure_started(manifest.read()["parameters"], "02_analyze")  # 02_analyze opened in JupyterLab
    manifest.notebook_ended("02_analyze")
    assert manifest.read()["status"] == "complete" and "fingerprint" not in manifest.read()
    assert main(again) == 0 and len(started) == 6


def test_a_complete_run_asked_for_with_other_unread_values_says_what_changed_and_what_runs_again(demo_run_copy,
                                                                                                  capsys, monkeypatch):
    # other notebooks, or a value only a notebook the last run did not run reads: the line said "same parameters; it
    # completed, but its parameters changed" (two comparisons: the notebooks both run, and the whole fingerprint)
    from repro.cli import run as runner

    started = []
    monkeypatch.setattr(runner, "run_notebooks", lambda values, root, **kw: started.append(values["notebooks"]) or 0)
    again = ["run", "demo", "--out", str(demo_run_copy)]

    def said() -> str:
        return next(line for line in capsys.readouterr().out.splitlines() if "run directory" in line)

    assert main([*again, "--set", "notebooks=[01_construct, 02_analyze]"]) == 0
    line = said()
    assert "same parameters" not in line and ('other notebooks (["01_construct", "02_analyze", "03_card"] there, '
                                              '["01_construct", "02_analyze"] now)') in line
    assert line.endswith("its notebook list differs: 01_construct, 02_analyze run again)")
    # a value no notebook of the run reads (04_compare's): nothing to do (the fingerprint hashed every value)
    for unread in ("near_tie=0.5", "reference=foo/bar"):
        assert main([*again, "--set", unread]) == 0
        assert "nothing to do" in capsys.readouterr().out
    assert started == [["01_construct", "02_analyze"]]
    # a notebook added: the others run again, it runs (it never ran there)
    assert main(["run", "--check", "demo", "--out", str(demo_run_copy), "--set",
                 "notebooks=[01_construct, 02_analyze, 03_card, 04_compare]", "--set", "reference=foo/bar"]) in (0, 1)
    assert said().endswith("its notebook list differs: 01_construct, 02_analyze, 03_card run again; 04_compare runs "
                           "for the first time)")
    # a subset of the notebooks, none of which reads a batch size (alone or with another chunk_size): the line said
    # "its parameters and batch sizes changed" with no batch size changed (the fingerprint hashed none of them)
    for more in ([], ["--set", "chunk_size=8"]):
        assert main([*again[:1], "--check", *again[1:], "--set", "notebooks=[02_analyze]", *more]) == 0
        line = said()
        assert 'other notebooks (["01_construct", "02_analyze", "03_card"] there, ["02_analyze"] now)' in line
        assert "batch sizes" not in line and line.endswith("its notebook list differs: 02_analyze runs again)")
    manifest = Manifest(demo_run_copy)
    recorded = manifest.read()["fingerprint"]  # and back: a complete run of 02_analyze alone, then all of them
    subset = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml", ["notebooks=[02_analyze]"]),
                                 "run_dir": str(demo_run_copy)})
    manifest.update(fingerprint=run_fingerprint(subset))
    assert main([*again[:1], "--check", *again[1:]]) == 0
    assert said().endswith("it completed, but its parameters changed: 01_construct, 02_analyze, 03_card run again)")
    manifest.update(fingerprint=recorded)
    # other batches: the part that changed is said, never "same ... parameters" beside "its parameters changed"
    assert main([*again, "--set", "chunk_size=8"]) == 0
    line = said()
    assert "same data parameters" in line and "its batch sizes changed: 01_construct" in line
    manifest = Manifest(demo_run_copy)
    manifest.update(fingerprint={**manifest.read()["fingerprint"], "parameters": "other"})  # (as another repro's)
    assert main([*again]) == 0
    line = said()
    assert "same parameters" not in line and "its parameters changed: 01_construct" in line


def test_a_complete_run_asked_for_with_fewer_notebooks_says_the_list_differs(tmp_path, capsys, stubbed_notebooks):
    # `--set 'notebooks=[03_card]'` on a complete run of a local file said "its parameters and local inputs changed",
    # though nothing had changed but the notebook list (03_card reads other values, and no local input)
    import shutil

    shutil.copy(ROOT / "tests" / "fixtures" / "ultrafeedback" / "train_prefs.jsonl", tmp_path / "rows.jsonl")
    params = tmp_path / "uf.yaml"
    params.write_text(f"source: {tmp_path / 'rows.jsonl'}\ncandidate_columns: []\ninclude_original_pair: true\n"
                      f"scorer_model: builtin:tiny-pairrm\ndevice: cpu\n")
    again = ["run", "--check", str(params), "--out", str(tmp_path / "run")]
    assert main(["run", *again[2:]]) == 0 and stubbed_notebooks == ["01_construct", "02_analyze", "03_card"]
    capsys.readouterr()
    main([*again, "--set", "notebooks=[03_card]"])  # (1: the stubs wrote no dataset for the card to read)
    line = next(line for line in capsys.readouterr().out.splitlines() if "run directory" in line)
    assert line.endswith('other notebooks (["01_construct", "02_analyze", "03_card"] there, ["03_card"] now); it '
                         'completed, but its notebook list differs: 03_card runs again)'), line


def test_force_removes_what_the_previous_run_made_and_keeps_its_work(previous_run):
    values = load_params_file(ROOT / "params" / "demo.yaml", ["limit=8"])
    values["run_dir"] = str(previous_run.root)
    assert set(changed_parameters(previous_run, resolve_parameters(values))) == {"limit"}
    removed = clear_previous_run(previous_run)
    assert {"compare.json", "figures/compare_scores.png", "tables/compare_pairs.csv", "manifest.json"} <= set(removed)
    assert sorted(files_of(previous_run.root)) == ["selfcheck.json", "work/kept.txt"]


def test_a_replaced_run_says_the_recorded_names_it_removed_escaped(previous_run, capsys):
    # the names of the previous run's outputs (its record's) reached the terminal raw: "\x1b[2K" erased the line
    evil = previous_run.tables / "old\x1b[2KEVIL.csv"
    evil.write_text("a,b")
    Manifest(previous_run).add_outputs(evil)
    replace_run(previous_run, force=True)
    out = capsys.readouterr().out
    assert not evil.exists() and "tables/old\\x1b[2KEVIL.csv" in out and "\x1b" not in out


def test_a_forced_rerun_makes_a_card_that_cites_only_its_own_files(previous_run, repro_run):
    proc = repro_run("demo", "--out", previous_run.root, "--set", "limit=8", "--force")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "--force: removed the previous run's compare.json" in proc.stdout
    manifest = Manifest(previous_run).read()
    assert manifest["status"] == "complete" and manifest["parameters"]["limit"] == 8
    assert not (previous_run.root / "compare.json").exists() and "compare.json" not in manifest["outputs"]
    assert not list(previous_run.figures.glob("compare_*")) and not list(previous_run.tables.glob("compare_*"))
    card = previous_run.card.read_text()
    assert "Reproduction" not in card and "compare.json" not in card
    made = set(manifest["outputs"])
    cited = {p for p in made if p.startswith("figures/")}
    assert cited and all(c in card for c in cited if c.endswith(".png"))  # its figures are the ones it made
    assert json.loads((previous_run.root / "metrics.json").read_text())["n"] <= 8
    assert (previous_run.work / "kept.txt").is_file()


@pytest.mark.parametrize("inside", ["", "dataset", "dataset/data/train_prefs-00000-of-00001.parquet"])
def test_a_run_that_reads_what_force_removes_is_refused_with_force_too(previous_run, inside, capsys,
                                                                         stubbed_notebooks):
    # a finished run's rows re-ranked into that run (source=the run): the check said ok, --force removed its dataset/,
    # then 01_construct failed, "source ... is a run directory without a dataset": the rows were gone
    shard = previous_run.data / "train_prefs-00000-of-00001.parquet"
    shard.parent.mkdir(parents=True)
    datasets.Dataset.from_json(str(demo_path())).to_parquet(shard)
    Manifest(previous_run).add_outputs(shard)
    source, before = previous_run.root / inside, files_of(previous_run.root)
    args = ["demo", "--out", str(previous_run.root), "--set", f"source={source}"]
    assert main(["run", "--check", *args, "--force"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert (f"REFUSED run directory: source ({source}) is read from what replacing the run in {previous_run.root} "
            f"removes first (--force too): give this run another --out, or copy what it reads out of that run "
            f"directory first and give the copy") in out, out
    assert main(["run", *args]) == 2
    assert "source (" in capsys.readouterr().err
    assert main(["run", *args, "--force"]) == 2
    assert "removes first (--force too)" in capsys.readouterr().err
    assert files_of(previous_run.root) == before and stubbed_notebooks == []  # nothing removed, nothing run
    # 8 rows of it compared with the old ones: 04_compare's reference would be gone too
    assert main(["run", "--check", "demo", "--out", str(previous_run.root), "--set", f"reference={source}", "--set",
                 "notebooks=[01_construct, 04_compare]", "--set", "limit=8", "--force"]) == 1
    assert f"REFUSED  run directory: reference ({source}) is read from" in capsys.readouterr().out
    # what --force keeps (work/) may be read; so may 02_analyze's dataset named as the run's own (the one it builds)
    kept = previous_run.work / "rows.jsonl"
    shutil.copy(demo_path(), kept)
    for value in (f"source={kept}", f"dataset={previous_run.root / inside}"):
        assert main(["run", "--check", "demo", "--out", str(previous_run.root), "--set", value, "--set", "limit=8",
                     "--force"]) == 0
        assert "--force: its outputs are removed first" in capsys.readouterr().out


def test_01_construct_alone_refuses_a_run_directory_with_other_parameters(previous_run):
    # opened in JupyterLab after `make demo` (run_name 'demo', the notebook's own defaults) and run, 01_construct
    # rewrote the demo's manifest with its parameters and left the old card, metrics and dataset beside it
    values = {**load_params_file(ROOT / "params" / "demo.yaml"), "run_dir": str(previous_run.root)}
    resolved = resolve_parameters(values)
    own = {k: v for k, v in resolved.items() if k in ConstructParams.model_fields}
    Manifest(previous_run).finish_run("complete")
    before = files_of(previous_run.root)
    with pytest.raises(ParameterError, match=r"holds a run with other parameters: limit \(null there, 8 now\)\. Set "
                                             r"those values in the parameters cell to continue it \(a notebook's "
                                             r"defaults are its own, not a params file's.*give this "
                                             r"notebook another run_dir"):
        stages.begin(build(ConstructParams, {**own, "limit": 8, "chunk_size": 4}, "test"))
    assert files_of(previous_run.root) == before  # nothing written
    ctx = stages.begin(build(ConstructParams, own, "test"))  # the same parameters continue the run there
    assert Manifest(ctx.run).read()["parameters"]["limit"] is None


def test_01_construct_alone_records_and_checks_its_generation_parameters(tmp_path):
    # the notebook's generation cell was never recorded: a card of its run named the policy "unknown" and left its
    # generation settings out, and another temperature in the same folder was not refused
    run = RunDir(tmp_path / "gen")
    own = {"run_dir": str(run.root), "source": "demo", "generate": True, "scorer_model": "builtin:tiny-pairrm"}
    generation = {"policy_model": "builtin:tiny-policy", "temperature": 0.7, "generation_device": "cpu"}
    ctx = stages.begin(build(ConstructParams, own), build(GenerationParams, generation))
    recorded = Manifest(ctx.run).read()["parameters"]
    assert (recorded["policy_model"], recorded["temperature"]) == ("builtin:tiny-policy", 0.7)
    assert recorded["source"] == "demo"
    (run.root / "dataset").mkdir()
    (run.root / "dataset" / "made.txt").write_text("a result")
    Manifest(run).add_outputs(run.root / "dataset" / "made.txt")
    Manifest(run).finish_run("complete")
    with pytest.raises(ParameterError, match=r"other parameters: temperature \(0\.7 there, 1\.0 now\)"):
        stages.begin(build(ConstructParams, own), build(GenerationParams, {**generation, "temperature": 1.0}))


def test_a_failed_run_that_made_nothing_is_replaced_without_force(tmp_path, capsys, monkeypatch):
    # mini_count=100 failed on 40 rows ("lower mini_count"); lowering it was then refused as "other parameters"
    run = RunDir(tmp_path / "demo")
    values = {**load_params_file(ROOT / "params" / "demo.yaml", ["mini_count=100"]), "run_dir": str(run.root)}
    Manifest(run).start_run(resolve_parameters(values), ["01_construct", "02_analyze", "03_card"])
    (run.notebooks).mkdir(parents=True)
    (run.notebooks / "01_construct.ipynb").write_text("{}")  # the failed notebook, kept to read the error
    Manifest(run).add_outputs(run.notebooks / "01_construct.ipynb")
    Manifest(run).finish_run("failed", "DataError: 40 rows cannot be cut into mini_count=100 minis")
    assert main(["run", "--check", "demo", "--out", str(run.root)]) == 0
    out = capsys.readouterr().out
    assert "ok       run directory" in out and "mini_count (100 there, 1 now)" in out
    assert "made nothing but its notebooks and failed: it is replaced" in out
    # the run itself said only which files it removed: not that the old run failed, what changed, nor that work/ stays
    from repro.cli import run as runner
    monkeypatch.setattr(runner, "run_notebooks", lambda values, root, **kw: 0)
    assert main(["run", "demo", "--out", str(run.root)]) == 0
    assert (f"  run directory: {run.root} holds an unfinished run with other parameters (mini_count (100 there, 1 "
            f"now)) that made nothing but its notebooks and failed: it is replaced (its work/ stays"
            ) in capsys.readouterr().out
    Manifest(run).start_run(resolve_parameters(values), ["01_construct", "02_analyze", "03_card"])
    Manifest(run).finish_run("failed", "DataError: 40 rows cannot be cut into mini_count=100 minis")
    resolved = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml"), "run_dir": str(run.root)})
    stages.begin(build(ConstructParams, {k: v for k, v in resolved.items() if k in ConstructParams.model_fields}))
    assert Manifest(run).read()["parameters"]["mini_count"] == 1  # the notebook alone replaces it too


@pytest.mark.parametrize("cache", [True, False])
def test_a_replaced_run_says_its_rows_come_back_from_the_row_cache(tmp_path, capsys, cache):
    # an interrupted run of limit 300 checked with limit=64: "it is replaced (its work/ stays: changed generation or
    # scoring values make their work again; ...)"; then all 64 rows came back from the row cache, none was made again
    run = RunDir(tmp_path / "uf")
    values = {**load_params_file(ROOT / "params" / "demo.yaml", ["limit=30", f"cache={str(cache).lower()}"]),
              "run_dir": str(run.root)}
    Manifest(run).start_run(resolve_parameters(values), ["01_construct", "02_analyze", "03_card"])
    Manifest(run).finish_run("interrupted", "interrupted (Ctrl-C) in 01_construct")
    assert main(["run", "--check", "demo", "--out", str(run.root), "--set", "limit=6"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("holds an unfinished run with other parameters (limit (30 there, 6 now)) that made nothing but its "
            "notebooks and was interrupted: it is replaced (") in out
    assert (("its work/ stays, and the rows it made come back from the row cache where the generation and scoring "
             "values and the code that made them are the same, whatever the rows or chunking now; changed ones make "
             "their rows again)") if cache else  # the run there kept no rows in the row cache: nothing says they come back
            "its work/ stays: changed generation or scoring values make their work again; the rest is reused where it "
            "can be)") in out


def test_01_construct_alone_replacing_a_failed_run_keeps_none_of_its_record(tmp_path, capsys):
    # generate=True failed at the score stage after generating (there: device 'cuda', no GPU); run again with
    # generate=False, the replaced run kept `generation`, stages.generate and counts.generated, and its card said that
    # builtin:tiny-policy had generated the candidates (next to `generate | false`)
    run = RunDir(tmp_path / "nb_gen")
    own = {"run_dir": str(run.root), "source": "demo", "limit": 3, "candidate_columns": ["resp0", "resp1"],
           "scorer_model": "builtin:tiny-pairrm", "device": "cpu"}
    generation = build(GenerationParams, {"policy_model": "builtin:tiny-policy", "max_new_tokens": 16,
                                          "reference_max_new_tokens": 16, "generation_device": "cpu"})
    ctx = stages.begin(build(ConstructParams, {**own, "generate": True, "limit": 2}), generation)
    stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)
    Manifest(run).finish_run("failed", "stage 'score' failed: no GPU")
    assert {"generation", "scorer"} & set(Manifest(run).read()) == {"generation"}
    capsys.readouterr()
    ctx = stages.begin(build(ConstructParams, own), generation)
    assert capsys.readouterr().err == (  # (it was replaced without a word)
        f"repro: The run in {run.root} is replaced: it failed, and its parameters changed (generate (true there, false "
        f"now), limit (2 there, 3 now)); its work/ stays: changed generation or scoring values make their work again; "
        f"the rest is reused where it can be.\n")
    data = Manifest(run).read()
    assert "generation" not in data and not data["stages"] and not data["counts"]
    assert data["parameters"]["generate"] is False and list(data["notebooks"]) == ["01_construct"]
    stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)
    assert Manifest(run).read()["counts"]["sliced"] == 3
    stages.begin(build(ConstructParams, own), generation)  # the same parameters continue it: its record stays
    assert "replaced" not in capsys.readouterr().err
    assert Manifest(run).read()["stages"]["slice"]["status"] == "done"


def test_generation_values_are_compared_only_where_a_run_generates(tmp_path, capsys):
    # `repro run --check params/demo.yaml` against a run 01_construct made on its own with generate=False was refused
    # for max_new_tokens (16 there, 1024 now), policy_model and reference_max_new_tokens: values that shaped nothing
    run = RunDir(tmp_path / "c2")
    resolved = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml"), "run_dir": str(run.root)})
    made = {**resolved, "policy_model": "builtin:tiny-policy", "max_new_tokens": 16, "reference_max_new_tokens": 16}
    Manifest(run).start_run(made, resolved["notebooks"])
    run.data.mkdir(parents=True)
    (run.data / "train_prefs-00000-of-00001.parquet").write_bytes(b"rows")
    Manifest(run).finish_run("failed", "DataError: stand-in")
    assert main(["run", "--check", "demo", "--out", str(run.root)]) == 0
    assert "(continues the run there, same parameters; the last run failed" in capsys.readouterr().out
    assert run_fingerprint(made) == run_fingerprint(resolved)
    generating = {**resolved, "generate": True}  # where a run generates, they count
    assert list(changed_parameters(run, generating)) == ["generate", "max_new_tokens", "policy_model",
                                                         "reference_max_new_tokens"]
    assert run_fingerprint({**made, "generate": True}) != run_fingerprint(generating)


def test_a_key_idle_in_both_runs_is_no_difference_between_them(tmp_path, capsys, stubbed_notebooks):
    # `--set length_penalty=0.5` said it "is set but not used: ... remove it"; removed, the same command was REFUSED
    # for `length_penalty (0.5 there, 0.0 now)`, its advice (`--set length_penalty=0.5`) giving the first line again:
    # only --force (every notebook again) got out, for a value that shaped nothing
    out = tmp_path / "lpnew"
    again = ["run", "demo", "--out", str(out), "--set", "limit=6"]
    assert main([*again, "--set", "length_penalty=0.5", "--set", "selection_seed=3"]) == 0
    assert "length_penalty (acts only with selection: best_worst_length_penalised" in capsys.readouterr().err
    manifest = Manifest(RunDir(out))
    (out / "metrics.json").write_text("{}")  # (a run that made more than its notebooks: other values are refused)
    manifest.add_outputs(out / "metrics.json")
    made = manifest.read()
    assert made["status"] == "complete"
    assert made["parameters"]["length_penalty"] == 0.5 and made["parameters"]["selection_seed"] == 3  # as given
    # the record is as today's repro writes it: the fingerprint hashes the idle values (a run made is not made to
    # run again by an upgrade: the values are compared instead)
    plain = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml", ["limit=6"]), "run_dir": str(out)})
    assert run_fingerprint(plain)["parameters"] != made["fingerprint"]["parameters"]
    for check in ([], ["--check"]):
        assert main([*again[:1], *check, *again[1:]]) == 0 and len(stubbed_notebooks) == 3
        assert "nothing to do" in capsys.readouterr().out
    # where it acts in one of them, it differs: the advice gives the recorded run back whole
    assert main([*again, "--set", "selection=best_worst_length_penalised"]) == 2
    assert ("other parameters: length_penalty (0.5 there, 0.0 now), selection ('best_worst' there, "
            "'best_worst_length_penalised' now). Give another --out for this run, continue that one with its values "
            "(`--set length_penalty=0.5 --set selection=best_worst`)") in capsys.readouterr().err
    # a blank dataset an older repro recorded is null now: not `other dataset ('' there, null now)`
    with manifest.edit() as data:
        data["parameters"]["dataset"] = ""
        data["fingerprint"] = run_fingerprint({**plain, "length_penalty": 0.5, "selection_seed": 3, "dataset": ""})
    assert changed_parameters(RunDir(out), plain) == {}
    assert main([*again[:1], "--check", *again[1:]]) == 0 and "nothing to do" in capsys.readouterr().out
    assert main([*again[:1], "--check", *again[1:], "--set", "bootstrap_resamples=300"]) == 1
    said = capsys.readouterr().out
    assert "other parameters: bootstrap_resamples (1000 there, 300 now). Give" in said  # (not dataset)


def test_a_notebook_alone_refuses_a_run_directory_a_repro_run_is_writing(previous_run, monkeypatch):
    # JupyterLab beside a long `repro run` into the same folder: both wrote the manifest and the dataset
    import subprocess
    import sys

    from repro.subject import claim

    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.cli.rerun import writing; "
                               "from repro.paths import RunDir; cm = writing(RunDir(sys.argv[1])); cm.__enter__(); "
                               "print('held', flush=True); time.sleep(60)", str(previous_run.root)],
                              stdout=subprocess.PIPE, text=True)
    values = {**load_params_file(ROOT / "params" / "demo.yaml"), "run_dir": str(previous_run.root)}
    own = {k: v for k, v in resolve_parameters(values).items() if k in ConstructParams.model_fields}
    try:
        assert holder.stdout.readline().strip() == "held"
        before = files_of(previous_run.root)
        for start in (lambda: stages.begin(build(ConstructParams, own, "test")),
                      lambda: claim(previous_run, None, "dataset")):  # 02_analyze, 03_card, 04_compare
            with pytest.raises(ParameterError, match=rf"is being written by `repro run` \(pid {holder.pid}, since .*"
                                                     r"wait for it to finish, or give this notebook another run_dir"):
                start()
        assert files_of(previous_run.root) == before
        # the notebooks that `repro run` itself runs (its kernels inherit the mark) go on
        monkeypatch.setenv("REPRO_WRITING_RUN", str(previous_run.root))
        claim(previous_run, None, "dataset")
    finally:
        holder.kill()
        holder.wait()


def test_a_notebook_on_its_own_holds_its_run_directory_until_it_ends(previous_run, capsys):
    """Two JupyterLab kernels (or a kernel and a `repro run`) writing one run folder: a notebook on its own now holds
    the folder from its first cell to its last, so the other is refused, and the folder is free once it ends."""
    import subprocess
    import sys

    from repro.subject import claim

    kernel = subprocess.Popen([sys.executable, "-c", "import sys; from repro.manifest import Manifest; "
                               "from repro.paths import RunDir; from repro.subject import claim; "
                               "run = RunDir(sys.argv[1]); claim(run, None, 'dataset'); print('held', flush=True); "
                               "sys.stdin.readline(); Manifest(run).notebook_ended('02_analyze'); "
                               "print('ended', flush=True); sys.stdin.readline()", str(previous_run.root)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert kernel.stdout.readline().strip() == "held"  # 02_analyze's first cell, in another kernel
        with pytest.raises(ParameterError, match=rf"is being written by a notebook's kernel \(pid {kernel.pid}, .*"
                                                 rf"keeps it until it is shut down: in JupyterLab, Kernel > Shut Down"):
            claim(previous_run, None, "dataset")
        assert main(["run", "--check", "demo", "--out", str(previous_run.root)]) == 1
        assert f"BUSY     run directory: a notebook's kernel (pid {kernel.pid}, since " in capsys.readouterr().out
        kernel.stdin.write("\n")
        kernel.stdin.flush()
        assert kernel.stdout.readline().strip() == "ended"  # its last cell: the folder is given back
        claim(previous_run, None, "dataset")
        previous_run.release(kernel=True)
        assert main(["run", "--check", "demo", "--out", str(previous_run.root)]) == 0
    finally:
        kernel.kill()
        kernel.wait()


@contextmanager
def construct_kernel(kernel: Callable, run_dir: Path, **values: Any
                     ) -> Iterator[tuple[list[str], Callable[..., str], Any]]:
    """A kernel (the `kernel` fixture's) with 01_construct's imports, its parameters cell and papermill's cell of the
    demo's values (with run_dir and `values`) run: the notebook's code cells, a function running one in it ('ok', or
    its error's text; `hook` sees its messages) and the kernel's manager."""
    resolved = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml"), "run_dir": str(run_dir),
                                   **values})
    given = "# Parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in resolved.items()
                                       if k in ConstructParams.model_fields or k in GenerationParams.model_fields)
    notebook = json.loads((ROOT / "notebooks" / "01_construct.ipynb").read_text())
    cells = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    km, kc = kernel()

    def cell(code: str, hook: Callable[[dict], Any] = lambda msg: None) -> str:
        reply = kc.execute_interactive(code, timeout=300, output_hook=hook)
        return reply["content"]["status"] if reply["content"]["status"] == "ok" else reply["content"]["evalue"]

    assert [cell(code) for code in (*cells[:2], given)] == ["ok"] * 3
    yield cells, cell, km


def test_01_constructs_setup_cell_alone_leaves_a_complete_run_free_and_its_stages_hold_it(previous_run, capsys,
                                                                                          kernel):
    """JupyterLab, a complete run looked at: the cells up to 01_construct's setup cell held the run folder until the
    kernel was shut down, so `repro run --check` and another kernel were refused as BUSY though nothing ran. Now a
    stage takes the folder, and a stage in another kernel meanwhile is refused."""
    from repro.subject import claim

    own = {k: v for k, v in resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml"),
                                                "run_dir": str(previous_run.root)}).items()
           if k in ConstructParams.model_fields}

    def check() -> tuple[int, str]:
        code = main(["run", "--check", "demo", "--out", str(previous_run.root)])
        return code, next(line for line in capsys.readouterr().out.splitlines() if "run directory:" in line)

    with construct_kernel(kernel, previous_run.root) as (cells, cell, _):
        setup, load = cells[2:4]
        assert cell(setup) == "ok"
        code, line = check()
        assert code == 0, line
        assert line.startswith(f"  ok       run directory: {previous_run.root} (continues the run there"), line
        claim(previous_run, None, "dataset")  # another kernel's notebook goes on
        previous_run.release(kernel=True)
        ctx = stages.begin(build(ConstructParams, own))  # 01_construct in another kernel, its §1 Source rows run
        stages.load(ctx)
        assert cell(load).startswith(f"run_dir {str(previous_run.root)!r} is being written by a notebook's kernel "
                                     f"(pid {os.getpid()}, since ")
        previous_run.release(kernel=True)  # that kernel shut down
        # the refusal changed nothing: the cell run again as it says takes the folder, which this kernel holds until
        # its end (before, `ctx` had gone stale: "from before a cell above failed"; only the setup cell again helped)
        assert cell(load) == "ok"
        code, line = check()
        assert code == 1 and "BUSY     run directory: a notebook's kernel (pid " in line
        assert f"(pid {os.getpid()}" not in line


def test_a_cell_refused_for_rows_made_before_the_setup_cell_leaves_ctx_usable_so_its_advice_works(tmp_path, kernel):
    """A real kernel (the reviewer's): Run All, the setup cell again, §6 Pairs refused ("run the cells above first, §1
    Source rows to §5 PairRM scores"); then §1 said "`ctx` is from before a cell above failed: fix it and run the
    notebook again", and only Run All got out. Now the refusal, which did nothing, leaves `ctx` as it was, and doing
    as it says completes the run; after Kernel > Interrupt too. A cell that really fails still makes `ctx` stale."""
    run = RunDir(tmp_path / "run")
    with construct_kernel(kernel, run.root, limit=6) as (cells, cell, km):
        setup, stages_cells = cells[2], cells[3:]  # §1 Source rows .. §8 Write the dataset
        pairs = stages_cells[5]
        refused = ("This cell was given results made before the setup cell (`ctx = stages.begin(...)`) last ran, or "
                   "before a cell above ran again: run the cells above first, §1 Source rows to §5 PairRM scores (or "
                   "Run All); nothing was written.")
        assert [cell(code) for code in (setup, *stages_cells)] == ["ok"] * 9  # Run All
        assert Manifest(run).read()["status"] == "complete"
        written = files_of(run.dataset)

        def interrupt(msg: dict) -> None:
            if msg["msg_type"] == "stream" and "sleeping" in msg["content"]["text"]:
                km.interrupt_kernel()

        for before in ("", "print('sleeping', flush=True); import time; time.sleep(120)"):  # Kernel > Interrupt
            if before:
                assert cell(before, interrupt) == ""  # (KeyboardInterrupt's text)
                assert cell("ctx.run").startswith("`ctx` is from before a cell was interrupted")
            assert cell(setup) == "ok"
            assert cell(pairs) == refused
            assert [cell(code) for code in stages_cells] == ["ok"] * 8, before
            assert Manifest(run).read()["status"] == "complete"
            assert files_of(run.dataset) == written
        assert cell("from repro.errors import DataError\nraise DataError('a stage failed')") == "a stage failed"
        assert cell(stages_cells[0]) == ("`ctx` is from before a cell above failed: fix it and run the notebook "
                                         "again (this cell did nothing).")


def test_a_kernel_takes_its_run_folder_again_when_the_folder_was_removed_under_it(previous_run):
    """A person removes the run folder a kernel holds and runs the notebook again in that kernel: its lock went with
    the folder, so it takes a new one (before, it believed it still held the folder, and a second kernel could
    write there too)."""
    import shutil
    import subprocess
    import sys

    other = ("import sys; from repro.paths import RunDir; print(RunDir(sys.argv[1]).hold('another kernel', "
             "kernel=True))")
    assert previous_run.hold(KERNEL, kernel=True) is None
    try:
        shutil.rmtree(previous_run.root)
        assert previous_run.writer() is None
        assert previous_run.hold(KERNEL, kernel=True) is None  # the notebook run again in the same kernel
        refused = subprocess.run([sys.executable, "-c", other, str(previous_run.root)], capture_output=True,
                                 text=True, check=True).stdout
        assert refused.startswith(f"a notebook's kernel (pid {os.getpid()}, since ")
    finally:
        previous_run.release(kernel=True)
    assert subprocess.run([sys.executable, "-c", other, str(previous_run.root)], capture_output=True, text=True,
                          check=True).stdout.strip() == "None"  # given back: free


def test_a_process_forked_from_a_kernel_keeps_no_run_folder_held_once_the_kernel_gives_it_back(previous_run):
    """A kernel's run forks a process that outlives it (vLLM's engine, a DataLoader worker): closing the lock's file
    left the child holding the flock, so the folder stayed "held by a notebook's kernel" for the child's whole life."""
    import multiprocessing
    import time

    assert previous_run.hold(KERNEL, kernel=True) is None
    child = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
    child.start()
    try:
        previous_run.release(kernel=True)
        assert child.is_alive() and previous_run.writer() is None
    finally:
        child.kill()


def test_a_notebook_added_by_repro_run_keeps_the_record_of_the_others(previous_run, tmp_path, monkeypatch, capsys):
    """`repro run` of a params file listing only 04_compare, into a built run (as the README's verification does):
    the construction's recorded parameters and environment stay, so the card it refreshes still says how the data
    was made (before, the new file's defaults replaced them: another scorer_model and candidate_columns)."""
    from repro import cli

    with Manifest(previous_run).edit() as data:
        data["environment"]["git"] = {"commit": "the commit that built the data", "dirty": False}
        data["notebooks"] = {name: {"status": "done"} for name in ("01_construct", "02_analyze", "03_card")}
        data["status"] = "complete"
    built = Manifest(previous_run).read()
    monkeypatch.setattr(cli.run, "run_interruptible", lambda execute, src, out, **k: Path(out).write_text("{}"))
    verify = tmp_path / "verify.yaml"
    (tmp_path / "published.jsonl").write_text("{}\n")  # (the comparison itself is not run here)
    verify.write_text(f"notebooks: [04_compare]\nreference: {tmp_path / 'published.jsonl'}\nbootstrap_resamples: 200\n")
    assert main(["run", str(verify), "--out", str(previous_run.root)]) == 0
    data = Manifest(previous_run).read()
    compare_fields = {"reference": str(tmp_path / "published.jsonl"), "notebooks": ["04_compare"]}
    assert data["parameters"] == {**built["parameters"], **compare_fields}  # run_name: the folder's, "demo"
    # 02_analyze's 1000 resamples stay the run's; the comparison's 200 are its own
    assert data["parameters"]["bootstrap_resamples"] == 1000
    assert data["notebooks"]["04_compare"]["parameters"] == {"bootstrap_resamples": 200}
    assert data["parameters"]["scorer_model"] == "builtin:tiny-pairrm"  # not the schema's default, PairRM
    assert list(data["notebooks"]) == ["01_construct", "02_analyze", "03_card", "04_compare"]
    assert data["environment"] == built["environment"]  # the data's; the comparison's own is beside its notebook
    assert data["notebooks"]["04_compare"]["environment"]["git"] != built["environment"]["git"]
    assert data["status"] == "complete"
    # the comparison with another value of its own is refused, and --force runs it again keeping the rest (before,
    # --force removed the dataset, which this params file does not build: the comparison then failed for want of it)
    other = [str(verify), "--out", str(previous_run.root), "--set", "bootstrap_resamples=300"]
    assert main(["run", "--check", *other]) == 1
    assert "--force: the notebooks listed (04_compare) run again with the new values and make their outputs anew " \
           "(the dataset and the other notebooks' outputs stay)" in capsys.readouterr().out
    kept = {p: p.read_bytes() for p in previous_run.root.rglob("*") if p.is_file() and "notebooks" not in p.parts
            and p.name != "manifest.json"}
    assert main(["run", *other, "--force"]) == 0
    assert {p: p.read_bytes() for p in kept if p.is_file()} == kept  # (papermill stubbed: 04 itself wrote nothing)
    data = Manifest(previous_run).read()
    assert data["notebooks"]["04_compare"]["parameters"] == {"bootstrap_resamples": 300}
    assert data["parameters"]["bootstrap_resamples"] == 1000 and data["status"] == "complete"
    # both params files continue the run (before, demo.yaml was refused for bootstrap_resamples: 200 there)
    for again in (["demo"], [str(verify), "--set", "bootstrap_resamples=300"]):
        assert main(["run", "--check", *again, "--out", str(previous_run.root)]) == 0


def test_a_family_never_goes_into_a_runs_folder_nor_a_run_into_a_familys(previous_run, tmp_path, capsys):
    """The README's grid (`repro run params/demo.yaml --grid mini_index=...`) after `make demo` put the family into
    runs/demo: its members beside the demo's dataset, and 05_family's record merged into the demo run's manifest."""
    before = files_of(previous_run.root)
    grid = ["run", "demo", "--set", "mini_count=4", "--grid", "mini_index=0,1", "--out", str(previous_run.root)]
    assert main([*grid, "--check"]) == 1
    assert f"REFUSED  run directory: {previous_run.root} holds a run (01_construct, 02_analyze, 03_card), not a " \
           f"family's folder" in capsys.readouterr().out
    assert main([*grid, "--force"]) == 2  # --force replaces a run of other parameters, never another kind of folder
    assert "give the family its own --out" in capsys.readouterr().err
    assert files_of(previous_run.root) == before
    # the family's folder given as run_dir in its params file: the refusal says run_dir (it said --out)
    given = tmp_path / "fam.yaml"
    given.write_text(f"include: {ROOT / 'params' / 'demo_family.yaml'}\nrun_dir: {previous_run.root}\n")
    assert main(["run", str(given), "--check"]) == 1
    out = capsys.readouterr().out
    assert "give the family its own run_dir" in out and "--out" not in out
    family = RunDir(tmp_path / "fam")
    Manifest(family).start_run({"run_name": "fam"}, ["05_family"])
    Manifest(family).notebook_status("05_family", "done")
    assert main(["run", "demo", "--out", str(family.root), "--check"]) == 1
    assert f"{family.root} holds a family's folder (05_family), not a run" in capsys.readouterr().out
    # nor a family's member into a family's folder: runs/x/mini_index-0 made a family by an earlier --out
    members = tmp_path / "grid"
    Manifest(RunDir(members / "mini_index-0")).start_run({"run_name": "f"}, ["05_family"])
    assert main(["run", "demo", "--set", "mini_count=4", "--grid", "mini_index=0,1", "--out", str(members),
                 "--check"]) == 1
    assert f"{members / 'mini_index-0'} holds a family's folder (05_family), not a run" in capsys.readouterr().out


@pytest.mark.parametrize("status, said", [("running", "stopped without finishing (killed?)"), ("failed", "failed"),
                                          ("interrupted", "was interrupted"), ("complete", None)])
def test_check_says_how_the_last_run_ended_and_what_it_kept(tmp_path, status, said, capsys):
    """`--check` on a folder whose run was killed said only "continues the run there, same parameters"."""
    out = tmp_path / "run"
    values = resolve_parameters({**load_params_file("params/demo.yaml"), "run_dir": str(out)})
    manifest = Manifest(RunDir(out))
    manifest.start_run(values, values["notebooks"])
    manifest.update(status=status)
    for k in range(3):
        (out / "work" / "scoring" / f"chunk-{k:06d}.json").parent.mkdir(parents=True, exist_ok=True)
        (out / "work" / "scoring" / f"chunk-{k:06d}.json").write_text("[]")
    assert main(["run", "--check", "demo", "--out", str(out)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "run directory" in line)
    assert "continues the run there, same parameters" in line
    assert (f"the last run {said}; 3 finished chunks are kept" in line) == (said is not None), line
    # with another chunk_size they are set aside: not "kept" beside "set aside" (it said both)
    if said:
        assert main(["run", "--check", "demo", "--out", str(out), "--set", "chunk_size=5"]) == 0
        line = next(line for line in capsys.readouterr().out.splitlines() if "run directory" in line)
        assert f"the last run {said})" in line and "set aside" in line and "are kept" not in line, line


def test_check_names_damaged_chunk_and_fingerprint_files_and_what_the_run_does_with_them(tmp_path, capsys):
    """`--check` said "5 finished chunks are kept", exit 0, over a truncated chunk file (the run then failed on it) or
    a truncated fingerprint.json (the run then set every chunk of its folder aside)."""
    out = tmp_path / "run"
    values = resolve_parameters({**load_params_file("params/demo.yaml"), "run_dir": str(out)})
    Manifest(RunDir(out)).start_run(values, values["notebooks"])
    Manifest(RunDir(out)).update(status="interrupted")
    scoring = out / "work" / "scoring"
    scoring.mkdir(parents=True)
    for k in range(3):
        (scoring / f"chunk-{k:06d}.json").write_text("[[0.5, -0.5]]")
    (scoring / "fingerprint.json").write_text('{"digest": "0123456789abcdef", "fingerprint": {}}')
    (scoring / "chunk-000001.json").write_text("[[0.5, -0.")  # cut short (a full disk, a copy stopped)

    def said(*extra: str) -> tuple[int, str]:
        code = main(["run", "--check", "demo", "--out", str(out), *extra])
        return code, next(line for line in capsys.readouterr().out.splitlines() if "run directory:" in line)

    code, line = said()
    damaged = scoring / "chunk-000001.json"
    assert code == 1 and line.startswith(f"  DAMAGED  run directory: {damaged} is not JSON ("), line
    assert line.endswith("); delete it to recompute that chunk: a run there stops at it (the other 2 finished chunks "
                         "are kept)"), line
    assert main(["run", "demo", "--out", str(out)]) == 2  # refused before any notebook runs
    assert f"DAMAGED  run directory: {damaged} is not JSON" in capsys.readouterr().err
    assert not (out / "notebooks").exists()
    (scoring / "chunk-000001.json").write_text("[[0.5, -0.5]]")
    for damage in (b'{"dig', b"\xff\xfe{", b"[]"):  # (not UTF-8, no mapping: as the run reads them, damaged too)
        (scoring / "fingerprint.json").write_bytes(damage)
        code, line = said()
        assert code == 0 and line.endswith(
            "the last run was interrupted; 3 finished chunks in work/scoring cannot be told to be this run's: its "
            "fingerprint.json is damaged (not what repro writes): they are set aside and computed again)"), line
        assert "are kept" not in line


def test_check_says_which_chunks_other_code_made_and_whether_the_row_cache_gives_their_rows_back(
        tmp_path, capsys, tiny_pairrm_dir, train_rows):
    """Upgraded over a failed run an older repro made: --check (and the run's header) said "1 finished chunk is kept",
    then the run set it aside: "made with other settings: code (null there, '7aaadc9d571f4cf6' now)"."""
    from repro.family import Member
    from repro.cli.rerun import kept_to_continue
    from repro.paths import row_cache_dir
    from scoring_defaults import run_scoring

    out = tmp_path / "run"
    values = resolve_parameters({**load_params_file("params/demo.yaml"), "run_dir": str(out)})
    Manifest(RunDir(out)).start_run(values, values["notebooks"])
    Manifest(RunDir(out)).update(status="failed")
    rows = train_rows[120:124]
    prompts, candidates = [r["prompt"] for r in rows], [[r["chosen"][-1]["content"], r["rejected"][-1]["content"]]
                                                        for r in rows]
    common = dict(model=str(tiny_pairrm_dir), chunk_size=2, progress=False, source_maxlength=64, candidate_maxlength=32)
    run_scoring(prompts, candidates, work_dir=out / "work" / "scoring", **common)  # (no row cache)
    run_scoring(prompts[:2], candidates[:2], work_dir=out / "work" / "scoring" / "rm", **common)  # this code's: kept
    made = out / "work" / "scoring" / "fingerprint.json"
    written = json.loads(made.read_text())
    written["fingerprint"]["work"].pop("code")  # as the older repro wrote it
    made.write_text(json.dumps(written))

    def said() -> str:
        assert main(["run", "--check", "demo", "--out", str(out)]) == 0
        return next(line for line in capsys.readouterr().out.splitlines() if "run directory" in line)

    assert said().endswith(
        "the last run failed; 1 finished chunk is kept; 2 finished chunks in work/scoring were made by an older repro "
        "that did not record its code: they are set aside and computed again (the row cache holds none of their rows: "
        "it keys them on the code too))")
    member = Member(0, "mini_index-0", {}, values, out, {}, values)
    assert kept_to_continue([member]) == ("finished chunks and cached rows are kept, but not the 2 finished chunks of "
                                          "mini_index-0 that other scoring or generation code made (an older repro): "
                                          "they are computed again")
    # this code scored them since, elsewhere: the row cache gives their rows back
    run_scoring(prompts, candidates, work_dir=tmp_path / "elsewhere", cache_dir=row_cache_dir(), **common)
    written["fingerprint"]["work"]["code"] = "0123456789abcdef"
    made.write_text(json.dumps(written))
    assert said().endswith(
        "the last run failed; 1 finished chunk is kept; 2 finished chunks in work/scoring were made by other scoring "
        "code: they are set aside; their rows come back from the row cache where this code made them with these "
        "values, the others are computed again)")
    # all of them: none is kept
    (out / "work" / "scoring" / "rm" / "chunk-000000.json").unlink()
    assert "the last run failed; 2 finished chunks in work/scoring were made by other scoring code" in said()
    made.unlink()  # no fingerprint: not told (the run sets them aside, saying why)
    assert said().endswith("the last run failed; 2 finished chunks are kept)")
    assert kept_to_continue([member]) == "finished chunks and cached rows are kept"


def test_check_of_a_folder_with_work_and_no_record_does_not_call_it_new(tmp_path, capsys):
    """A folder whose record is gone (a --force replacement stopped before the run began, a manifest deleted) but whose
    work/ holds finished chunks was "(new)": the chunks are used where they are of these values, else set aside."""
    out = tmp_path / "run"
    for k in range(2):
        (out / "work" / "scoring" / f"chunk-{k:06d}.json").parent.mkdir(parents=True, exist_ok=True)
        (out / "work" / "scoring" / f"chunk-{k:06d}.json").write_text("[]")
    assert main(["run", "--check", "demo", "--out", str(out)]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "run directory" in line)
    assert "(new)" not in line and f"{out} (no run recorded there; 2 finished chunks in work/" in line, line
    (out / "work" / "scoring" / "chunk-000001.json").unlink()
    (out / "work" / "scoring" / "chunk-000000.json").unlink()
    assert main(["run", "--check", "demo", "--out", str(out)]) == 0
    assert f"{out} (new)" in capsys.readouterr().out


def test_a_hub_source_whose_newest_commit_in_the_cache_moved_is_built_again(tmp_path, capsys, offline_hub_rows,
                                                                            stubbed_notebooks):
    # `hf download` of a hub source's new commit: a complete run's re-run said "nothing to do", a continued one built
    # from the new rows without a word (the run's fingerprint held the content of local files only)
    args = ["run", "demo", "--out", str(tmp_path / "r"), "--set", "source=someone/rows",
            "--set", "notebooks=[01_construct]"]
    assert main(args) == 0 and main(args) == 0
    assert "nothing to do" in capsys.readouterr().out
    hub_source(tmp_path / "hub", "b" * 40, ("Python", "Rust"))
    assert main(["run", "--check", *args[1:]]) == 0
    assert "it completed, but its hub commits (source) changed: 01_construct runs again" in capsys.readouterr().out
    # a run the new commit stopped short: the check says why its rows are others, and the lineage names the commit
    values = {**load_params_file(ROOT / "params" / "demo.yaml"), "source": "someone/rows",
              "run_dir": str(tmp_path / "r2"), "notebooks": ["01_construct"]}
    own = {k: v for k, v in resolve_parameters(values).items() if k in ConstructParams.model_fields}
    stages.load(ctx := stages.begin(build(ConstructParams, own, "test")))
    assert Manifest(RunDir(tmp_path / "r2")).read()["stages"]["load"]["commit"] == "b" * 40
    assert stages.lineage(ctx, "train_prefs")["source"] == f"someone/rows@{'b' * 40}"
    (tmp_path / "hub" / "datasets--someone--rows" / "refs" / "main").write_text("a" * 40)
    assert main(["run", "--check", *args[1:3], str(tmp_path / "r2"), *args[4:]]) == 0
    assert (f"the source's hub commit ({'b' * 12} then, {'a' * 12} in the local hub cache now) changed since the run "
            f"was built from it: 01_construct builds again from the new rows") in capsys.readouterr().out


def test_a_first_run_records_the_hub_commits_it_downloaded(tmp_path, monkeypatch):
    # online, a first run's hub ids are not in the cache when it starts: a fingerprint taken then made its re-run
    # build again once
    from huggingface_hub import constants

    from repro.cli import run as runner

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    values = resolve_parameters({**load_params_file(ROOT / "params" / "demo.yaml"), "source": "someone/rows",
                                 "run_dir": str(tmp_path / "r"), "notebooks": ["01_construct"]})
    before = run_fingerprint(values)
    monkeypatch.setattr(runner, "ensure_kernel", lambda name=runner.KERNEL_NAME: name)
    monkeypatch.setattr("papermill.execute_notebook", lambda src, out, **kw: hub_source(tmp_path / "hub", "a" * 40)
                        or Path(out).write_text("{}"))  # (the notebook downloads it)
    assert runner.run_notebooks(values, tmp_path / "r", fingerprint=before) == 0
    after = run_fingerprint(values)
    assert after["hub commits"] != before["hub commits"]
    assert Manifest(RunDir(tmp_path / "r")).read()["fingerprint"] == after
    assert Manifest(RunDir(tmp_path / "r")).unheld(after) == ""


def test_the_setup_cell_again_keeps_a_complete_runs_counts_and_a_write_cell_alone_refuses(tmp_path):
    # JupyterLab, a complete run: the setup cell run again reset the manifest to `running` with counts {}; the last
    # cell alone then rewrote the parquet, failed with a KeyError ("None of ['stage'] are in the columns") from the
    # counts table, and left the run `complete` with no counts (03_card published an empty "Counts at each stage")
    from repro.analysis import views

    own = {"run_dir": str(tmp_path / "ooo"), "source": str(ROOT / "tests/fixtures/ultrafeedback/train_prefs.jsonl"),
           "candidate_columns": [], "include_original_pair": True, "limit": 12, "scorer_model": "builtin:tiny-pairrm"}
    ctx = stages.begin(build(ConstructParams, own), build(GenerationParams, {}))
    cs = stages.candidates(ctx, sliced := stages.slice_rows(ctx, stages.load(ctx)))
    pairs = stages.build(ctx, sliced, cs, stages.score(ctx, cs))
    stages.write(ctx, pairs)
    complete = Manifest(ctx.run).read()
    assert complete["status"] == "complete" and complete["counts"]["kept"] == 12
    before = files_of(ctx.run.dataset)
    ctx = stages.begin(build(ConstructParams, own), build(GenerationParams, {}))  # the setup cell, again
    # nothing erased, nor marked `running` before a stage runs (the verifier's s13: the cells up to the setup cell on a
    # complete run left it `running` for good once the kernel was shut down: "stopped without finishing (killed?)")
    assert Manifest(ctx.run).read() == complete
    with pytest.raises(ParameterError, match=r"This cell was given results made before the setup cell \(`ctx = "
                                             r"stages.begin\(\.\.\.\)`\) last ran, or before a cell above ran again: "
                                             r"run the cells above first, §1 Source rows to §7 The test split \(or "
                                             r"Run All\); nothing was written\."):
        stages.write(ctx, pairs)
    assert files_of(ctx.run.dataset) == before
    assert Manifest(ctx.run).read() == complete
    assert views.counts_table({}).data.empty  # (the counts of a run no stage has counted yet: an empty table)
    stages.load(ctx)  # the stages run again count afresh
    assert Manifest(ctx.run).read()["counts"] == {"source": complete["counts"]["source"]}


def test_the_hint_to_continue_a_run_shows_its_path_as_typed_and_quoted_for_the_shell(previous_run, capsys):
    # `--set 'source="/tmp/…/donn\u00e9es \u6570\u636e/…"'`: JSON's escapes, which no one types
    import shlex

    import yaml

    source = previous_run.root.parent / "l'été données 数据" / "rows.jsonl"
    source.parent.mkdir()
    source.write_text((ROOT / "src" / "repro" / "data" / "demo_prompts.jsonl").read_text())
    Manifest(previous_run).update(parameters={**Manifest(previous_run).read()["parameters"], "source": str(source)})
    assert main(["run", "demo", "--out", str(previous_run.root)]) == 2
    err = capsys.readouterr().err
    hint = err.split("continue that one with its values (`")[1].split("`)")[0]
    assert "\\u" not in hint and "données 数据" in hint
    flag, value = shlex.split(hint)  # as a shell reads it, then YAML (--set's VALUE)
    assert flag == "--set" and value.startswith("source=") and yaml.safe_load(value[len("source="):]) == str(source)


def test_a_project_moved_or_copied_continues_its_runs_of_local_files(tmp_path, tiny_pairrm_dir, capsys, monkeypatch,
                                                                     stubbed_notebooks):
    # a colleague's copy, a reproduction, a renamed folder: every run naming a local file was refused ("scorer_model
    # ('/old/…/data dir/my scorer ü' there, '/new/…' now)"), though the same relative path names the same bytes
    import shutil

    executed = stubbed_notebooks
    monkeypatch.delenv("REPRO_HOME", raising=False)
    old, outside = tmp_path / "old" / "My proj", tmp_path / "shared rows.jsonl"
    (old / "data dir").mkdir(parents=True)
    (old / ".repro-project").write_text("a project")
    demo_rows = (ROOT / "src" / "repro" / "data" / "demo_prompts.jsonl").read_text()
    (old / "data dir" / "rows 数据.jsonl").write_text(demo_rows)
    outside.write_text(demo_rows)
    shutil.copytree(tiny_pairrm_dir, old / "data dir" / "my scorer ü")
    runs = {"inside": ["--set", "source=data dir/rows 数据.jsonl", "--set", "scorer_model=data dir/my scorer ü",
                       "--set", "cache=false", "--out", "runs/local scorer"],
            "outside": ["--set", f"source={outside}", "--out", "runs/shared rows"]}
    monkeypatch.chdir(old)
    for args in runs.values():
        assert main(["run", "demo", *args]) == 0
    assert len(executed) == 6

    def again(project: Path, args: list[str], *more: str) -> str:
        monkeypatch.chdir(project)
        code = main(["run", "demo", *args, *more])
        said = capsys.readouterr()
        assert code == 0, said.err
        return said.out

    capsys.readouterr()
    copy, moved = tmp_path / "copy" / "données", tmp_path / "moved"
    shutil.copytree(old, copy, symlinks=True)
    old.rename(moved)
    for project in (copy, moved):
        for args in runs.values():
            assert "nothing to do" in again(project, args)
    assert len(executed) == 6
    # a run recorded before the manifest said where its project was: the run's own place in it tells
    manifest = Manifest(moved / "runs" / "local scorer")
    data = manifest.read()
    assert data.pop("project") == str(tmp_path / "old" / "My proj")
    manifest.write(data)
    assert "nothing to do" in again(moved, runs["inside"])
    # another file of the project is another parameter; the same file with other bytes is other data
    (moved / "data dir" / "other.jsonl").write_text(demo_rows)
    other = [arg.replace("rows 数据", "other") for arg in runs["inside"]]
    assert "other parameters (source (" in again(moved, other, "--check")  # (its outputs stand-ins: it is replaced)
    (moved / "data dir" / "rows 数据.jsonl").write_text(demo_rows.replace("Python", "Rust"))
    assert "it completed, but its local inputs changed" in again(moved, runs["inside"], "--check")


def test_a_run_an_older_repro_made_says_only_its_code_changed(tmp_path, capsys, monkeypatch, offline_hub_rows,
                                                              stubbed_notebooks):
    # a project's runs made by an older repro, checked by this one: "its parameters and code changed" (its record
    # digested the absolute paths, this repro `<project>/...`) and "its hub commits and code changed" (its record has
    # no `hub commits`), though no value and no hub commit changed: only the code did
    import shutil

    monkeypatch.delenv("REPRO_HOME", raising=False)
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".repro-project").write_text("a project")
    shutil.copy(ROOT / "tests" / "fixtures" / "ultrafeedback" / "train_prefs.jsonl", project / "rows.jsonl")
    monkeypatch.chdir(project)
    for name, reference, parts in (("local", "rows.jsonl", "local inputs"),
                                   ("hub", "someone/rows", "local inputs, hub commits")):
        params = project / f"{name}.yaml"
        params.write_text(f"notebooks: [04_compare]\nreference: {reference}\ncandidate: rows.jsonl\n")
        assert main(["run", str(params)]) == 0
        manifest = Manifest(project / "runs" / name)
        data = manifest.read()  # as the older repro wrote it: no `project`, nor a fingerprint's `hub commits`
        data.pop("project")
        data["fingerprint"].pop("hub commits")
        data["fingerprint"].update(parameters="5715d8c70b544d69", code="8338c9b39512ae82")  # (of the paths as such)
        manifest.write(data)
        capsys.readouterr()
        assert main(["run", "--check", str(params)]) == 0
        said = capsys.readouterr().out
        assert "(continues the run there, same parameters; it completed, but its code changed: 04_compare runs " \
               "again)" in said, said
        assert main(["run", str(params)]) == 0 and main(["run", str(params)]) == 0  # (its parts: those it reads)
        assert (f"holds a complete run of these parameters, {parts}, code and packages, with every output"
                in capsys.readouterr().out)


def test_a_new_self_check_in_a_complete_run_makes_only_the_card_again(demo_run_copy, capsys, stubbed_notebooks):
    # `repro selfcheck --report runs/X` into a finished run: "it completed, but the self-check it would cite is
    # another: 01_construct, 02_analyze, 03_card run again"; only the card cites it
    executed = stubbed_notebooks
    again = ["run", "demo", "--out", str(demo_run_copy)]
    check = demo_run_copy / "selfcheck.json"
    check.write_text(json.dumps({"tool": "repro selfcheck", "when": "2026-12-04", "verdict": "pass"}))
    assert main([*again[:1], "--check", *again[1:]]) == 0
    assert ("same parameters; it completed, but the self-check it would cite is another: 03_card runs again)"
            in capsys.readouterr().out)
    assert main(again) == 0 and executed == ["03_card"]
    recorded = Manifest(demo_run_copy).read()
    assert recorded["status"] == "complete" and recorded["selfcheck"]["sha256"] == hashlib.sha256(
        check.read_bytes()).hexdigest()
    assert recorded["parameters"]["notebooks"] == ["01_construct", "02_analyze", "03_card"]
    assert recorded["notebooks"]["01_construct"]["status"] == "done"
    capsys.readouterr()
    assert main(again) == 0 and "nothing to do" in capsys.readouterr().out
    # --force: all of them again
    assert main([*again, "--force"]) == 0 and executed == ["03_card", "01_construct", "02_analyze", "03_card"]
    # a run without the card cites none: another self-check leaves it as it was
    manifest, data = Manifest(demo_run_copy), Manifest(demo_run_copy).read()
    check.write_text(json.dumps({"tool": "repro selfcheck", "when": "2026-12-05", "verdict": "pass"}))
    assert manifest.unheld(data["fingerprint"]) == "the self-check it would cite is another"
    data["notebooks"].pop("03_card")
    manifest.write(data)
    assert manifest.unheld(data["fingerprint"]) == ""


def test_a_cell_given_rows_made_before_the_setup_cell_or_a_cell_above_ran_again_refuses(tmp_path):
    # JupyterLab (the verifier's s9, s19): cells 1-16 with limit=12, then the parameters cell with limit=6 (or only
    # min_margin changed), the setup cell and cells 16, 18, 20: build paired the 12 rows of the earlier ctx, the run
    # ended `complete` with counts {'kept': 12}, no scorer record and limit 6, and 03_card carded the 12 rows as 6
    own = {"run_dir": str(tmp_path / "part"), "source": str(ROOT / "tests/fixtures/ultrafeedback/train_prefs.jsonl"),
           "candidate_columns": [], "include_original_pair": True, "limit": 12, "scorer_model": "builtin:tiny-pairrm"}
    ctx = stages.begin(build(ConstructParams, own), generation := build(GenerationParams, {}))
    rows = stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)
    cs = stages.candidates(ctx, rows)
    pairs = stages.build(ctx, rows, cs, scores := stages.score(ctx, cs))
    refused = (r"This cell was given results made before the setup cell \(`ctx = stages\.begin\(\.\.\.\)`\) last ran, "
               r"or before a cell above ran again: run the cells above first, §1 Source rows to §{} \(or Run All\); "
               r"nothing was written\.")
    for changed in ({"limit": 6}, {"min_margin": 0.3}):
        ctx = stages.begin(build(ConstructParams, {**own, **changed}), generation)  # the setup cell, again
        for cell, section in ((lambda: stages.build(ctx, rows, cs, scores), "5 PairRM scores"),
                              (lambda: stages.build_test(ctx, generation, pairs), "6 Pairs"),
                              (lambda: stages.write(ctx, pairs), "7 The test split")):
            with pytest.raises(ParameterError, match=refused.format(section)):
                cell()
        data = Manifest(ctx.run).read()
        assert data["status"] == "running" and not data["counts"] and not (tmp_path / "part" / "dataset").exists()
    # the same ctx: a cell above run again makes the results below it stale (scores of the candidates before)
    ctx = stages.begin(build(ConstructParams, own), generation)
    rows = stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)
    scores = stages.score(ctx, cs := stages.candidates(ctx, rows))
    cs = stages.candidates(ctx, rows)
    with pytest.raises(ParameterError, match=refused.format("5 PairRM scores")):
        stages.build(ctx, rows, cs, scores)
    stages.write(ctx, stages.build(ctx, rows, cs, stages.score(ctx, cs)))  # the cells in order: written
    data = Manifest(ctx.run).read()
    assert data["status"] == "complete" and data["counts"]["kept"] == 12 and data["scorer"]


def test_a_stage_run_again_on_a_finished_run_reopens_it_and_03_card_refuses_it_until_the_write_cell(tmp_path):
    # JupyterLab (the verifier's s20, s21): Run All, then §1 Source rows alone: the run stayed `complete` with counts
    # {'source': 40}, and 03_card carded it with one count, its check of the kept rows silently skipped
    from repro.card.facts import gather_facts
    from repro.errors import DataError
    from repro.parameters import CardParams

    own = {"run_dir": str(tmp_path / "new1"), "source": str(ROOT / "tests/fixtures/ultrafeedback/train_prefs.jsonl"),
           "candidate_columns": [], "include_original_pair": True, "limit": 4, "scorer_model": "builtin:tiny-pairrm"}
    ctx = stages.begin(build(ConstructParams, own), generation := build(GenerationParams, {}))

    def cells_from_slice(source_rows):
        rows = stages.generate(ctx, stages.slice_rows(ctx, source_rows), generation)
        cs = stages.candidates(ctx, rows)
        pairs = stages.build(ctx, rows, cs, stages.score(ctx, cs))
        stages.write(ctx, pairs, test=stages.build_test(ctx, generation, pairs))

    cells_from_slice(stages.load(ctx))
    card = build(CardParams, {"run_dir": own["run_dir"]})
    assert gather_facts(card).counts["kept"] == 4
    source_rows = stages.load(ctx)  # one cell run again
    data = Manifest(ctx.run).read()
    assert (data["status"], data["notebooks"]["01_construct"]["status"], data["counts"]) == (
        "running", "running", {"source": 200})
    with pytest.raises(DataError, match=rf"{ctx.run.root} holds a run whose 01_construct did not finish \(its "
                                        r"manifest.json says running\): its record may not describe .*dataset\. Run "
                                        r"notebooks/01_construct.ipynb to its end first \(Run All; a kernel still "
                                        r"running it: wait for it\); nothing was written\."):
        gather_facts(card)
    cells_from_slice(source_rows)  # the cells below it, run again: the run is complete again, as its record says
    assert Manifest(ctx.run).read()["status"] == "complete" and gather_facts(card).counts["kept"] == 4


def test_parameters_changed_part_way_through_a_kernels_run_say_this_kernel_was_running_it(tmp_path, capsys):
    # JupyterLab (the verifier's s9, s18, s19): cells run up to §6, then other parameters and the setup cell in the
    # same kernel: "The run ... is replaced: it stopped without finishing (killed?)", though the user only paused
    own = {"run_dir": str(tmp_path / "part"), "source": str(ROOT / "tests/fixtures/ultrafeedback/train_prefs.jsonl"),
           "candidate_columns": [], "include_original_pair": True, "limit": 4, "scorer_model": "builtin:tiny-pairrm"}
    ctx = stages.begin(build(ConstructParams, own))
    stages.slice_rows(ctx, stages.load(ctx))
    capsys.readouterr()
    stages.begin(build(ConstructParams, {**own, "min_margin": 0.3}))
    reused = "its work/ stays: changed generation or scoring values make their work again; the rest is reused where it"
    assert capsys.readouterr().err == (
        f"repro: The run in {ctx.run.root} is replaced: it did not finish (this kernel was running it), and its "
        f"parameters changed (min_margin (0.0 there, 0.3 now)); {reused} can be.\n")
    ctx.run.release(kernel=True)  # the kernel that ran it is gone: nobody says why it stopped
    stages.begin(build(ConstructParams, own))
    assert capsys.readouterr().err == (
        f"repro: The run in {ctx.run.root} is replaced: it stopped without finishing (killed?), and its parameters "
        f"changed (min_margin (0.3 there, 0.0 now)); {reused} can be.\n")


def test_a_copied_runs_record_of_files_outside_it_never_has_them_removed(tmp_path, capsys, monkeypatch,
                                                                          stubbed_notebooks):
    # a run folder from a shared drive: its manifest's outputs named ../../victim.txt, an absolute path and
    # notebooks/../../../victim2.txt; --force removed them (the absolute one then crashed, "ValueError: ... is not in
    # the subpath", the folder half-cleared), and a failed run that "made nothing" but notebooks/.. without --force
    run = made_run(tmp_path / "runs" / "demo")
    victims = [tmp_path / "victim.txt", tmp_path / "x" / "victim.txt", tmp_path / "victim2.txt"]
    for victim in victims:
        victim.parent.mkdir(exist_ok=True)
        victim.write_text("not the run's")
    keys = ["../../victim.txt", str(victims[1]), "notebooks/../../../victim2.txt"]
    with Manifest(run).edit() as data:
        data["outputs"].update(dict.fromkeys(keys, {"sha256": "0" * 64, "bytes": 13}))
    monkeypatch.setattr(runner, "run_notebooks", lambda values, root, **kw: 0)
    assert main(["run", "demo", "--out", str(run.root), "--set", "limit=8", "--force"]) == 0
    out = capsys.readouterr().out
    assert [v.read_text() for v in victims] == ["not the run's"] * 3
    assert not run.figures.exists() and not run.dataset.exists() and not (run.root / "compare.json").exists()
    assert out.count("victim") == 3, out  # said once
    assert f"; its record also names {', '.join(keys)}, outside {run.root}: left alone\n" in out, out
    # a failed run whose only output is a notebook (and a key leading out through notebooks/) is replaced unforced
    failed = RunDir(tmp_path / "runs" / "failed")
    values = {**load_params_file(ROOT / "params" / "demo.yaml", ["mini_count=100"]), "run_dir": str(failed.root)}
    Manifest(failed).start_run(resolve_parameters(values), ["01_construct", "02_analyze", "03_card"])
    failed.notebooks.mkdir(parents=True)
    (failed.notebooks / "01_construct.ipynb").write_text("{}")
    Manifest(failed).add_outputs(failed.notebooks / "01_construct.ipynb")
    with Manifest(failed).edit() as data:
        data["outputs"]["notebooks/../../../victim2.txt"] = {"sha256": "0" * 64, "bytes": 13}
    Manifest(failed).finish_run("failed", "DataError: 40 rows cannot be cut into mini_count=100 minis")
    assert not Manifest(failed).made_results()
    assert main(["run", "demo", "--out", str(failed.root)]) == 0
    assert victims[2].read_text() == "not the run's" and not failed.notebooks.exists()
    # a result recorded by a path through notebooks/ is one all the same
    (failed.root / "metrics.json").write_text("{}")
    with Manifest(failed).edit() as data:
        data["outputs"] = {"notebooks/../metrics.json": {"sha256": "0" * 64, "bytes": 2}}
    assert Manifest(failed).made_results()
    assert Manifest(failed).outputs({"outputs": {"nul\0.txt": {}, "metrics.json": {}}}) == {"metrics.json": {}}


def test_a_run_folder_whose_parts_link_out_of_it_is_refused_before_any_work(previous_run, tmp_path, capsys,
                                                                            stubbed_notebooks):
    # dataset/ a link to another folder: --force removed the recorded files through it, then crashed ("Cannot call
    # rmtree on a symbolic link"), leaving the run with no dataset/ nor notebooks/
    other = tmp_path / "other"
    shutil.move(previous_run.dataset, other)
    previous_run.dataset.symlink_to(other)
    before, theirs = files_of(previous_run.root), files_of(other)
    args = ["demo", "--out", str(previous_run.root), "--set", "limit=8"]
    assert main(["run", "--check", *args, "--force"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert (f"REFUSED run directory: {previous_run.root}'s dataset is a link to {other}, out of it: a run removes and "
            f"writes files there, so it is refused, with --force too. Replace the link by a copy of what it leads to, "
            f"or give the run another folder (--out, or run_dir in a notebook)") in out, out
    assert main(["run", *args, "--force"]) == 2
    assert files_of(previous_run.root) == before and files_of(other) == theirs and stubbed_notebooks == []
    # a part linking to another part (tables -> work/scoring): --force crashed in rmtree, left a 'complete' run bare
    previous_run.dataset.unlink()
    shutil.move(other, previous_run.dataset)
    shutil.rmtree(previous_run.tables)
    previous_run.tables.symlink_to(previous_run.stage_work("scoring", False))
    before = files_of(previous_run.root)
    assert main(["run", *args, "--force"]) == 2
    assert f"{previous_run.root}'s tables is a link to {previous_run.stage_work('scoring', False)}, another of its " \
           f"parts: a run removes" in " ".join(capsys.readouterr().err.split())
    assert files_of(previous_run.root) == before and stubbed_notebooks == []
    # a record of another shape (its outputs a list): refused naming the place, nothing removed (an AttributeError once)
    with Manifest(previous_run).edit() as data:
        data["outputs"] = ["dataset/README.md"]
    with pytest.raises(DataError, match=r"manifest.json holds a list as its outputs where a mapping belongs"):
        Manifest(previous_run).outputs()
    assert main(["run", *args, "--force"]) == 2 and files_of(previous_run.root) == {
        **before, "manifest.json": files_of(previous_run.root)["manifest.json"]}
