import json
import re
import shutil
import subprocess
import sys

import pytest

from repro.errors import DataError, Interrupted, ParameterError
from repro.manifest import Manifest, find_selfcheck, git_commit, selfcheck_summary, sha256_file
from repro.paths import STAND_IN_MARKER, RunDir
from repro.revisions import model_identity
from repro.scorers.tiny import build_tiny_pairrm
from repro.subject import refuse_unbuilt


def test_stage_records_timing_counts_and_failure(tmp_path):
    m = Manifest(tmp_path)
    m.start_run({"a": 1}, ["01_construct"])
    with m.stage("load") as info:
        info["rows"] = 3
    m.set_counts(source=3)
    data = m.read()
    assert data["status"] == "running" and data["stages"]["load"]["status"] == "done"
    assert data["stages"]["load"]["rows"] == 3 and data["counts"]["source"] == 3
    assert data["environment"]["packages"]["datasets"]
    with pytest.raises(RuntimeError):
        with m.stage("score"):
            raise RuntimeError("boom")
    data = m.read()
    assert data["stages"]["score"]["status"] == "failed" and "boom" in data["stages"]["score"]["error"]
    assert data["status"] == "failed"  # a failed stage never leaves the run looking complete


def test_an_interrupted_stage_says_in_one_line_what_is_kept_and_how_to_go_on(tmp_path):
    # Interrupt Kernel in JupyterLab during scoring showed a 275-line KeyboardInterrupt traceback, and nothing said
    # that the finished chunks were safe
    m = Manifest(tmp_path)
    m.start_run({"a": 1}, ["01_construct"])
    (tmp_path / "work" / "scoring").mkdir(parents=True)
    for k in range(3):
        (tmp_path / "work" / "scoring" / f"chunk-{k:06d}.json").write_text("[]")
    with pytest.raises(KeyboardInterrupt) as caught:
        with m.stage("score"):
            raise KeyboardInterrupt
    assert isinstance(caught.value, Interrupted)
    assert caught.value._render_traceback_() == [
        f"\x1b[0;31mInterrupted\x1b[0m: stage 'score': 3 finished chunks (every stage's) are safe in {tmp_path / 'work'}; run the "
        f"notebook again to continue."]
    assert m.read()["stages"]["score"]["status"] == "interrupted" and m.read()["status"] == "interrupted"
    # (it read "stage 'score' interrupted: KeyboardInterrupt: ", nothing after the colon)
    data = m.read()
    assert (data["error"], data["stages"]["score"]["error"]) == ("stage 'score' interrupted: KeyboardInterrupt",
                                                                 "KeyboardInterrupt")


@pytest.mark.parametrize("record, said", [
    ([], 'a list as its notebooks["01_construct"] where a mapping'),
    (None, 'null as its notebooks["01_construct"] where a mapping'),
    ({"status": ["done"]}, 'a list as its notebooks["01_construct"]["status"] where text'),
    ({"status": 3}, '3 as its notebooks["01_construct"]["status"] where text'),
    ({"status": "done", "parameters": "x"}, '"x" as its notebooks["01_construct"]["parameters"] where a mapping'),
    ({"status": "failed", "error": {"a": 1}}, 'a mapping as its notebooks["01_construct"]["error"] where text'),
    ({"status": "running", "executed": 3}, '3 as its notebooks["01_construct"]["executed"] where text')])
def test_a_notebook_record_of_the_wrong_shape_is_refused_naming_the_notebook_and_field(tmp_path, record, said):
    """A notebook's record that is an empty list (or null), or whose status, parameters, error or executed is of
    another type, passed `read`: `repro run` on the folder then raised a bare AttributeError or TypeError ('list' object
    has no attribute 'get', 'str' object is not a mapping), 02_analyze one of its dataset ('unhashable type: list').
    Now each is refused as a damaged manifest.json, naming the notebook and the field."""
    m = Manifest(tmp_path)
    m.start_run({"source": "demo"}, ["01_construct"])
    m.notebook_status("01_construct", "running")
    m.finish_run("failed")  # (a kernel that died: its record's error is null, as finish_run writes it)
    assert m.read()["notebooks"]["01_construct"]["error"] is None
    with m.edit() as data:
        data["notebooks"]["01_construct"] = record
    for reads in (m.read, lambda: m.changed_parameters({"source": "demo"}, ["01_construct"]),
                  lambda: refuse_unbuilt(RunDir(tmp_path), None)):
        with pytest.raises(DataError, match=re.escape(f"{m.path} holds {said} belongs, not a run's record: restore")):
            reads()


