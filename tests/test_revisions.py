"""What identifies a model's weights for the reuse of old work (revisions.model_identity)."""

import gc
import json
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import huggingface_hub
from huggingface_hub import constants

from repro import revisions
from repro.parameters import load_params_file, resolve_parameters
from repro.revisions import model_identity, run_fingerprint


def test_model_identity_is_the_hub_commit_in_the_cache(tmp_path, monkeypatch):
    # an unpinned hub id is identified by the commit its cached files come from: a newer commit is other work
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    repo = tmp_path / "models--owner--policy"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("a" * 40)
    first = model_identity("owner/policy")
    (repo / "refs" / "main").write_text("b" * 40)
    assert first == {"hub_id": "owner/policy", "commit": "a" * 40}
    assert model_identity("owner/policy") == {"hub_id": "owner/policy", "commit": "b" * 40}
    assert model_identity("owner/not-cached") == {"name": "owner/not-cached"}


def test_model_identity_of_a_hub_id_follows_its_pinned_revision(tmp_path, monkeypatch):
    # a run pinned to a commit was identified by the cache's main: two pinned runs alike, a pinned one changed as main
    # moved (the selfcheck's "same model as the run" compared main's commit)
    asked = _fake_hub(tmp_path, monkeypatch, "c" * 40)
    repo = tmp_path / "models--owner--policy"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("b" * 40)
    assert model_identity("owner/policy", "a" * 40) == {"hub_id": "owner/policy", "commit": "a" * 40}
    assert model_identity("owner/policy", "main") == model_identity("owner/policy") == {
        "hub_id": "owner/policy", "commit": "b" * 40}
    (repo / "refs" / "main").write_text("a" * 40)
    assert model_identity("owner/policy", "b" * 40) == {"hub_id": "owner/policy", "commit": "b" * 40}
    assert asked == []  # all cached: nothing asked
    # a pinned commit not cached: its config is fetched at that commit, not main's
    assert model_identity("owner/fresh", "d" * 40) == {"hub_id": "owner/fresh", "commit": "d" * 40}
    assert asked == [("owner/fresh", "config.json", "d" * 40)]


def test_model_identity_of_a_folder_is_its_content_not_its_place(tmp_path):
    one = tmp_path / "one"
    one.mkdir()
    (one / "config.json").write_text('{"hidden_size": 8}')
    two = tmp_path / "elsewhere" / "two"
    shutil.copytree(one, two)
    assert model_identity(str(one)) == model_identity(str(two))
    (two / "config.json").write_text('{"hidden_size": 16}')
    assert model_identity(str(one)) != model_identity(str(two))


