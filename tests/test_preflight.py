"""`repro run --check` and the preflight before any notebook: every missing piece named at once."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from packaging.requirements import Requirement

from conftest import MAIN, PINNED, hub_source
from repro import subject
from repro.cli import preflight
from repro.cli import main
from repro.cli import run as cli_run
from repro.parameters import load_params_file
from repro.cli.run import resolve_parameters
from repro.errors import ParameterError
from repro.manifest import Manifest, git_commit, read_lock
from repro.paths import RunDir

ROOT = Path(__file__).resolve().parents[1]
REAL_FIND_SPEC = importlib.util.find_spec


@pytest.fixture
def bare_machine(monkeypatch, tmp_path):
    """This machine as a newcomer's: no CUDA GPU, no vLLM, no llm-blender, an empty hub cache, the hub off."""
    import huggingface_hub.constants
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("vllm", "llm_blender") else REAL_FIND_SPEC(name, *a))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


def test_check_names_the_gpu_vllm_and_the_three_downloads_in_one_message(bare_machine, capsys):
    assert main(["run", "--check", "params/part2_mini_1.yaml", "--out", str(bare_machine / "run")]) == 1
    out = capsys.readouterr().out
    head = out.splitlines()[0]
    assert "5 things to fix" in head
    for what in ("device: cuda", "generation_backend: vllm", "source: ZHLiu627/ultrafeedback_binarized_with_response_full",
                 "policy_model: alignment-handbook/zephyr-7b-sft-full", "scorer_model: llm-blender/PairRM"):
        assert what in head
    assert "no CUDA GPU" in out and "make install EXTRAS=vllm" in out
    assert "hf download ZHLiu627/ultrafeedback_binarized_with_response_full --repo-type dataset" in out
    assert "hf download alignment-handbook/zephyr-7b-sft-full --local-dir DIR" in out
    assert "hf download llm-blender/PairRM --local-dir DIR" in out
    assert "ok       disk space" in out
    assert not (bare_machine / "run").exists()