def test_outputs_are_hashed(tmp_path):
    (tmp_path / "f.txt").write_text("hello")
    m = Manifest(tmp_path)
    m.add_outputs(tmp_path / "f.txt")
    out = m.read()["outputs"]["f.txt"]
    assert out["sha256"] == sha256_file(tmp_path / "f.txt") and out["bytes"] == 5


def test_standalone_notebook_completes_and_merges_parameters(tmp_path):
    m = Manifest(tmp_path)
    m.ensure_started({"source": "demo"}, "01_construct")
    m.notebook_ended("01_construct")
    assert m.read()["status"] == "complete"
    m.ensure_started({"bootstrap_resamples": 10}, "02_analyze")
    data = m.read()
    assert data["parameters"] == {"source": "demo", "bootstrap_resamples": 10}
    assert data["status"] == "running"
    m.notebook_ended("02_analyze")
    assert json.loads((tmp_path / "manifest.json").read_text())["status"] == "complete"


def test_01_construct_run_again_counts_only_the_stages_this_attempt_reached(tmp_path):
    # 01_construct's "Rows at each stage" table, right after the slice of an attempt, listed an earlier attempt's
    # with_candidates beside this one's sliced rows; they are counted afresh from its load stage (its setup cell
    # alone, begin, erases nothing: a complete run's counts were lost in JupyterLab)
    from repro.construct import stages
    from repro.parameters import ConstructParams

    params = ConstructParams(run_dir=str(tmp_path), source="demo", scorer_model="builtin:tiny-pairrm")
    m = stages.begin(params).manifest
    m.set_counts(source=40, sliced=40, with_candidates=39)
    m.notebook_ended("01_construct", "interrupted")
    ctx = stages.begin(params)
    assert m.read()["counts"]["with_candidates"] == 39
    stages.slice_rows(ctx, stages.load(ctx))
    assert m.read()["counts"] == {"source": 40, "part": 40, "dropped": 0, "after_drop": 40, "sliced": 40}
    m.notebook_ended("01_construct")
    m.ensure_started({"bootstrap_resamples": 10}, "02_analyze")  # a later notebook keeps 01_construct's counts
    assert m.read()["counts"]["sliced"] == 40


def test_a_notebook_alone_keeps_the_runs_name(tmp_path):
    # 02_analyze opened in JupyterLab with run_dir set kept the notebook's default run_name ('demo'), which
    # replaced the run's, so the same `repro run` was then refused for "run_name ('demo' there, 'foo' now)"
    m = Manifest(tmp_path)
    built = {"run_name": "foo", "run_dir": str(tmp_path), "source": "demo", "bootstrap_resamples": 1000}
    m.start_run(built, ["01_construct", "02_analyze"])
    for name in ("01_construct", "02_analyze"):
        m.notebook_status(name, "done")
    m.finish_run("complete")
    with m.notebook({"run_name": "demo", "run_dir": str(tmp_path), "bootstrap_resamples": 1000}, "02_analyze"):
        pass
    assert m.read()["parameters"] == built
    assert m.changed_parameters({**built, "run_name": "bar"}, ["01_construct", "02_analyze"]) == {}