def test_model_identity_of_a_folder_leaves_out_the_hubs_local_dir_metadata(tmp_path):
    # `hf download owner/rm --local-dir X` rewrites X/.cache/huggingface/ (timestamps, locks) at each download or
    # check: the same weights counted as another model (old work redone, the selfcheck "of another model")
    folder = tmp_path / "rm"
    (folder / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (folder / "config.json").write_text('{"hidden_size": 8}')
    (folder / "model.safetensors").write_bytes(b"weights")
    metadata = folder / ".cache" / "huggingface" / "download" / "config.json.metadata"
    metadata.write_text("0123\netag\n1700000000.0\n")
    first = model_identity(str(folder))
    metadata.write_text("0123\netag\n1800000000.0\n")
    (folder / ".cache" / "huggingface" / ".gitignore").write_text("*")
    assert model_identity(str(folder)) == first
    (folder / ".mine").write_text("a user's own hidden file")  # counts
    assert model_identity(str(folder)) != first
    (folder / ".mine").unlink()
    (folder / "model.safetensors").write_bytes(b"other weights")
    assert model_identity(str(folder)) != first


def _fake_hub(tmp_path, monkeypatch, commit):
    """A hub cache in `tmp_path` and a stand-in for the download of one file from the hub at `commit`."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    asked = []

    def download(repo_id, filename, revision=None):  # (a commit as `revision`: that commit, main left as it is)
        asked.append((repo_id, filename, revision))
        repo = tmp_path / f"models--{repo_id.replace('/', '--')}"
        at = revision or commit
        (repo / "snapshots" / at).mkdir(parents=True, exist_ok=True)
        (repo / "snapshots" / at / filename).write_text("{}")
        (repo / "refs").mkdir(exist_ok=True)
        if revision is None:
            (repo / "refs" / "main").write_text(commit)
        return str(repo / "snapshots" / at / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)  # (as a mirror's set-up, after repro's import)
    return asked


def test_the_local_hub_cache_is_asked_through_huggingface_hub_as_it_is_at_each_call(tmp_path, monkeypatch):
    # revisions kept huggingface_hub's downloads as they were when repro was imported: a mirror's set-up (or a test)
    # replacing them later was ignored there, and the real hub asked (24 s of retries offline)
    asked = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo_id, **kw: asked.append((repo_id, kw)) or str(tmp_path / ("e" * 40)))
    assert revisions.hub_commit("owner/rows", "v1") == "e" * 40
    assert asked == [("owner/rows", {"repo_type": "dataset", "revision": "v1", "local_files_only": True})]


def test_a_hub_model_not_yet_downloaded_is_identified_as_after_its_download(tmp_path, monkeypatch):
    # the work of a first run (which downloads the model) must be the work a re-run finds (issue 20's sixth note)
    asked = _fake_hub(tmp_path, monkeypatch, "c" * 40)
    before = model_identity("owner/fresh")
    after = model_identity("owner/fresh")  # now in the cache, as the scorer's load leaves it
    assert before == after == {"hub_id": "owner/fresh", "commit": "c" * 40}
    assert asked == [("owner/fresh", "config.json", None)]  # its config only, once: the load fetches the rest


def test_offline_a_hub_model_not_downloaded_is_known_by_its_name_and_the_hub_is_not_asked(tmp_path, monkeypatch):
    asked = _fake_hub(tmp_path, monkeypatch, "c" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_identity("owner/fresh") == {"name": "owner/fresh"}
    assert asked == []


def test_a_run_fingerprint_follows_the_code_the_notebooks_included_and_the_packages(tmp_path, monkeypatch):
    # an edited checkout kept its version: a run of its edited notebook was "complete" with the old one's outputs
    notebooks = tmp_path / "notebooks"
    # (without the checkout's own .ipynb_checkpoints/: JupyterLab makes one as `make lab` opens a notebook)
    shutil.copytree(revisions.shipped("notebooks"), notebooks, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    monkeypatch.setattr(revisions, "shipped", lambda name: tmp_path / name)
    demo = Path(__file__).resolve().parents[1] / "params" / "demo.yaml"
    resolved = resolve_parameters({**load_params_file(demo), "run_dir": "x"})
    first = run_fingerprint(resolved)
    (notebooks / ".ipynb_checkpoints").mkdir()  # JupyterLab's, as a notebook is opened: not the code
    (notebooks / ".ipynb_checkpoints" / "02_analyze-checkpoint.ipynb").write_text("{}")
    assert run_fingerprint(resolved) == first
    assert run_fingerprint({**resolved, "run_dir": "elsewhere", "run_name": "other"}) == first  # where: not what
    installed = revisions.package_versions()  # another torch (or transformers, ...): other numbers
    monkeypatch.setattr(revisions, "package_versions", lambda: {**installed, "torch": "0.0.1"})
    assert run_fingerprint(resolved) != first
    monkeypatch.setattr(revisions, "package_versions", lambda: installed)
    analyze = notebooks / "02_analyze.ipynb"
    nb = json.loads(analyze.read_text())
    for k, cell in enumerate(nb["cells"]):  # JupyterLab saves what it ran: outputs, counts, metadata; not code
        cell.setdefault("metadata", {})["collapsed"] = True
        if cell["cell_type"] == "code":
            cell.update(execution_count=k, outputs=[{"output_type": "stream", "name": "stdout", "text": ["x\n"]}])
    nb["metadata"]["widgets"] = {"state": {}}
    nb["cells"].append({"cell_type": "code", "source": [], "metadata": {}, "outputs": [], "execution_count": None})
    analyze.write_text(json.dumps(nb, indent=2))
    shutil.copyfile(analyze, notebooks / "02_analyze-Copy1.ipynb")  # JupyterLab's File > Duplicate: never run
    assert run_fingerprint(resolved) == first
    # the parameters cell edited, as the README's JupyterLab workflow does (and autosaves): `repro run` injects
    # every value, so it is not code (it made every finished run of the project "its code changed")
    cell = next(cell for cell in nb["cells"] if "parameters" in cell["metadata"].get("tags", []))
    cell["source"] = ["run_name = 'mytry'\n", *cell["source"]]
    analyze.write_text(json.dumps(nb, indent=2))
    assert run_fingerprint(resolved) == first
    code = next(cell for cell in nb["cells"] if cell["cell_type"] == "code" and "parameters" not in
                cell["metadata"].get("tags", []))
    code["source"] = ["x = 1\n", *code["source"]]
    analyze.write_text(json.dumps(nb, indent=2))
    assert run_fingerprint(resolved) != first


def test_a_run_fingerprint_leaves_out_how_the_work_runs_but_not_the_batches_nor_local_inputs_in_lists(tmp_path):
    demo = Path(__file__).resolve().parents[1] / "params" / "demo.yaml"
    resolved = resolve_parameters({**load_params_file(demo), "run_dir": "x"})
    first = run_fingerprint(resolved)
    # the same data in other processes or with the row cache off: the run is the same
    assert run_fingerprint({**resolved, "num_processes": 2, "cache": False}) == first
    assert run_fingerprint({**resolved, "batch_tokens": 4096}) != first  # other batches round otherwise
    # and so do other chunks: a chunk's rows are batched together (38 of the demo's 40 rows differed in the last bits
    # between chunk_size 2 and 5, where a complete run of another chunk_size had "nothing to do")
    assert run_fingerprint({**resolved, "chunk_size": 3}) != first
    generating = {**resolved, "generate": True}
    assert run_fingerprint({**generating, "generation_chunk_size": 3}) != run_fingerprint(generating)
    assert run_fingerprint({**resolved, "generation_chunk_size": 3}) == first  # (the demo generates nothing)
    # a local folder named in a list (04_compare's `reference`) rewritten in place is another input
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "rows.jsonl").write_text('{"prompt": "a"}\n')
    listed = {**resolved, "reference": [str(tmp_path / "ref")], "notebooks": [*resolved["notebooks"], "04_compare"]}
    before = run_fingerprint(listed)
    (tmp_path / "ref" / "rows.jsonl").write_text('{"prompt": "b"}\n')
    assert run_fingerprint(listed) != before
    # a value no notebook of the run reads is no part of it (04_compare's, 03_card's where it does not run)
    assert run_fingerprint({**resolved, "reference": [str(tmp_path / "ref")], "near_tie": 0.5}) == first
    alone = {**resolved, "notebooks": ["01_construct", "02_analyze"]}
    assert run_fingerprint({**alone, "pretty_name": "Foo"}) == run_fingerprint(alone) != first


def test_a_hub_model_counts_by_the_caches_newest_commit_unless_a_revision_pins_it(tmp_path, monkeypatch):
    assert _fake_hub(tmp_path, monkeypatch, "a" * 40) == []  # (the cache only: nothing is asked)
    demo = Path(__file__).resolve().parents[1] / "params" / "demo.yaml"
    resolved = resolve_parameters({**load_params_file(demo), "run_dir": "x"})
    assert run_fingerprint(resolved)["hub commits"] == ""  # the demo reads no hub id
    resolved["scorer_model"] = "owner/scorer"
    snapshots = tmp_path / "models--owner--scorer" / "snapshots"
    for commit in ("a" * 40, "b" * 40):
        (snapshots / commit).mkdir(parents=True)
    (snapshots.parent / "refs").mkdir()
    (snapshots.parent / "refs" / "main").write_text("a" * 40)
    first, pinned = run_fingerprint(resolved), run_fingerprint({**resolved, "scorer_revision": "a" * 40})
    branch = run_fingerprint({**resolved, "scorer_revision": "main"})
    assert first["hub commits"] == {"scorer_model": "a" * 40} == branch["hub commits"]
    # where the card is published is no input (its own download made the run build again)
    assert run_fingerprint({**resolved, "hub_repo_id": "owner/scorer"})["hub commits"] == first["hub commits"]
    (snapshots.parent / "refs" / "main").write_text("b" * 40)  # `hf download` of its newer commit
    moved = run_fingerprint(resolved)
    assert moved["hub commits"] == {"scorer_model": "b" * 40} and {**moved, "hub commits": ""} == {
        **first, "hub commits": ""}
    assert run_fingerprint({**resolved, "scorer_revision": "a" * 40}) == pinned  # a commit pins it, a branch moves
    assert run_fingerprint({**resolved, "scorer_revision": "main"})["hub commits"] == moved["hub commits"]
    shutil.rmtree(snapshots.parent)  # a cache emptied: not known, no change (a run then downloads it, or says so)
    assert run_fingerprint(resolved)["hub commits"] == ""


def test_a_code_digest_reads_code_not_docstrings_and_takes_an_empty_module(tmp_path):
    # an empty module (an __init__.py with nothing in it) raised IndexError where the digest looked for its docstring
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "m.py").write_text('"""A module."""\n\ndef f():\n    """Doc."""\n    return 1  # one\n')
    first = revisions.python_digest(tmp_path / "pkg")
    (tmp_path / "pkg" / "m.py").write_text('"""Another doc."""\n\n\ndef f():\n    return 1\n')
    assert revisions.python_digest(tmp_path / "pkg") == first
    (tmp_path / "pkg" / "m.py").write_text("def f():\n    return 2\n")
    assert revisions.python_digest(tmp_path / "pkg") != first
    (tmp_path / "pkg" / "m.py").write_text('def f():\n    """Only a docstring."""\n')
    assert revisions.python_digest(tmp_path / "pkg") != first


def test_code_digests_taken_in_threads_at_once_are_all_the_same():
    """Members of a family run as threads each key their work by the code's digest; on Python 3.11 two ast.parse at
    once from different call depths, a garbage collection switching threads mid-parse, failed "AST constructor
    recursion depth mismatch" (seen in CI). Collections here are frequent and each lets the other threads run."""
    def digest_at_depth(depth):
        return digest_at_depth(depth - 1) if depth else revisions.python_digest(*revisions.GENERATION_CODE)

    def let_others_run(phase, info):
        time.sleep(0.0005)

    threshold = gc.get_threshold()
    gc.callbacks.append(let_others_run)
    gc.set_threshold(50)
    try:
        with ThreadPoolExecutor(8) as pool:
            digests = list(pool.map(digest_at_depth, [i % 8 * 5 for i in range(64)]))
    finally:
        gc.callbacks.remove(let_others_run)
        gc.set_threshold(*threshold)
    assert set(digests) == {revisions.python_digest(*revisions.GENERATION_CODE)}