def test_the_make_install_hints_work_on_an_installed_venv(tmp_path):
    # the hints go to someone who has run make already: `make install EXTRAS=vllm` said "Nothing to be done"
    venv = tmp_path / "venv"
    venv.mkdir()
    (venv / ".installed").touch()  # newer than the lock and pyproject.toml: installed

    def plan(*given: str) -> str:
        done = subprocess.run(["make", "-n", "install", f"VENV={venv}", *given], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        return done.stdout

    assert "Nothing to be done" in plan() or plan() == ""
    extras = plan("EXTRAS=vllm")
    assert "uv pip sync" in extras and "-e '.[vllm]'" in extras
    assert f"--reinstall-package torch {preflight.CUDA_TORCH}" in plan(f"TORCH_SPEC={preflight.CUDA_TORCH}")
    assert "uv pip sync" in plan("-B")  # the dependency hint (`make install -B`): the lock synced again
    (venv / ".extras").write_text("vllm\n")  # as the install above records it
    assert "uv pip" not in plan("EXTRAS=vllm") and "uv pip" not in plan()
    # the other hint after it keeps it (the sync would remove vLLM, which the lock does not hold)
    both = plan(f"TORCH_SPEC={preflight.CUDA_TORCH}")
    assert "-e '.[vllm]'" in both and "--index-url https://download.pytorch.org/whl/cu128" in both
    (venv / ".torch-spec").write_text(preflight.CUDA_TORCH + "\n")
    assert "uv pip" not in plan() and "uv pip" in plan("TORCH_SPEC=")  # empty: the lock's CPU torch again


def test_the_cuda_torch_spec_is_not_satisfied_by_the_locks_cpu_torch_and_the_docs_give_that_spec():
    # `torch==2.13.0` admits 2.13.0+cpu (PEP 440): uv said "Checked 1 package" and kept the CPU torch, exit 0
    spec = Requirement(preflight.CUDA_TORCH.split()[0])
    assert spec.name == "torch" and not spec.specifier.contains(read_lock(ROOT / "requirements.lock")["torch"])
    for doc in ("README.md", "docs/environment.md", "docs/scoring.md", "Makefile"):
        assert f'TORCH_SPEC="{preflight.CUDA_TORCH}"' in (ROOT / doc).read_text(), doc


def fake_venv(folder: Path, torch_version: str) -> Path:
    """A .venv whose uv installs nothing (as uv did for a spec the lock's torch satisfies) and whose Python is this
    one, seeing torch `torch_version` (what uv left)."""
    site = folder / "site" / f"torch-{torch_version}.dist-info"
    site.mkdir(parents=True)
    (site / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch_version}\n")
    (folder / "venv" / "bin").mkdir(parents=True)
    scripts = {"uv": "exit 0", "python": f'[ "$1" = -m ] && exit 0  # (ipykernel: not this test\'s)\n'
                                         f'PYTHONPATH={site.parent} exec {sys.executable} "$@"'}
    for name, body in scripts.items():
        (folder / "venv" / "bin" / name).write_text(f"#!/bin/sh\n{body}\n")
        (folder / "venv" / "bin" / name).chmod(0o755)
    return folder / "venv"


def make_install(venv: Path, *given: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "install", f"VENV={venv}", *given], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("torch_version", ["2.13.0+cpu", "2.13.0+cu128"])
def test_make_install_with_a_torch_spec_fails_where_torch_is_still_the_locks(tmp_path, torch_version):
    venv = fake_venv(tmp_path, torch_version)
    (venv / ".installed").touch()  # installed before (the lock's torch): the sync takes repro out first
    done = make_install(venv, f"TORCH_SPEC={preflight.CUDA_TORCH}")
    assert f"torch {torch_version}" in done.stdout
    if torch_version.endswith("+cpu"):  # the GPU workflow went on with no CUDA torch
        assert done.returncode == 2 and "torch 2.13.0+cpu is the lock CPU build: name the build in TORCH_SPEC" \
            in done.stderr
        # no stamp left: a plain `make install` next installs again (it said "Nothing to be done", repro gone)
        assert not (venv / ".installed").exists() and not (venv / ".torch-spec").exists()
        assert "uv pip sync" in make_install(venv, "-n").stdout
    else:
        assert done.returncode == 0, done.stderr
        assert (venv / ".torch-spec").read_text() == preflight.CUDA_TORCH + "\n"


def test_make_install_refuses_a_python_other_than_the_locks_before_uv_and_a_venv_made_with_one(tmp_path):
    # python3.12: uv failed deep ("no wheels with a matching Python ABI tag (cp312)"), and the next
    # `make install PYTHON=python3.11` reused the broken .venv and failed the same way
    other = tmp_path / "python3.12"
    other.write_text("#!/bin/sh\necho 3.12\n")  # what Python 3.12 answers to the Makefile's question
    other.chmod(0o755)
    said = "is Python 3.12: needs Python 3.11: rm -rf {} && make install PYTHON=python3.11"
    done = make_install(tmp_path / "venv", f"PYTHON={other}")
    assert done.returncode == 2 and f"{other} {said.format(tmp_path / 'venv')}" in done.stderr
    assert not (tmp_path / "venv").exists()
    venv = fake_venv(tmp_path / "made", "2.13.0+cpu")
    (venv / "bin" / "python").write_bytes(other.read_bytes())  # a .venv made with Python 3.12
    done = make_install(venv, f"PYTHON={sys.executable}")
    assert done.returncode == 2 and f"{venv}/bin/python {said.format(venv)}" in done.stderr
    assert not (venv / ".installed").exists()


def test_a_missing_dependency_is_named_by_the_check_with_how_to_reinstall_it(bare_machine, capsys, monkeypatch):
    # seaborn uninstalled: "everything the run needs is here", then 01_construct failed at its first cell
    real_version = metadata.version

    def version(name: str) -> str:
        if name == "seaborn":
            raise metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(metadata, "version", version)
    assert main(["run", "--check", "demo", "--out", str(bare_machine / "run")]) == 1
    out = capsys.readouterr().out
    assert "1 thing to fix (seaborn)" in out
    assert "seaborn is not installed (a dependency of this package: reinstall with `make install -B`)" in out
    monkeypatch.setattr(preflight, "checkout_root", lambda: None)
    main(["run", "--check", "demo", "--out", str(bare_machine / "run")])
    assert "reinstall with `pip install seaborn`" in capsys.readouterr().out


def test_a_missing_llm_blender_is_a_dependency_to_reinstall_not_another_environment(bare_machine, capsys,
                                                                                    monkeypatch):
    # it said "(it needs an environment of its own, with transformers 4.57)": it is pyproject's dependency, and
    # runs on transformers 5 through repro.scorers.blender_compat
    argv = ["run", "--check", "demo", "--set", "scorer_backend=llm-blender", "--out", str(bare_machine / "run")]
    assert main(argv) == 1
    assert ("MISSING  scorer_backend: llm-blender: llm-blender is not installed (a dependency of this package: "
            "reinstall with `make install -B`), or set the backend to repro") in capsys.readouterr().out
    monkeypatch.setattr(preflight, "checkout_root", lambda: None)
    main(argv)
    assert "reinstall with `pip install llm-blender==0.0.2`), or set" in capsys.readouterr().out


def test_without_a_checkout_the_fixes_are_pip_lines(bare_machine, capsys, monkeypatch):
    # an installed wheel has no Makefile and no README beside it: "make install EXTRAS=vllm" cannot be run
    monkeypatch.setattr(preflight, "checkout_root", lambda: None)
    assert main(["run", "--check", "params/part2_mini_1.yaml", "--out", str(bare_machine / "run")]) == 1
    out = capsys.readouterr().out
    assert "make install" not in out and "README" not in out
    assert f"pip install {preflight.CUDA_TORCH}" in out
    assert "pip install vllm" in out


def test_a_run_stops_before_any_notebook_with_every_missing_piece(bare_machine, capsys, monkeypatch):
    monkeypatch.setenv("REPRO_ROW_CACHE", str(bare_machine / "cache"))
    assert main(["run", "params/part2_mini_1.yaml", "--out", str(bare_machine / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("repro run: error: ")
    assert err.count("MISSING") == 5 and "nothing was downloaded or run" in err and "--check" in err
    assert not (bare_machine / "run").exists()
    assert not (bare_machine / "cache").exists()  # "nothing has been written": the row cache's folder was


def test_processes_that_would_get_no_chunk_are_said_by_the_check_and_at_the_runs_start(bare_machine, capsys,
                                                                                        monkeypatch):
    # a process takes whole chunks: part2_mini_1's generation on 8 GPUs gave chunks per rank [1,0,1,0,0,1,0,0] (the
    # slowest 2048 prompts against an even 648), and nothing said so; the chunks decide the batches: not re-cut
    params = bare_machine / "idle.yaml"
    params.write_text(f"include: {ROOT / 'params' / 'demo.yaml'}\npart_stop: 40\nnum_processes: 8\n")
    idle = ("  IDLE     num_processes: 8 processes, 3 chunks of scoring (40 prompts, chunk_size 16): 5 would be idle, "
            "and one does 16 prompts where an even share is 5; set chunk_size ≤ 5 for all to work.")
    assert main(["run", "--check", str(params), "--out", str(bare_machine / "run")]) == 0  # (not a thing to fix)
    out = capsys.readouterr().out
    assert "everything the run needs is here" in out and idle in out.splitlines()
    monkeypatch.setattr(cli_run, "ensure_kernel", lambda name: name)
    monkeypatch.setattr(cli_run, "run_notebooks", lambda *args, **kwargs: 0)
    assert main(["run", str(params), "--out", str(bare_machine / "run")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("  parameters: ") and lines[2] == idle  # at the start, while a Ctrl-C costs nothing
    # the recipe: generation reads generation_num_processes and generation_chunk_size (scoring's 21 chunks: all work)
    main(["run", "--check", "params/part2_mini_1.yaml", "--out", str(bare_machine / "p2"), "--set",
          "generation_num_processes=8", "--set", "num_processes=8"])
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  IDLE")]
    assert said == ["  IDLE     generation_num_processes: 8 processes, 3 chunks of generation (5183 prompts, "
                    "generation_chunk_size 2048): 5 would be idle, and one does 2048 prompts where an even share is "
                    "648; set generation_chunk_size ≤ 740 for all to work (648: even shares)."]


def test_the_demo_needs_nothing_more(bare_machine, capsys):
    assert main(["run", "--check", "demo", "--out", str(bare_machine / "run")]) == 0
    out = capsys.readouterr().out
    assert "everything the run needs is here" in out and "MISSING" not in out


def test_a_hub_id_in_the_local_cache_and_a_local_path_that_is_not_there(bare_machine):
    snapshot = bare_machine / "hub" / "models--owner--scorer" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (bare_machine / "hub" / "models--owner--scorer" / "refs").mkdir()
    (bare_machine / "hub" / "models--owner--scorer" / "refs" / "main").write_text("abc123")
    values = resolve_parameters({"notebooks": ["01_construct", "02_analyze"], "source": str(bare_machine / "gone.jsonl"),
                                 "scorer_model": "owner/scorer", "dataset": "owner/elsewhere"})
    checks = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}
    assert checks["scorer_model: owner/scorer"].ok and "local hub cache" in checks["scorer_model: owner/scorer"].detail
    gone = checks[f"source: {bare_machine / 'gone.jsonl'}"]
    assert not gone.ok and "no such file or folder" in gone.detail
    elsewhere = checks["dataset: owner/elsewhere"]
    assert not elsewhere.ok and "hf download owner/elsewhere --repo-type dataset" in elsewhere.detail


def test_check_reads_a_hub_id_at_the_revision_its_parameters_pin(bare_machine, capsys):
    # source_revision pinned a commit not cached, a newer one was: --check said "in the local hub cache" (the newest
    # commit's), then the run failed offline; its hint `hf download` fetched the newest commit again
    from repro.errors import DataError, DatasetLoadError
    from repro.sources import load_source

    hub, old, new, gone = bare_machine / "hub", "a" * 40, "b" * 40, "c" * 40
    hub_source(hub, old)
    hub_source(hub, new)  # refs/main: the newest
    (hub / "datasets--someone--rows" / "refs" / "v1").write_text(old)  # a tag
    args = ["run", "--check", "demo", "--out", str(bare_machine / "run"), "--set", "source=someone/rows",
            "--set", "notebooks=[01_construct]"]

    def check(revision: str | None) -> tuple[int, str]:
        code = main(args + (["--set", f"source_revision={revision}"] if revision else []))
        return code, next(line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")
                          and "source: someone/rows" in line)

    assert check(None) == (0, "  ok       source: someone/rows: hub dataset, in the local hub cache")
    for pinned in (old, new, "v1", "main"):
        assert check(pinned) == (0, f"  ok       source: someone/rows: hub dataset at revision {pinned}, in the "
                                    f"local hub cache")
        assert len(load_source("someone/rows", "train_prefs", revision=pinned)) > 0  # as the run reads it
    for pinned in (gone, "v2"):
        code, line = check(pinned)
        assert code == 1 and line.startswith(f"  MISSING  source: someone/rows: hub dataset not in the local hub "
                                             f"cache at revision {pinned} and the hub is switched off here"), line
        assert (f"`hf download someone/rows --repo-type dataset --revision {pinned} --local-dir DIR`, then set "
                f"source to DIR and source_revision: null.") in line
        with pytest.raises(DatasetLoadError, match="someone/rows"):  # the run fails too
            load_source("someone/rows", "train_prefs", revision=pinned)
    # the shards checked are the pinned commit's: the old commit's hold no rows, the newest's are whole
    for shard in (hub / "datasets--someone--rows" / "snapshots" / old / "data").glob("*.parquet"):
        pq.write_table(pq.read_table(shard).slice(0, 0), shard)
    assert check(None)[0] == 0
    code, line = check(old)
    assert code == 1 and "hold no rows" in line, line
    with pytest.raises(DataError, match="hold no rows"):
        load_source("someone/rows", "train_prefs", revision=old)


def test_a_pinned_model_is_checked_at_its_revision_and_one_id_at_two_revisions_is_two_checks(bare_machine,
                                                                                            monkeypatch):
    from repro.errors import ModelLoadError
    from repro.revisions import pinned_model

    repo = bare_machine / "hub" / "models--owner--policy"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("b" * 40)
    values = resolve_parameters({"notebooks": ["01_construct"], "scorer_model": "owner/policy",
                                 "scorer_revision": "a" * 40, "generate": True, "policy_model": "owner/policy",
                                 "policy_revision": "c" * 40, "scorer_prompt": "chat_template",
                                 "scorer_prompt_tokenizer": "owner/policy"})
    checks = [c for c in preflight.preflight(values, bare_machine / "run") if "owner/policy" in c.what]
    # (the policy's tokenizer formats the scorer's prompts: it is read at policy_revision too)
    assert [(c.what, c.ok) for c in checks] == [("policy_model and scorer_prompt_tokenizer: owner/policy", False),
                                                ("scorer_model: owner/policy", True)]
    assert checks[0].detail.startswith(f"hub model not in the local hub cache at revision {'c' * 40}")
    assert (f"`hf download owner/policy --revision {'c' * 40} --local-dir DIR`, then set policy_model and "
            f"scorer_prompt_tokenizer to DIR and policy_revision: null.") in checks[0].detail
    assert checks[1].detail == f"hub model at revision {'a' * 40}, in the local hub cache"
    assert pinned_model("owner/policy", "a" * 40, "scorer_revision", "scorer_model").endswith("a" * 40)
    with pytest.raises(ModelLoadError, match="c" * 40):
        pinned_model("owner/policy", "c" * 40, "policy_revision", "policy_model")
    monkeypatch.setattr(preflight, "hub_offline", lambda *also: None)
    asked = []

    class Hub:  # the hub, reachable: it is asked for the pinned revision
        def repo_info(self, repo_id, **k):
            asked.append(k.get("revision"))
            return type("Info", (), {"siblings": []})()

    monkeypatch.setattr("huggingface_hub.HfApi", Hub)
    assert all(c.ok for c in preflight.input_checks(values)[0]) and asked == ["c" * 40]

    class Moved(Hub):  # no such commit there (a typo, a branch deleted)
        def repo_info(self, repo_id, **k):
            import httpx2  # (huggingface_hub's own http client)
            from huggingface_hub.errors import RevisionNotFoundError

            response = httpx2.Response(404, request=httpx2.Request("GET", "https://huggingface.co"))
            raise RevisionNotFoundError("404", response=response)

    monkeypatch.setattr("huggingface_hub.HfApi", Moved)
    (check,) = [c for c in preflight.input_checks(values)[0] if not c.ok]
    assert check.detail.startswith(f"hub model not in the local hub cache at revision {'c' * 40} and the hub has no "
                                   f"such revision: check the commit, tag or branch."), check.detail


def test_a_local_dataset_without_the_split_asked_for_is_named_before_the_run(bare_machine):
    # `--check` said "everything the run needs is here"; ten seconds into the run: "has no split 'train'"
    import datasets

    from repro.dataset_io import write_split

    folder = bare_machine / "uf"
    for split in ("train_prefs", "test_prefs"):
        write_split(datasets.Dataset.from_list([{"prompt": "p"}]), folder, split)
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder), "source_split": "train"})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"]
    assert not check.ok and check.detail == ("local dataset without split 'train' (it has ['test_prefs', "
                                             "'train_prefs']): set source_split to one of those. Did you mean "
                                             "'train_prefs'?")
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder), "source_split": "test_prefs"})
    assert {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"].ok
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder), "test_split": "test_iter",
                                 "test_rows": 5})  # a recipe's test split comes from the source too
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"]
    assert not check.ok and "without split 'test_iter' (it has ['test_prefs', 'train_prefs']): set test_split" \
        in check.detail
    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"prompt": "p"}])}).save_to_disk(bare_machine / "saved")
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(bare_machine / "saved")})
    saved = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {bare_machine / 'saved'}"]
    assert not saved.ok and "without split 'train_prefs' (it has ['train'])" in saved.detail