def test_a_parameter_two_notebooks_read_is_recorded_for_each(tmp_path):
    # 02_analyze and 04_compare both read bootstrap_resamples; 04_compare added with 300 replaced the 1000 that
    # 02_analyze used, and a re-run of the construction's params file was then refused for it
    m = Manifest(tmp_path)
    m.start_run({"source": "demo", "bootstrap_resamples": 1000}, ["01_construct", "02_analyze"])
    for name in ("01_construct", "02_analyze"):
        m.notebook_status(name, "done")
    m.finish_run("complete")
    m.start_run({"source": "other", "bootstrap_resamples": 300, "reference": "ref"}, ["04_compare"], merge=True)
    data = m.read()
    assert data["parameters"] == {"source": "demo", "bootstrap_resamples": 1000, "reference": "ref"}
    assert data["notebooks"]["04_compare"]["parameters"] == {"bootstrap_resamples": 300}
    built = {"source": "demo", "bootstrap_resamples": 1000, "reference": None}
    assert m.changed_parameters(built, ["01_construct", "02_analyze"]) == {}
    assert m.changed_parameters({**built, "reference": "ref", "bootstrap_resamples": 300}, ["04_compare"]) == {}
    assert m.changed_parameters({**built, "reference": "ref"}, ["04_compare"]) == {"bootstrap_resamples": (300, 1000)}
    assert m.changed_parameters({**built, "bootstrap_resamples": 300}, ["02_analyze"]) == {
        "bootstrap_resamples": (1000, 300)}


def test_a_failed_notebook_does_not_bind_its_parameters_but_the_construction_does(tmp_path):
    # 04_compare added without a reference failed in the notebook; the corrected command (a reference now) was then
    # refused for "reference (null there, ...)" and needed --force, as if the failed comparison were a result to keep
    m = Manifest(tmp_path)
    built = {"source": "demo", "bootstrap_resamples": 1000, "reference": None}
    m.start_run(built, ["01_construct", "02_analyze"])
    for name in ("01_construct", "02_analyze"):
        m.notebook_status(name, "done")
    m.finish_run("complete")
    m.start_run(built, ["04_compare"], merge=True)
    m.notebook_status("04_compare", "failed")
    m.finish_run("failed", "ParameterError: Parameter reference is not set")
    assert m.changed_parameters({**built, "reference": "ref"}, ["04_compare"]) == {}
    m.start_run({**built, "source": "other"}, ["01_construct"], merge=True)
    m.notebook_status("01_construct", "failed")  # a failed construction keeps its finished work: it still binds
    assert m.changed_parameters({**built, "source": "third"}, ["01_construct"]) == {"source": ("other", "third")}


def test_a_notebook_alone_after_a_failed_run_does_not_leave_it_running_forever(tmp_path):
    # repro run failed in 01_construct; 01_construct re-run alone finished, but 02_analyze and 03_card, which never
    # started, stayed `pending` and the run `running` (05_family then left the member's margins out)
    m = Manifest(tmp_path)
    m.start_run({"source": "demo"}, ["01_construct", "02_analyze", "03_card"])
    m.notebook_status("01_construct", "failed")
    m.finish_run("failed", "DataError: ...")
    m.ensure_started({"source": "demo"}, "01_construct")
    m.notebook_ended("01_construct")
    data = m.read()
    assert data["status"] == "complete" and list(data["notebooks"]) == ["01_construct"]


def test_a_notebook_alone_beside_a_failed_one_leaves_the_run_failed_not_running(tmp_path):
    # 01_construct failed under repro run; 02_analyze alone then finished: the run is failed (01's error), not
    # `running` forever, and not `complete`
    m = Manifest(tmp_path)
    m.start_run({"source": "demo"}, ["01_construct", "02_analyze"])
    m.notebook_status("01_construct", "failed", error="DataError: no rows")
    m.finish_run("failed", "DataError: no rows")
    with m.notebook({"bootstrap_resamples": 200}, "02_analyze"):
        assert m.read()["notebooks"]["02_analyze"]["status"] == "running"
    data = m.read()
    assert data["notebooks"]["02_analyze"]["status"] == "done"
    assert data["status"] == "failed" and data["error"] == "DataError: no rows"


def test_a_failed_stage_fails_the_notebook_that_ran_it(tmp_path):
    m = Manifest(tmp_path)
    with pytest.raises(RuntimeError):
        with m.notebook({"run_name": "x"}, "02_analyze"), m.stage("analyze"):
            raise RuntimeError("boom")
    data = m.read()
    assert data["status"] == "failed" and data["notebooks"]["02_analyze"]["status"] == "failed"
    assert "boom" in data["notebooks"]["02_analyze"]["error"]