def test_a_saved_dataset_of_one_split_passes_the_check(bare_machine):
    # README: "a saved dataset"; --check refused one Dataset's save_to_disk folder: its state.json and
    # dataset_info.json counted as a second format beside the .arrow file ("holds data files of 2 formats")
    import datasets

    from repro.sources import load_source

    saved = bare_machine / "saved"
    datasets.Dataset.from_list([{"prompt": "p", "score_chosen": 1.0, "score_rejected": 0.0}]).save_to_disk(saved)
    for values in ({"notebooks": ["01_construct"], "source": str(saved)},
                   {"notebooks": ["01_construct"], "source": str(saved), "source_split": "test_prefs"},
                   {"notebooks": ["02_analyze"], "dataset": str(saved)}):
        checks = {c.what: c for c in preflight.preflight(resolve_parameters(values), bare_machine / "run")}
        key = "source" if "source" in values else "dataset"
        check = checks[f"{key}: {saved}"]
        assert check.ok and check.detail == "local dataset", check.line()
        # the loader reads its one Dataset whatever split is asked for, as the check lets it
        assert load_source(str(saved), values.get("source_split", "train_prefs"))["prompt"] == ["p"]


def test_a_folder_of_jsonl_files_has_the_splits_their_names_say(bare_machine, sample_dir):
    """The fixtures' train_prefs.jsonl and test_prefs.jsonl copied into a folder: --check passed, then the run failed
    ("has no split 'train_prefs'; it has ['test', 'train']": datasets reads those names as train and test)."""
    from repro.sources import load_source

    folder = bare_machine / "mydata"
    folder.mkdir()
    for name in ("train_prefs.jsonl", "test_prefs.jsonl"):
        shutil.copyfile(sample_dir / name, folder / name)
    rows = [json.loads(line) for line in (sample_dir / "test_prefs.jsonl").read_text().splitlines()]
    assert load_source(str(folder), "test_prefs")["prompt"] == [r["prompt"] for r in rows]
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder)})
    assert {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"].ok
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder), "source_split": "validation"})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"]
    assert not check.ok and check.detail == ("local dataset without split 'validation' (it has ['test', 'test_prefs', "
                                             "'train', 'train_prefs']): set source_split to one of those")
    # a name with another dot is its own split, and datasets' train: --check had passed train_prefs, the run failed
    (folder / "train_prefs.jsonl").rename(folder / "train_prefs.v2.jsonl")
    (folder / "test_prefs.jsonl").unlink()
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder)})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"]
    assert not check.ok and "without split 'train_prefs' (it has ['train', 'train_prefs.v2'])" in check.detail
    assert len(load_source(str(folder), "train_prefs.v2")) == len(load_source(str(folder), "train")) == 200


def test_a_folder_without_a_dataset_is_missing_before_the_run(bare_machine):
    # `repro selfcheck --report runs/part2_mini_1` made the folder; --check then said "ok candidate: local dataset"
    folder = bare_machine / "part2_mini_1"
    folder.mkdir()
    (folder / "selfcheck.json").write_text("{}")
    values = resolve_parameters({"notebooks": ["04_compare"], "reference": str(folder), "candidate": str(folder)})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"reference: {folder}"]
    assert not check.ok and check.detail.startswith("holds no data files (.jsonl, .json, .parquet")
    table = bare_machine / "one.csv"  # a type the loader does not read: said before the run, not at its load
    table.write_text("prompt,score_chosen\np,1\n")
    values = resolve_parameters({"notebooks": ["02_analyze"], "dataset": str(table)})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"dataset: {table}"]
    assert not check.ok and check.detail == "unsupported file type '.csv'; use .jsonl, .json or .parquet"


def test_a_source_file_of_no_rows_is_missing_before_the_run(bare_machine, capsys):
    # blank lines, a parquet of columns only: --check said "everything the run needs is here", the run "holds no rows"
    (bare_machine / "blank.jsonl").write_text("\n  \n\n")
    pq.write_table(pa.table({c: pa.array([], pa.string()) for c in ("prompt", "resp0", "resp1")}),
                   bare_machine / "zero.parquet")
    for name in ("blank.jsonl", "zero.parquet"):
        params = bare_machine / f"{name}.yaml"
        params.write_text(f"notebooks: [01_construct]\nsource: {bare_machine / name}\nsource_split: train\n"
                          "scorer_model: builtin:tiny-pairrm\ndevice: cpu\ncandidate_columns: [resp0, resp1]\n")
        assert main(["run", "--check", str(params), "--out", str(bare_machine / "run")]) == 1
        assert f"MISSING  source: {bare_machine / name}: holds no rows: give a file that has rows (or write them " \
               f"again)" in capsys.readouterr().out


def test_hub_layout_shards_of_no_rows_or_of_clashing_types_are_missing_before_the_run(bare_machine, capsys):
    # --check said "ok" of shards whose footers say 0 rows, or a column of text in one and numbers in another; the
    # run then stopped at its load ("split 'train_prefs' has no rows"), leaving a failed run folder
    row = {"prompt": "p", "resp0": "a", "resp1": "b", "chosen": "a", "rejected": "b", "score_chosen": 2.5}
    for name, second in (("empty", pa.Table.from_pylist([row]).slice(0, 0)),
                         ("mixed", pa.Table.from_pylist([{**row, "score_chosen": "1.5"}]))):
        first = pa.Table.from_pylist([row]).slice(0, 0 if name == "empty" else 1)
        for i, table in enumerate((first, second)):
            (bare_machine / name / "data").mkdir(parents=True, exist_ok=True)
            pq.write_table(table, bare_machine / name / "data" / f"train_prefs-{i:05d}-of-00002.parquet")
    snapshot = bare_machine / "hub" / "datasets--someone--mixed" / "snapshots" / "0123abcd"  # a hub id, cached
    shutil.copytree(bare_machine / "mixed", snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abcd")
    shards = r"the 2 shards of split 'train_prefs' \(data/train_prefs-00000-of-00002\.parquet, data/train_prefs-00001-" \
             r"of-00002\.parquet\) "
    said = {"empty": shards + r"hold no rows: give a dataset that has rows \(or write the split again\)$",
            "mixed": shards + r"could not be read as one dataset \(column 'score_chosen' holds string in data/\S+ and "
                              r"double in data/\S+, which datasets would cast to double without a word\)\. Every "
                              r"shard of a split must have the same columns and types, and be whole: write the split "
                              r"again \(e\.g\. Dataset\.to_parquet\), or download it again$",
            "someone/mixed": shards + r"could not be read .* these are the shards the hub publishes, so downloading "
                                      r"them again gives the same: download them \(`hf download someone/mixed "
                                      r"--repo-type dataset --local-dir DIR`\), write the split again"}
    for spec in (str(bare_machine / "empty"), str(bare_machine / "mixed"), "someone/mixed"):
        for parameter, notebook in (("source", "01_construct"), ("dataset", "02_analyze"), ("reference", "04_compare")):
            values = resolve_parameters({"notebooks": [notebook], parameter: spec, "candidate": "demo",
                                         "scorer_model": "builtin:tiny-pairrm", "device": "cpu",
                                         "candidate_columns": ["resp0", "resp1"]})
            check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"{parameter}: {spec}"]
            assert not check.ok and re.match(said[spec.rpartition("/")[2] if spec[0] == "/" else spec], check.detail)
    params = bare_machine / "empty.yaml"
    params.write_text(f"notebooks: [01_construct]\nsource: {bare_machine / 'empty'}\nscorer_model: builtin:tiny-pairrm"
                      f"\ndevice: cpu\ncandidate_columns: [resp0, resp1]\n")
    assert main(["run", "--check", str(params), "--out", str(bare_machine / "run")]) == 1
    assert f"MISSING  source: {bare_machine / 'empty'}: the 2 shards of split 'train_prefs'" in capsys.readouterr().out
    assert not (bare_machine / "run").exists()


def test_a_candidate_not_built_yet_is_to_be_built_first_by_the_params_file_beside_that_builds_it(bare_machine, capsys,
                                                                                                 monkeypatch):
    # `repro run params/verify_part2_mini_1.yaml` before the rebuild: the candidate "holds no data files"
    monkeypatch.chdir(bare_machine)
    built = bare_machine / "runs" / "rebuild"
    (bare_machine / "params").mkdir()
    rebuild = bare_machine / "params" / "rebuild.yaml"
    rebuild.write_text(f"run_dir: {built}\nlimit: 3\n")
    verify = bare_machine / "params" / "verify.yaml"
    verify.write_text(f"notebooks: [04_compare]\nreference: demo\ncandidate: {built}\n")
    check = ["run", "--check", "params/verify.yaml", "--out", str(bare_machine / "verify")]
    assert main(check) == 1
    assert (f"candidate: {built}: does not exist yet: build it first (`repro run params/rebuild.yaml`), or give the "
            f"path of a dataset") in capsys.readouterr().out
    built.mkdir(parents=True)
    (built / "selfcheck.json").write_text("{}")  # `repro selfcheck --report runs/rebuild` made the folder
    assert main(check) == 1
    assert (f"candidate: {built}: holds no dataset yet: build it first (`repro run params/rebuild.yaml`), or give the "
            f"path of a dataset") in capsys.readouterr().out
    # a run there whose 01_construct failed (a manifest, no dataset): its own message, not "holds no dataset yet"
    (built / "manifest.json").write_text('{"notebooks": {"01_construct": {"status": "failed"}}, "status": "failed"}')
    assert main(check) == 1
    assert (f"candidate: {built}: is a run directory without a dataset (no dataset/: its 01_construct has not "
            f"finished)") in capsys.readouterr().out
    # no params file beside builds it: a folder without data says so, a missing path (a typo) is a missing path
    rebuild.unlink()
    (built / "manifest.json").unlink()
    assert main(check) == 1
    out = capsys.readouterr().out
    assert f"candidate: {built}: holds no data files" in out and "build it first" not in out
    assert "verify.yaml: 1 thing to fix (candidate" in out
    verify.write_text(f"notebooks: [04_compare]\nreference: demo\ncandidate: {built}-typo\n")
    assert main(check) == 1
    out = capsys.readouterr().out
    assert f"candidate: {built}-typo: no such file or folder; give an existing path" in out
    assert "build it first" not in out


def test_the_params_file_to_build_a_candidate_is_named_quoted_for_a_shell(bare_machine, capsys, monkeypatch):
    # it said `repro run my params/rebuild é.yaml`: pasted, a params file "my"
    monkeypatch.chdir(bare_machine)
    built = bare_machine / "runs" / "rebuild"
    (bare_machine / "my params").mkdir()
    (bare_machine / "my params" / "rebuild é.yaml").write_text(f"run_dir: {built}\nlimit: 3\n")
    verify = bare_machine / "my params" / "verify.yaml"
    verify.write_text(f"notebooks: [04_compare]\nreference: demo\ncandidate: {built}\n")
    assert main(["run", "--check", str(verify), "--out", str(bare_machine / "verify")]) == 1
    assert f"build it first (`repro run 'my params/rebuild é.yaml'`)" in capsys.readouterr().out


def test_04_compare_without_a_reference_is_refused_before_the_run(bare_machine):
    values = resolve_parameters({"notebooks": ["04_compare"], "candidate": "demo"})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}["reference"]
    assert not check.ok and check.detail.startswith("Parameter reference is not set: name the published dataset")



def test_the_analysis_of_a_selm_layout_is_refused_before_the_run(bare_machine):
    # output_format: selm with the default notebooks built the data, then 02_analyze failed for want of scores
    values = resolve_parameters({"notebooks": ["01_construct", "02_analyze", "03_card"], "output_format": "selm",
                                 "scorer_model": "builtin:tiny-pairrm"})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}["02_analyze"]
    assert not check.ok and check.detail.startswith("output_format: selm writes SELM's columns, which carry no scores")
    values["notebooks"] = ["01_construct", "03_card"]
    assert "02_analyze" not in {c.what for c in preflight.preflight(values, bare_machine / "run")}


def test_the_scorer_prompts_tokenizer_is_a_need_only_when_its_template_is_used(bare_machine):
    values = resolve_parameters({"notebooks": ["01_construct"], "scorer_model": "builtin:tiny-pairrm",
                                 "scorer_prompt": "chat_template", "scorer_prompt_tokenizer": "owner/chat-tokenizer"})
    checks = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}
    assert "hf download owner/chat-tokenizer --local-dir DIR" in checks["scorer_prompt_tokenizer: owner/chat-tokenizer"].detail
    values = resolve_parameters({"notebooks": ["01_construct"], "scorer_model": "builtin:tiny-pairrm",
                                 "scorer_prompt": "raw", "scorer_prompt_tokenizer": "owner/chat-tokenizer"})
    assert not any(c.what.startswith("scorer_prompt_tokenizer") for c in preflight.preflight(values, bare_machine))


def test_the_policys_tokenizer_for_the_scorer_is_looked_for_and_fingerprinted_at_policy_revision(bare_machine,
                                                                                                   two_template_hub):
    # SPPO's recipe with policy_revision pinned and only that snapshot cached: "MISSING scorer_prompt_tokenizer"
    from repro.revisions import hub_commits

    shutil.rmtree(two_template_hub / "snapshots" / MAIN)
    (two_template_hub / "refs" / "main").unlink()
    values = resolve_parameters({"notebooks": ["01_construct"], "scorer_model": "builtin:tiny-pairrm", "generate": True,
                                 "policy_model": "fakeorg/policy", "policy_revision": PINNED,
                                 "scorer_prompt": "chat_template", "scorer_prompt_tokenizer": "fakeorg/policy"})
    (check,) = [c for c in preflight.preflight(values, bare_machine / "run") if "fakeorg/policy" in c.what]
    assert (check.what, check.ok) == ("policy_model and scorer_prompt_tokenizer: fakeorg/policy", True), check.line()
    assert check.detail == f"hub model at revision {PINNED}, in the local hub cache"
    assert hub_commits(values) == {"policy_model": PINNED, "scorer_prompt_tokenizer": PINNED}