@pytest.mark.parametrize("error, status, said", [(OSError("disk full"), "failed", "OSError: disk full"),
                                                 (KeyboardInterrupt(), "interrupted", "KeyboardInterrupt")])
def test_a_notebook_alone_that_fails_outside_a_stage_is_not_left_running(tmp_path, error, status, said):
    # 05_family failing to write family.json (no stage around it) left the notebook and the run `running` for good
    m = Manifest(tmp_path)
    with pytest.raises(type(error)):
        with m.notebook({"bootstrap_resamples": 200}, "05_family"):
            raise error
    data = m.read()
    assert data["notebooks"]["05_family"]["status"] == data["status"] == status
    assert data["notebooks"]["05_family"]["error"] == data["error"] == said


def test_under_repro_run_a_notebook_stays_running_until_repro_run_says_done(tmp_path):
    # 03_card's preview (a later cell) reads `running` to find the executed notebook's folder
    m = Manifest(tmp_path)
    m.start_run({"pretty_name": None}, ["03_card"], driver="repro run")
    m.notebook_status("03_card", "running", executed="notebooks/03_card.ipynb")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.paths import RunDir; "
                               "assert RunDir(sys.argv[1]).hold('`repro run`') is None; print('held', flush=True); "
                               "time.sleep(60)", str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"  # (its `repro run`, writing the folder)
        with m.notebook({"pretty_name": "other"}, "03_card"):
            pass
    finally:
        holder.kill()  # (SIGKILL: the record stays `running`, no process holds the folder)
        holder.wait()
    data = m.read()
    assert data["notebooks"]["03_card"] == {**data["notebooks"]["03_card"], "status": "running",
                                            "executed": "notebooks/03_card.ipynb"}
    assert data["parameters"] == {"pretty_name": None} and data["status"] == "running"  # repro run's record
    # its `repro run` killed: the notebook alone (papermill) is no longer taken for that run's, and ends its record
    assert m.last_run() == "stopped without finishing (killed?)"
    with m.notebook({"pretty_name": None}, "03_card"):
        pass
    data = m.read()
    assert data["notebooks"]["03_card"]["status"] == "done" and data["status"] == "complete"
    assert data["driver"] == "papermill"


def test_01_construct_alone_on_a_run_with_the_same_parameters_says_it_continues_it(tmp_path, capsys):
    # JupyterLab's Restart Kernel and Run All on a complete run rewrote it without a word ("40 resumed" in the
    # progress bar only), where `repro run` says "(continues the run there, same parameters ...)"
    m = Manifest(tmp_path)
    m.ensure_started({"source": "demo"}, "01_construct")
    assert capsys.readouterr().err == ""  # a new run: nothing to say
    m.notebook_ended("01_construct")
    m.ensure_started({"source": "demo"}, "01_construct")
    assert capsys.readouterr().err == (
        f"repro: The run in {tmp_path} continues (same parameters): it completed; its stages run again, reusing what "
        f"its work/ and the row cache hold, and write its outputs anew.\n")
    m.notebook_ended("01_construct", "interrupted")
    m.ensure_started({"source": "demo"}, "01_construct")
    assert "continues (same parameters): it was interrupted; its stages" in capsys.readouterr().err
    m.notebook_ended("01_construct")
    m.ensure_started({"bootstrap_resamples": 10}, "02_analyze")  # (its analysis, on the dataset: nothing to say)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("origin, published", [
    ("https://github.com/owner/repro.git", "https://github.com/owner/repro.git"),
    ("https://user:ghp_secret@gitlab.example.org/group/repro", "https://gitlab.example.org/group/repro"),
    ("https://oauth2:tok@host.org/x/repro.git?private_token=tok", "https://host.org/x/repro.git"),
    ("git@github.com:owner/repro.git", "git@github.com:owner/repro.git"),
    ("/home/alice/src/repro", None), ("file:///srv/git/repro.git", None), ("../repro", None),
    ("alice@box:/home/alice/repro.git", None), ("git@box:~/repro.git", None), (None, None)])