def reachable_hub_of_a_3gb_model(monkeypatch) -> None:
    """The hub, reachable (not offline), where every repository is one 3 GB file."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(preflight, "hub_offline", lambda *also: None)

    class Hub:
        def repo_info(self, *a, **k):
            return type("Info", (), {"siblings": [type("File", (), {"size": 3 * 10**9})()]})()

    monkeypatch.setattr("huggingface_hub.HfApi", Hub)


def test_one_model_two_parameters_name_is_one_check_and_one_download(bare_machine, monkeypatch):
    # SPPO's recipe: the policy's tokenizer also formats the scorer's prompts; one `hf download`, and counted once
    values = resolve_parameters({"notebooks": ["01_construct"], "scorer_model": "builtin:tiny-pairrm", "generate": True,
                                 "policy_model": "owner/policy", "scorer_prompt": "chat_template",
                                 "scorer_prompt_tokenizer": "owner/policy"})
    (check,) = [c for c in preflight.preflight(values, bare_machine / "run") if "owner/policy" in c.what]
    assert check.what == "policy_model and scorer_prompt_tokenizer: owner/policy"
    assert "hf download owner/policy --local-dir DIR`, then set policy_model and scorer_prompt_tokenizer to DIR" \
        in check.detail
    reachable_hub_of_a_3gb_model(monkeypatch)
    checks, download = preflight.input_checks(values)
    assert [c.ok for c in checks] == [True] and download == 3 * 10**9


def test_a_notebook_reading_this_runs_dataset_needs_01_construct_or_a_built_run(bare_machine, capsys):
    # 02_analyze alone on a new run directory failed inside its kernel; now the preflight names it before any work
    out = bare_machine / "run"
    assert main(["run", "--check", "demo", "--out", str(out), "--set", "notebooks=[02_analyze, 03_card]"]) == 1
    text = capsys.readouterr().out
    assert "2 things to fix (dataset: this run's dataset; card_dataset: this run's dataset)" in text
    assert (f"MISSING  dataset: this run's dataset: {out / 'dataset'} does not exist yet: add 01_construct to "
            f"notebooks (before 02_analyze), or set dataset") in text
    # with 01_construct listed first, or a dataset named, or a run that built it, there is nothing to fix
    for notebooks, more in (("[01_construct, 02_analyze]", []), ("[02_analyze]", ["--set", "dataset=demo"])):
        assert main(["run", "--check", "demo", "--out", str(out), "--set", f"notebooks={notebooks}", *more]) == 0
    (out / "dataset").mkdir(parents=True)
    assert main(["run", "--check", "demo", "--out", str(out), "--set", "notebooks=[02_analyze]"]) == 0


def test_a_split_this_runs_dataset_will_not_have_is_refused_before_01_construct_builds_it(bare_machine, capsys):
    """`--check --set card_split=trian_prefs` (or dataset_split) said everything was here; the run built the dataset,
    then 02_analyze or 03_card refused the split. Now the check refuses it by their rule, of the splits 01_construct
    will write (its output format's, the test split beside it), and the run stops before any notebook."""
    out = bare_machine / "run"
    for key in ("card_split", "dataset_split"):
        assert main(["run", "--check", "demo", "--out", str(out), "--set", f"{key}=trian_prefs"]) == 1
        assert (f"REFUSED  {key}: Parameter {key}='trian_prefs': this run's dataset at {out / 'dataset'} will have "
                f"no such split (it will have ['train_prefs']). Did you mean 'train_prefs'? Name one of those, or "
                f"leave {key} at its default for the split 01_construct writes ('train_prefs').") \
            in capsys.readouterr().out
    assert main(["run", "demo", "--out", str(out), "--set", "card_split=trian_prefs"]) == 2
    assert "REFUSED  card_split" in capsys.readouterr().err and not out.exists()
    sppo = ["--set", "output_format=sppo", "--set", "card_split=train"]
    assert main(["run", "--check", "demo", "--out", str(out), *sppo]) == 0
    test = ["--set", "test_split=train_prefs", "--set", "test_rows=5", "--set", "test_seed=0"]
    assert main(["run", "--check", "demo", "--out", str(out), *test, "--set", "dataset_split=test_prefs"]) == 0
    capsys.readouterr()
    assert main(["run", "--check", "demo", "--out", str(out), *test, "--set", "dataset_split=tset_prefs"]) == 1
    assert "(it will have ['test_prefs', 'train_prefs']). Did you mean 'test_prefs'?" in capsys.readouterr().out


def test_a_split_the_runs_built_dataset_lacks_is_refused_before_the_run(bare_machine):
    """A run whose dataset exists, its notebooks run again without 01_construct: a split it lacks passed the check."""
    import datasets

    from repro.dataset_io import write_split

    run = RunDir(bare_machine / "run")
    for split in ("train_prefs", "test_prefs"):
        write_split(datasets.Dataset.from_list([{"prompt": "p", "score_chosen": 1.0, "score_rejected": 0.0}]),
                    run.dataset, split)
    Manifest(run).record("dataset", {"split": "train_prefs"})
    values = resolve_parameters({"notebooks": ["02_analyze", "03_card"], "card_split": "trian_prefs",
                                 "dataset_split": "test_prefs"})
    (check,) = [c for c in preflight.preflight(values, run.root) if not c.ok]  # (test_prefs: a split it has)
    assert check.what == "card_split" and check.problem == "REFUSED" and check.detail == (
        f"Parameter card_split='trian_prefs': this run's dataset at {run.dataset} has no such split (it has "
        f"['test_prefs', 'train_prefs']). Did you mean 'train_prefs'? Name one of those, or leave card_split at its "
        f"default for the split 01_construct wrote ('train_prefs').")


def test_publishing_needs_the_hub_and_a_token_before_any_work(bare_machine, monkeypatch, capsys):
    # 03_card's upload failed after 01_construct had done all the work; now the preflight names what is missing
    out = bare_machine / "run"
    publish = ["--set", "push_to_hub=true", "--set", "hub_repo_id=me/prefs"]
    assert main(["run", "--check", "demo", "--out", str(out), *publish]) == 1
    assert ("MISSING  push_to_hub: me/prefs: the Hugging Face hub is switched off (HF_HUB_OFFLINE is set): unset "
            "HF_HUB_OFFLINE on a machine with network, or set push_to_hub: false") in capsys.readouterr().out
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(bare_machine / "no-token"))
    monkeypatch.setattr("huggingface_hub.constants.HF_STORED_TOKENS_PATH", str(bare_machine / "no-tokens"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["run", "--check", "demo", "--out", str(out), *publish]) == 1
    assert "MISSING  push_to_hub: me/prefs: no Hugging Face token was found (HF_TOKEN or `hf auth login`)" \
        in capsys.readouterr().out
    monkeypatch.setenv("HF_TOKEN", "hf_test")
    assert main(["run", "--check", "demo", "--out", str(out), *publish]) == 0
    assert "ok       push_to_hub: me/prefs: a token is here" in capsys.readouterr().out
    # without 03_card in the run, nothing is published: no check
    monkeypatch.delenv("HF_TOKEN")
    assert main(["run", "--check", "demo", "--out", str(out), *publish, "--set", "notebooks=[01_construct]"]) == 0


def test_a_cuda_device_with_a_gpu_is_there(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    values = {"notebooks": ["01_construct"], "device": "cuda:1", "num_processes": 1}
    assert [c.ok for c in preflight.device_checks(values)] == [True]
    values.update(num_processes=4)  # four torchrun workers need four GPUs
    (check,) = preflight.device_checks(values)
    assert not check.ok and "needs 4 CUDA GPUs, torch sees 2" in check.detail


def test_disk_space_scales_with_the_rows_and_generated_text(monkeypatch, tmp_path):
    values = resolve_parameters(load_params_file(ROOT / "params" / "part2_mini_1.yaml"))
    small = resolve_parameters(load_params_file(ROOT / "params" / "part2_mini_1.yaml", ["limit=8"]))
    assert preflight.estimated_bytes(values) > preflight.estimated_bytes(small) >= preflight.MARGIN_BYTES
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda path: type("U", (), {"free": 10})())
    check = preflight.disk_check(small, tmp_path / "run", 0)
    assert not check.ok and "free some space" in check.detail and str(tmp_path) in check.detail


def test_the_demo_is_not_refused_for_a_gigabyte_it_does_not_write(monkeypatch, tmp_path):
    # the demo writes about 2 MB (notebooks, figures, its 40 rows); a fixed 1 GiB margin refused it on a machine
    # with a few hundred MB free
    values = resolve_parameters(load_params_file(ROOT / "params" / "demo.yaml"))
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda path: type("U", (), {"free": 300 * 10 ** 6})())
    check = preflight.disk_check(values, tmp_path / "run", 0)
    assert check.ok, check.detail


def test_the_hub_is_off_by_the_variable_that_says_so_and_its_messages_name_it(monkeypatch):
    from huggingface_hub import constants

    from repro.revisions import hub_offline
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert hub_offline() is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # huggingface_hub reads 0 as "not offline"
    assert hub_offline() is None
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    assert hub_offline() == "TRANSFORMERS_OFFLINE"
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "yes")  # only where datasets are loaded
    assert hub_offline() is None and hub_offline("HF_DATASETS_OFFLINE") == "HF_DATASETS_OFFLINE"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # set when huggingface_hub was imported
    assert hub_offline() == "HF_HUB_OFFLINE"


def test_a_folder_named_like_a_hub_id_beside_the_shell_is_judged_as_the_run_judges_it(bare_machine, monkeypatch):
    """From a shell outside the project, `source: mydata/uf` (a folder there) passed the check as a local dataset,
    and the run then looked for hub dataset 'mydata/uf'. Relative paths mean the project root for both; the check
    names the folder that exists and the path to give."""
    from repro.paths import HOME_ENV, project_root

    monkeypatch.delenv(HOME_ENV, raising=False)
    shell = bare_machine / "elsewhere"
    (shell / "mydata" / "uf").mkdir(parents=True)
    monkeypatch.chdir(shell)
    values = resolve_parameters({"notebooks": ["01_construct"], "source": "mydata/uf",
                                 "scorer_model": "builtin:tiny-pairrm", "device": "cpu"})
    assert values["source"] == "mydata/uf"  # no such folder at the project root: a hub id, as the notebook reads it
    (check,) = [c for c in preflight.preflight(values, bare_machine / "run") if c.what.startswith("source")]
    assert not check.ok and "hub dataset not in the local hub cache" in check.detail
    assert check.detail.endswith(f" Relative paths are taken from the project root ({project_root()}), not from the "
                                 f"current folder; {shell / 'mydata' / 'uf'} exists: give {shell / 'mydata' / 'uf'}.")


def test_a_complete_run_in_a_folder_one_cannot_write_has_nothing_to_do_and_work_left_there_is_refused(
        bare_machine, monkeypatch, capsys, stubbed_notebooks):
    # a colleague checks that a shared, finished run is current: `repro run --check demo` in a project they cannot
    # write was refused ("the default run directory ... cannot be written"), exit 2, though --check writes nothing
    project = bare_machine / "shared-project"
    project.mkdir()
    monkeypatch.setenv("REPRO_HOME", str(project))
    assert main(["run", "demo"]) == 0 and stubbed_notebooks == ["01_construct", "02_analyze", "03_card"]
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).is_relative_to(project) and
                        mode == os.W_OK else real_access(p, mode, **kw))  # (root writes everywhere)
    capsys.readouterr()
    for check in (["--check"], []):  # the run itself has nothing to do either, and writes nothing
        assert main(["run", *check, "demo"]) == 0 and len(stubbed_notebooks) == 3
        assert f"repro run: nothing to do: {project / 'runs' / 'demo'} holds a complete run" in capsys.readouterr().out
    # work left there (other batches) could not be done: refused, saying why
    assert main(["run", "--check", "demo", "--set", "chunk_size=8"]) == 2
    assert (f"No --out or run_dir was given, and the default run directory (runs/<name> of the project root) "
            f"{project / 'runs' / 'demo'} cannot be written ({project / 'runs' / 'demo'} is read-only, or not "
            f"yours).") in capsys.readouterr().err


def test_a_run_folder_one_cannot_read_is_refused_not_a_traceback(bare_machine, monkeypatch, capsys,
                                                                   stubbed_notebooks):
    # a colleague's private run (chmod 700): reading its selfcheck.json raised PermissionError, a traceback, where a
    # folder one cannot write was refused ("cannot be written ... read-only, or not yours")
    project = bare_machine / "shared-project"
    project.mkdir()
    monkeypatch.setenv("REPRO_HOME", str(project))
    assert main(["run", "demo"]) == 0
    run, real_access, real_open = project / "runs" / "demo", os.access, Path.open
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: not Path(p).is_relative_to(run) and
                        real_access(p, mode, **kw))  # (root reads and writes everywhere)

    def denied(path, *args, **kwargs):
        if Path(path).is_relative_to(run):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)
    monkeypatch.setattr(Path, "open", denied)
    capsys.readouterr()
    for check in (["--check"], []):
        assert main(["run", *check, "demo"]) == 2
        assert f"{run} cannot be written ({run} is read-only, or not yours)" in capsys.readouterr().err


def test_a_relative_path_missing_from_the_project_it_was_taken_from_names_the_params_file_s_project(
        bare_machine, monkeypatch, capsys):
    # `repro run --check /proj/params/mine.yaml` from a folder outside any project: `source: data/mine.jsonl` was
    # taken from the editable checkout (the path rule), and the MISSING line did not say why
    from repro.paths import HOME_ENV, PROJECT_MARKER

    monkeypatch.delenv(HOME_ENV, raising=False)
    project, shell = bare_machine / "proj", bare_machine / "shell"
    (project / "params").mkdir(parents=True)
    (project / PROJECT_MARKER).write_text("a project")
    (project / "data").mkdir()
    shutil.copy(ROOT / "tests" / "fixtures" / "ultrafeedback" / "train_prefs.jsonl", project / "data" / "mine.jsonl")
    params = project / "params" / "mine.yaml"
    params.write_text("notebooks: [01_construct]\nsource: data/mine.jsonl\nscorer_model: builtin:tiny-pairrm\n"
                      "device: cpu\n")
    shell.mkdir()
    monkeypatch.chdir(shell)
    assert main(["run", "--check", str(params), "--out", str(project / "runs" / "mine")]) == 1
    assert (f"MISSING  source: {ROOT / 'data' / 'mine.jsonl'}: no such file or folder; give an existing path or a hub "
            f"id (owner/name). The paths are read from {ROOT} (the current folder is in no project), not from "
            f"{project}, where {params.name} is: `cd` into {project} or set REPRO_HOME={project}.\n"
            ) in capsys.readouterr().out
    monkeypatch.chdir(project)  # as the hint says
    assert main(["run", "--check", str(params), "--out", str(project / "runs" / "mine")]) == 0
    (project / "data" / "mine.jsonl").unlink()  # missing from the params file's own project: no such hint
    assert main(["run", "--check", str(params), "--out", str(project / "runs" / "mine")]) == 1
    assert f"source: {project / 'data' / 'mine.jsonl'}: no such file or folder; give an existing path or a hub id " \
           f"(owner/name).\n" in capsys.readouterr().out


def test_a_folder_holding_what_a_run_writes_but_no_run_is_refused_before_anything_is_written(bare_machine, capsys):
    """`--out .` ran the demo over the project's own notebooks/; a folder of a user's files the same: a run would
    write over them, and --force remove them. Only a folder a run claims (its manifest) is a run's to replace."""
    out = bare_machine / "mine"
    (out / "notebooks").mkdir(parents=True)
    (out / "notebooks" / "01_construct.ipynb").write_text("mine")
    (out / "metrics.json").write_text('{"mine": 1}')
    (out / "notes.txt").write_text("kept")
    assert main(["run", "--check", "demo", "--out", str(out)]) == 1
    assert "holds metrics.json, notebooks/ but no manifest.json" in capsys.readouterr().out
    for more in ([], ["--force"]):
        assert main(["run", "demo", "--out", str(out), *more]) == 2
        assert "a run would write over them, so it is refused, with --force too. Give the run another folder" \
            in capsys.readouterr().err
    assert (out / "metrics.json").read_text() == '{"mine": 1}'
    assert (out / "notebooks" / "01_construct.ipynb").read_text() == "mine"
    for path in (out / "notebooks" / "01_construct.ipynb", out / "notebooks", out / "metrics.json"):
        path.unlink() if path.is_file() else path.rmdir()
    assert main(["run", "--check", "demo", "--out", str(out)]) == 0  # other files: the run writes beside them
    stopped = bare_machine / "stopped"  # Ctrl-C before the manifest: the run's lock and an empty notebooks/
    (stopped / "notebooks").mkdir(parents=True)
    RunDir(stopped).lock.write_text("")
    assert main(["run", "--check", "demo", "--out", str(stopped)]) == 0
    # a run's manifest.json deleted by hand, its outputs and its emptied lock left: refused as without the lock (the
    # lock is no record: a run leaves it behind, from its first moment)
    (stopped / "notebooks" / "01_construct.ipynb").write_text("{}")
    assert main(["run", "--check", "demo", "--out", str(stopped)]) == 1
    assert "holds notebooks/ but no manifest.json" in capsys.readouterr().out
    with pytest.raises(ParameterError, match="holds notebooks/ but no manifest.json"):
        subject.claim(RunDir(ROOT), None, "run_dir", building=True)  # a notebook on its own: the same rule


def test_a_folder_that_cannot_be_written_is_missing_before_the_run(bare_machine, monkeypatch, capsys):
    out = bare_machine / "ro" / "run"
    out.parent.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == out.parent and mode == os.W_OK
                        else real_access(p, mode, **kw))  # a read-only mount, as root sees one too
    assert main(["run", "--check", "demo", "--out", str(out)]) == 2
    assert f"--out {out} cannot be written ({out.parent} is read-only, or not yours)" in capsys.readouterr().err
    # no --out, nor run_dir, given (a read-only checkout): it said "--out .../runs/demo cannot be written"
    monkeypatch.setenv("REPRO_HOME", str(out.parent))
    for params, folder in (("demo.yaml", "demo"), ("demo_family.yaml", "demo_family")):  # a family's folder too
        assert main(["run", "--check", str(ROOT / "params" / params)]) == 2
        assert (f"No --out or run_dir was given, and the default run directory (runs/<name> of the project root) "
                f"{out.parent / 'runs' / folder} cannot be written ({out.parent} is read-only, or not yours). A run "
                f"directory holds a run's notebooks, data and manifest: give one that can be written with --out (or "
                f"run_dir).") in capsys.readouterr().err


def test_a_read_only_home_is_refused_before_the_run_naming_each_cache_it_would_write_and_its_variable(
        bare_machine, monkeypatch, capsys):
    # a compute node's read-only HOME: --check said "everything the run needs is here", then the demo failed in
    # 01_construct's load (datasets' cache, ~/.cache/huggingface/datasets: "OSError: [Errno 30] Read-only file
    # system"), and with HF_HOME moved, in its scoring (the stand-in scorer is built into ~/.cache/repro)
    import datasets.config
    import huggingface_hub.constants

    home = bare_machine / "home"
    home.mkdir(mode=0o555)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == home and mode == os.W_OK
                        else real_access(p, mode, **kw))  # (root writes into a 0o555 folder: as a read-only mount)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("REPRO_CACHE", raising=False)
    hf = home / ".cache" / "huggingface"  # where datasets and the hub put their caches under this HOME
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(hf / "datasets"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hf / "hub"))
    monkeypatch.setattr(cli_run, "ensure_kernel", lambda name: name)
    monkeypatch.setattr(cli_run, "run_notebooks", lambda *args, **kwargs: 0)  # (a run that started: rc 0)
    out = bare_machine / "run"
    unwritable = f"cannot be written ({home} is read-only, or not yours)"
    assert main(["run", "demo", "--out", str(out), "--set", "limit=8"]) == 2
    err = capsys.readouterr().err
    assert "2 things to fix (datasets cache; stand-in models' cache)" in err
    assert f"REFUSED  datasets cache: {hf / 'datasets'} {unwritable}: set HF_HOME or HF_DATASETS_CACHE" in err
    assert f"REFUSED  stand-in models' cache: {home / '.cache' / 'repro'} {unwritable}: set REPRO_CACHE" in err
    assert not out.exists()  # nothing written
    # HF_HOME moved to a folder that can be written: the stand-in's cache is left, and --check says so too
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(bare_machine / "hf" / "datasets"))
    assert main(["run", "--check", "demo", "--out", str(out), "--set", "limit=8"]) == 1
    said = capsys.readouterr().out
    assert "1 thing to fix (stand-in models' cache)" in said and f"ok       datasets cache: {bare_machine}" in said
    # a hub scorer in the hub cache builds no stand-in (the policy is not read without generate): nothing to fix
    snapshot = bare_machine / "hub" / "models--owner--scorer" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("abc123")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(bare_machine / "hub"))
    assert main(["run", "--check", "demo", "--out", str(out), "--set", "scorer_model=owner/scorer"]) == 0
    assert "stand-in" not in capsys.readouterr().out
    # a hub input to download goes into the hub cache, under HOME unless HF_HOME or HF_HUB_CACHE moves it
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hf / "hub"))
    reachable_hub_of_a_3gb_model(monkeypatch)
    assert main(["run", "--check", "demo", "--out", str(out), "--set", "scorer_model=owner/scorer"]) == 1
    assert f"REFUSED  hub cache: {hf / 'hub'} {unwritable}: set HF_HOME or HF_HUB_CACHE" in capsys.readouterr().out