def test_the_git_record_names_the_checkouts_origin_only_where_it_is_public(tmp_path, origin, published):
    # a card pointed readers to "this project's package `repro`" and never said where it is (`pip install repro`
    # installs another project): the manifest records the checkout's origin, less a password or token, where others
    # can reach it, and no local path (a home folder names its user)
    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)
    git("init", "-q")
    (tmp_path / "a.txt").write_text("a")
    git("add", "a.txt")
    git("commit", "-qm", "a")
    if origin:
        git("remote", "add", "origin", origin)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True).stdout.strip()
    assert git_commit(tmp_path) == {"commit": head, "dirty": False, "origin": published}


def test_a_damaged_self_check_report_found_or_given_is_refused_naming_the_place(tmp_path):
    # a selfcheck.json whose models were a list stopped `repro run --check` (and the run) with an AttributeError
    # ('list' object has no attribute 'values') where it summed up the report the run cites; then, found in the run
    # directory, it was passed over without a word (the card citing no self-check)
    report = tmp_path / "selfcheck.json"
    report.write_text(json.dumps({"tool": "repro selfcheck", "models": ["builtin:tiny-pairrm"]}))
    with pytest.raises(DataError, match=re.escape(
            f"{report} holds a list as its models where a mapping belongs, not a report of `repro selfcheck` as it "
            f"writes one, and the run would cite it: run `repro selfcheck --report {tmp_path}` again, or delete it.")):
        find_selfcheck(tmp_path)
    with pytest.raises(ParameterError, match=re.escape(
            f"selfcheck={str(report)!r}: {report} holds a list as its models where a mapping belongs, not a report of "
            f"`repro selfcheck`; run `repro selfcheck --report DIR` and give DIR.")):
        find_selfcheck(tmp_path, report)


def test_a_self_check_of_the_same_weights_in_another_folder_or_hub_ids_case_is_of_the_run_scorer(tmp_path):
    """A reviewer: a copy of the scorer's folder plus a README.md or a .DS_Store, or less repro's stand-in marker, and
    the hub id in another case at the same commit, were cited as "of another model" (False): the card's wrong claim."""
    def same(scorer, *checked):  # as a run records it: `repro selfcheck`'s report of `checked`, beside the scorer
        report = tmp_path / "selfcheck.json"
        report.write_text(json.dumps({"tool": "repro selfcheck", "models": {
            str(k): {"spec": str(k), "identity": identity} for k, identity in enumerate(checked)}}))
        return selfcheck_summary(report, scorer)["same_model_as_run"]

    scorer = build_tiny_pairrm(tmp_path / "scorer")
    copies = {name: shutil.copytree(scorer, tmp_path / name) for name in ("readme", "ds_store", "unmarked", "weights",
                                                                         "no_weights")}
    (copies["readme"] / "README.md").write_text("# my PairRM\n")
    (copies["ds_store"] / ".DS_Store").write_bytes(b"\0Bud1")
    (copies["unmarked"] / STAND_IN_MARKER).unlink()
    (copies["weights"] / "model.safetensors").write_bytes(b"other weights")
    (copies["no_weights"] / "model.safetensors").unlink()
    other = build_tiny_pairrm(tmp_path / "other", seed=1)
    run = model_identity(str(scorer))
    said = {name: same(run, model_identity(str(folder))) for name, folder in {**copies, "other": other}.items()}
    assert said == {"readme": True, "ds_store": True, "unmarked": True, "weights": False, "no_weights": False,
                    "other": False}
    assert same(model_identity(str(copies["readme"])), run) is True  # (either way round)
    hub = {"hub_id": "llm-blender/pairrm-hf", "commit": "abc"}
    assert same(hub, {"hub_id": "llm-blender/PairRM-hf", "commit": "abc"}) is True
    assert same(hub, {"hub_id": "llm-blender/PairRM-hf", "commit": "abd"}) is False