def test_a_read_only_stand_ins_cache_holding_the_run_s_stand_ins_is_accepted_and_one_lacking_them_refused(
        bare_machine, monkeypatch, capsys):
    # a cluster's admin builds the stand-ins once into a shared REPRO_CACHE and makes it read-only: --check refused it
    # as unwritable, though a run only reads a stand-in built (and the folder built was mkdtemp's 0700: no one else's)
    import datasets.config

    from repro.construct.generation import resolve_policy
    from repro.scorers.tiny import build_builtin

    shared = bare_machine / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # as /tmp is: anyone writes the folder, no one else the stand-ins built in it
    monkeypatch.setenv("REPRO_CACHE", str(shared))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(bare_machine / "datasets"))
    built = [build_builtin("builtin:tiny-pairrm"), Path(resolve_policy("builtin:tiny-policy", None).path)]
    assert [folder.stat().st_mode & 0o777 for folder in built] == [0o755, 0o755]  # other users read them
    for path in [shared, *shared.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)  # chmod -R a-w
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).is_relative_to(shared) and mode == os.W_OK
                        else real_access(p, mode, **kw))  # (root writes into a 0o555 folder: as a read-only mount)
    out = str(bare_machine / "run")
    for params in ("demo", "demo_generate"):  # (the scorer; the policy and the scorer)
        assert main(["run", "--check", params, "--out", out]) == 0
        assert (f"ok       stand-in models' cache: {shared} (holds the stand-ins this run reads; REPRO_CACHE moves "
                f"it)") in capsys.readouterr().out
    # a stand-in it lacks would be built there: refused as before
    for params, lacking in (("demo", "scorer_model=builtin:tiny-reward-llama"),
                            ("demo_generate", "policy_model=builtin:tiny-policy-1b")):
        assert main(["run", "--check", params, "--out", out, "--set", lacking]) == 1
        assert (f"REFUSED  stand-in models' cache: {shared} cannot be written ({shared} is read-only, or not yours): "
                f"set REPRO_CACHE to a folder that can be written") in capsys.readouterr().out


def test_check_refuses_a_stand_in_the_run_reads_that_cannot_be_read(bare_machine, monkeypatch, capsys):
    # another user's stand-in, its weights 0600 (as safetensors wrote them): --check said "ok stand-in models' cache",
    # then the run failed loading it with "FileNotFoundError: No such file or directory" (a permission error)
    import datasets.config

    from repro.scorers.tiny import build_builtin

    monkeypatch.setenv("REPRO_CACHE", str(bare_machine / "shared"))
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(bare_machine / "datasets"))
    built = build_builtin("builtin:tiny-pairrm")
    denied = built / "model.safetensors"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == denied and mode & os.R_OK
                        else real_access(p, mode, **kw))  # (root reads everything: os.access says what a user may)
    assert main(["run", "--check", "demo", "--out", str(bare_machine / "run")]) == 1
    assert (f"REFUSED  stand-in models' cache: permission denied: {denied} cannot be read by you. Ask its owner to "
            f"make the stand-in readable (chmod -R a+rX {built}), or set REPRO_CACHE to a folder of your own, where "
            f"repro builds the stand-ins it needs.") in capsys.readouterr().out


def test_a_relative_cache_variable_names_one_folder_to_the_check_and_to_the_run(bare_machine, monkeypatch, capsys):
    # REPRO_CACHE=stand-ins typed in another folder than the project root: the check looked at the shell's folder,
    # the notebooks' kernels (run in the project root) used the project root's: the check passed a folder not used
    import datasets.config

    shell = bare_machine / "shell"
    shell.mkdir()
    monkeypatch.chdir(shell)
    for variable, folder in (("REPRO_CACHE", "stand-ins"), ("HF_DATASETS_CACHE", "datasets-cache")):
        monkeypatch.setenv(variable, folder)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", "datasets-cache")  # (as datasets read it at its import)
    kernels = {}
    monkeypatch.setattr(cli_run, "ensure_kernel", lambda name: name)
    monkeypatch.setattr(cli_run, "run_notebooks", lambda *args, **kwargs: kernels.update(os.environ) or 0)
    assert main(["run", "--check", "demo", "--out", str(bare_machine / "run")]) == 0
    said = capsys.readouterr().out
    assert f"ok       datasets cache: {shell / 'datasets-cache'} (HF_HOME" in said
    assert f"ok       stand-in models' cache: {shell / 'stand-ins'} (REPRO_CACHE" in said
    assert main(["run", "demo", "--out", str(bare_machine / "run")]) == 0
    assert (kernels["REPRO_CACHE"], kernels["HF_DATASETS_CACHE"]) == (str(shell / "stand-ins"),
                                                                       str(shell / "datasets-cache"))


def test_a_run_from_another_folder_reads_its_stand_ins_from_a_read_only_cache_a_relative_path_names(
        repro_run, tmp_path, monkeypatch):
    # the two above, in a real run: the stand-in only read (the cache's files and folders as they were, as root too),
    # and the relative caches the shell's, none made in the project root
    from repro.scorers.tiny import build_builtin

    shell, names = tmp_path / "shell", {"REPRO_CACHE": "shared-stand-ins", "HF_DATASETS_CACHE": "datasets-cache"}
    monkeypatch.setenv("REPRO_CACHE", str(shell / names["REPRO_CACHE"]))
    build_builtin("builtin:tiny-pairrm")
    shared = shell / names["REPRO_CACHE"]
    for path in [shared, *shared.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)  # chmod -R a-w
    before = [(path, path.stat().st_mtime_ns) for path in [shared, *shared.rglob("*")]]
    done = repro_run("demo", "--out", tmp_path / "run", "--set", "limit=8", "--set", "notebooks=[01_construct]",
                     cwd=shell, env={**os.environ, **names})
    assert done.returncode == 0, done.stderr[-3000:]
    assert [(path, path.stat().st_mtime_ns) for path in [shared, *shared.rglob("*")]] == before
    assert (shell / names["HF_DATASETS_CACHE"]).is_dir()
    assert not [name for name in names.values() if (ROOT / name).exists()]


def test_a_revision_pinned_for_a_local_folder_or_a_stand_in_is_refused_before_the_run(bare_machine, capsys):
    # the advice half followed (`hf download ... --revision v1 --local-dir DIR`, source set to DIR, source_revision
    # left at v1): --check said "everything the run needs is here", then the run failed and left a failed run folder
    import datasets

    from repro.dataset_io import write_split
    from repro.sources import load_source

    folder = bare_machine / "rows"
    write_split(datasets.Dataset.from_list([{"prompt": "p", "chosen": "a", "rejected": "b"}]), folder, "train_prefs")
    out = bare_machine / "runs" / "rvl"
    args = ["run", "demo", "--set", f"source={folder}", "--set", "source_revision=v1", "--set", "limit=4",
            "--set", "notebooks=[01_construct]", "--out", str(out)]
    with pytest.raises(ParameterError) as run_refusal:  # as the run itself refuses it
        load_source(str(folder), "train_prefs", revision="v1")
    assert main([*args, "--check"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "1 thing to fix (source_revision)" in lines[0], lines[0]
    assert f"  REFUSED  source_revision: {run_refusal.value}" in lines, lines
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "set source_revision: null" in err and "nothing was downloaded or run" in err
    assert not out.exists()
    # a model's revision too, for a local folder or a built-in stand-in; policy_revision only where it generates
    values = {"notebooks": ["01_construct"], "source": str(folder), "scorer_model": "builtin:tiny-pairrm",
              "scorer_revision": "v1", "policy_model": str(folder), "policy_revision": "v2"}
    refused = {c.what: c.detail for c in preflight.preflight(resolve_parameters(values), out) if not c.ok}
    assert list(refused) == ["scorer_revision"]
    assert refused["scorer_revision"].startswith("scorer_revision='v1' pins a hub commit, but "
                                                 "scorer_model='builtin:tiny-pairrm' is not a hub id")
    refused = {c.what: c.detail for c in preflight.preflight(resolve_parameters({**values, "generate": True}), out)
               if not c.ok}
    assert list(refused) == ["policy_revision", "scorer_revision", f"policy_model: {folder}"]  # (rows, not a model)
    assert f"policy_model={str(folder)!r} is not a hub id" in refused["policy_revision"]
    assert refused[f"policy_model: {folder}"].startswith(f"policy_model folder {folder} has no config.json")


def test_a_mistyped_split_of_a_folder_of_shards_is_told_the_split_names_not_file_stems(bare_machine):
    """A folder of train_prefs-00000-of-00002.parquet ... (no data/): --check listed 'train_prefs-00000',
    'train_prefs-00000-of', 'train_prefs-00000-of-00001' among its splits, its files' names cut at each '-'."""
    import datasets

    folder = bare_machine / "shards"
    folder.mkdir()
    for name in ("train_prefs-00000-of-00002", "train_prefs-00001-of-00002", "test_prefs-00000-of-00001"):
        datasets.Dataset.from_list([{"prompt": name}]).to_parquet(folder / f"{name}.parquet")
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder), "source_split": "train_pref"})
    check = {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"]
    assert not check.ok and check.detail == ("local dataset without split 'train_pref' (it has ['test', 'test_prefs', "
                                             "'train', 'train_prefs']): set source_split to one of those. Did you "
                                             "mean 'train_prefs'?")
    values = resolve_parameters({"notebooks": ["01_construct"], "source": str(folder)})
    assert {c.what: c for c in preflight.preflight(values, bare_machine / "run")}[f"source: {folder}"].ok


def test_generating_without_a_policy_is_refused_by_the_check(tmp_path, sample_dir, capsys):
    """`repro run --check uf.yaml --set generate=true --set policy_model=null` said "everything the run needs is
    here"; the notebook then loaded and sliced the source before saying "policy_model is not set"."""
    params = tmp_path / "uf.yaml"
    params.write_text(f"source: {sample_dir / 'train_prefs.jsonl'}\nscorer_model: builtin:tiny-pairrm\ndevice: cpu\n")
    args = ["run", "--check", str(params), "--out", str(tmp_path / "run"), "--set", "generate=true",
            "--set", "policy_model=null", "--set", "candidate_columns=[resp0,resp1]"]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert "everything the run needs is here" not in out
    assert "policy_model is not set, but the generation stage needs a policy: give a hub id" in err, err
    assert main([*args[:-4], "--set", "policy_model=builtin:tiny-policy", *args[-2:]]) == 0  # (given: the check's)
    assert not (tmp_path / "run").exists()


def test_a_local_model_folder_the_loaders_cannot_read_is_missing_before_the_run(bare_machine, capsys,
                                                                                 tiny_pairrm_dir):
    """`repro run --check demo_generate --set scorer_model=<a hub cache's models--llm-blender--PairRM>` said "ok
    scorer_model: local model"; the run generated every candidate, then failed: "has no config.json". An empty
    folder, one without weights, a YAML file and a policy folder the same: each is named as its loader names it."""
    from repro.errors import ModelLoadError
    from repro.scorers import detect_kind

    repo = bare_machine / "hub-copy" / "models--llm-blender--PairRM"
    for part in ("blobs", "refs", "snapshots/abc123"):
        (repo / part).mkdir(parents=True)
    (empty := bare_machine / "empty").mkdir()
    no_weights = shutil.copytree(tiny_pairrm_dir, bare_machine / "no-weights")
    (no_weights / "model.safetensors").unlink()
    (no_weights / "repro_stand_in.json").unlink()
    (params := bare_machine / "params.yaml").write_text("a: 1\n")
    for model, words in ((repo, "has no config.json"), (empty, "has no config.json"), (no_weights, "has no weights"),
                         (params, "is not a directory")):
        with pytest.raises(ModelLoadError, match=words):  # what the run would have said, after generating
            detect_kind(str(model))
        assert main(["run", "--check", "demo_generate", "--out", str(bare_machine / "run"),
                     "--set", f"scorer_model={model}"]) == 1
        lines = capsys.readouterr().out.splitlines()
        assert "1 thing to fix (scorer_model: " in lines[0]
        (line,) = [line for line in lines if line.startswith(f"  MISSING  scorer_model: {model}: ")]
        assert words in line and "scorer_model" in line.split(f"{model}: ", 1)[1]
        if model == repo:  # a hub cache's folder of a repository: its snapshot is the checkpoint
            assert f"{repo / 'snapshots'}/<commit>" in line
    assert main(["run", "--check", "demo_generate", "--out", str(bare_machine / "run"),
                 "--set", f"policy_model={empty}"]) == 1
    out = capsys.readouterr().out
    assert f"  MISSING  policy_model: {empty}: policy_model folder {empty} has no config.json" in out


def test_a_scorer_that_runs_its_models_own_code_is_said_by_the_check_and_at_the_runs_start(bare_machine, capsys,
                                                                                          monkeypatch):
    """A colleague's params file with `scorer_options: {trust_remote_code: true}` has the scorer run the Python files
    of its model's folder; `repro run --check` and the run's first lines said nothing of it."""
    params = bare_machine / "remote.yaml"
    params.write_text(f"include: {ROOT / 'params' / 'demo.yaml'}\nscorer_model: builtin:tiny-reward-llama\n"
                      "scorer_kind: sequence_classifier\nscorer_options: {trust_remote_code: true}\nscorers:\n"
                      "  - {name: second, model: builtin:tiny-reward-deberta, options: {trust_remote_code: true}}\n")
    notes = [f"  NOTE     {what}: trust_remote_code: true runs the Python code that comes with {model} (its folder or "
             "hub repository) on this machine as you: keep it only for a model whose code you have read or trust."
             for what, model in (("scorer_options", "builtin:tiny-reward-llama"),
                                 ("scorers[second].options", "builtin:tiny-reward-deberta"))]
    assert main(["run", "--check", str(params), "--out", str(bare_machine / "run")]) == 0  # (not a thing to fix)
    out = capsys.readouterr().out.splitlines()
    assert "everything the run needs is here" in out[0] and [line for line in out if "NOTE" in line] == notes
    monkeypatch.setattr(cli_run, "ensure_kernel", lambda name: name)
    monkeypatch.setattr(cli_run, "run_notebooks", lambda *args, **kwargs: 0)
    assert main(["run", str(params), "--out", str(bare_machine / "run")]) == 0
    assert capsys.readouterr().out.splitlines()[2:4] == notes  # at the start, while a Ctrl-C costs nothing
    params.write_text(f"include: {ROOT / 'params' / 'demo.yaml'}\n")
    assert main(["run", "--check", str(params), "--out", str(bare_machine / "run2")]) == 0
    assert "NOTE" not in capsys.readouterr().out


def test_a_checkout_git_refuses_as_another_users_is_said_by_the_check_and_at_the_runs_start(bare_machine, capsys,
                                                                                           monkeypatch):
    """Docker as root on a bind mount of the host's checkout, a lab's shared checkout: git refuses it ("detected
    dubious ownership"), the run recorded commit null, and its card said commit `unknown` without a word of why. git's
    check is kept (it keeps the repository's hooks from running): the run says how to let git read it."""
    fake = bare_machine / "bin" / "git"  # git's own refusal, whatever it is asked (a checkout another user owns)
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nprintf \"fatal: detected dubious ownership in repository at '%s'\\nTo add an exception "
                    "for this directory, call:\\n\\n\\tgit config --global --add safe.directory %s\\n\" \"$PWD\" "
                    "\"$PWD\" >&2\nexit 128\n")
    fake.chmod(0o755)
    path = os.environ["PATH"]
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{path}")
    assert git_commit() == {"commit": None, "dirty": None}  # what the run records, as before
    note = (f"  NOTE     checkout: git refuses the checkout at {ROOT} as owned by another user, so the run records no "
            f"commit (its card says commit unknown): `git config --global --add safe.directory {ROOT}` lets it")
    with pytest.raises(SystemExit):  # `repro --version` said "git commit None" without a word of why
        main(["--version"])
    assert capsys.readouterr().out.strip().endswith(f"git commit None: git refuses the checkout at {ROOT} as owned by "
                                                    f"another user, so the run records no commit (its card says "
                                                    f"commit unknown): `git config --global --add safe.directory "
                                                    f"{ROOT}` lets it)")
    assert main(["run", "--check", "demo", "--out", str(bare_machine / "run")]) == 0  # (not a thing to fix)
    out = capsys.readouterr().out.splitlines()
    assert "everything the run needs is here" in out[0] and [line for line in out if "NOTE" in line] == [note]
    monkeypatch.setattr(cli_run, "ensure_kernel", lambda name: name)
    monkeypatch.setattr(cli_run, "run_notebooks", lambda *args, **kwargs: 0)
    assert main(["run", "demo", "--out", str(bare_machine / "run")]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [note]  # at the start, once
    monkeypatch.setenv("PATH", path)
    assert main(["run", "--check", "demo", "--out", str(bare_machine / "run2")]) == 0  # git reads it: nothing said
    assert "NOTE" not in capsys.readouterr().out
