"""A run directory describes one dataset: analysing, carding or comparing another never writes into it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import datasets
import pytest

from repro import compare
from repro.analysis import report as analysis
from repro.card import gather_facts
from repro.dataset_io import SEED_COLUMNS, write_split
from repro.errors import DataError, ParameterError
from repro.manifest import Manifest
from repro.parameters import AnalyzeParams, CardParams, CompareParams, build, validate_namespace
from repro.paths import STAND_IN_MARKER, RunDir, run_dir_of
from repro.subject import declared_scorer, declared_stand_ins, mark_scorer

ROOT = Path(__file__).resolve().parents[1]


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(tmp_path, monkeypatch, train_rows):
    """A project root holding runs/demo as 01_construct leaves it, and someone else's scored rows, mine.jsonl."""
    monkeypatch.setenv("REPRO_HOME", str(tmp_path))
    run = RunDir(tmp_path / "runs" / "demo")
    rows = [{k: r.get(k) for k in SEED_COLUMNS} | {"reference_response": ""} for r in train_rows[:30]]
    write_split(datasets.Dataset.from_list(rows), run.dataset)
    Manifest(run).update(status="complete", counts={"kept": 30}, scorer={"model": "builtin:tiny-pairrm"})
    (run.root / "metrics.json").write_text('{"n": 30}\n')
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps(r) + "\n" for r in train_rows[30:90]))
    return tmp_path, run, mine


def test_a_dataset_of_no_run_gets_a_run_directory_of_its_own(project):
    root, run, mine = project
    assert run_dir_of(str(mine), "demo") == root / "runs" / "mine"
    assert run_dir_of("owner/some_dataset", "demo") == root / "runs" / "some_dataset"
    assert run_dir_of(str(run.root), "demo") == run.root  # a run's own dataset: that run
    assert run_dir_of(str(run.dataset), "demo") == run.root
    assert run_dir_of(None, "demo") == run.root
    assert build(AnalyzeParams, {"dataset": "mine.jsonl"}).run_root == root / "runs" / "mine"
    assert build(CardParams, {"card_dataset": "mine.jsonl"}).run_root == root / "runs" / "mine"
    assert build(CompareParams, {"candidate": "mine.jsonl"}).run_root == root / "runs" / "mine"
    assert build(AnalyzeParams, {"dataset": "mine.jsonl", "run_dir": "runs/x"}).run_root == root / "runs" / "x"
    # the run is named as its folder (run_name names the folder of a run that describes no dataset)
    assert build(AnalyzeParams, {"dataset": "mine.jsonl"}).run_name == "mine"
    assert build(CardParams, {"card_dataset": str(run.dataset)}).run_name == run.root.name
    assert build(AnalyzeParams, {"dataset": "mine.jsonl", "run_dir": "runs/x", "run_name": "y"}).run_name == "y"
    assert build(AnalyzeParams, {}).run_name == "demo"


def test_no_notebook_writes_another_dataset_into_a_run_directory(project):
    root, run, mine = project
    before = files_of(run.root)
    attempts = [
        lambda: analysis.analyze(build(AnalyzeParams, {"run_dir": str(run.root), "dataset": str(mine)})),
        lambda: gather_facts(build(CardParams, {"run_dir": str(run.root), "card_dataset": str(mine)})),
        lambda: compare.compare(build(CompareParams, {"run_dir": str(run.root), "candidate": str(mine),
                                                      "reference": str(mine)})),
    ]
    for attempt, parameter in zip(attempts, ("dataset", "card_dataset", "candidate")):
        with pytest.raises(ParameterError, match=rf"run_dir '{run.root}' describes its own dataset \(built there by "
                                                 rf"01_construct.*{parameter}='{mine}' is another dataset.*runs/mine"):
            attempt()
        assert files_of(run.root) == before
    # the foreign dataset's own run directory takes each notebook in turn, and then refuses a third dataset
    analysis.analyze(build(AnalyzeParams, {"dataset": str(mine), "bootstrap_resamples": 100}))
    own = RunDir(root / "runs" / "mine")
    assert json.loads(own.metrics.read_text())["n"] == 60
    assert Manifest(own).read()["subject"] == {"dataset": str(mine), "parameter": "dataset"}
    # its record named the run after run_name's default, "demo", though the run is runs/mine
    assert Manifest(own).read()["parameters"]["run_name"] == "mine"
    gather_facts(build(CardParams, {"card_dataset": str(mine)}))
    other = root / "other.jsonl"
    shutil.copyfile(mine, other)
    with pytest.raises(ParameterError, match=rf"describes '{mine}'.*dataset='{other}' is another dataset"):
        analysis.analyze(build(AnalyzeParams, {"run_dir": str(own.root), "dataset": str(other)}))


def test_a_dataset_named_in_any_script_gets_a_run_directory_and_card_title_of_its_name(project):
    # 数据.jsonl and Ответы.jsonl were both runs/dataset (the second then refused), résumé prefs r-sum-prefs, and the
    # card of 数据.jsonl was '# Dataset Card for "dataset"'
    root, run, mine = project
    names = {"数据": "数据", "Ответы": "Ответы", "données ü": "données-ü", "résumé prefs": "résumé-prefs",
             "my rows 数据": "my-rows-数据", "my rows 结果": "my-rows-结果", "re\u0301sume\u0301": "résumé",
             "my rows (v2)": "my-rows-v2", "?": "dataset",
             # vowel signs are marks, not letters: डेटा was ड-ट, as डाटा (one folder), ข้อมูล ข-อม-ล
             "डेटा": "डेटा", "डाटा": "डाटा", "ข้อมูล": "ข้อมูล", "தரவு": "தரவு"}
    for name, folder in names.items():
        assert run_dir_of(str(root / "data dir" / f"{name}.jsonl"), "demo") == root / "runs" / folder
    (root / "data dir").mkdir()
    for name in ("数据", "结果"):
        shutil.copyfile(mine, root / "data dir" / f"{name}.jsonl")
        facts = gather_facts(build(CardParams, {"card_dataset": str(root / "data dir" / f"{name}.jsonl")}))
        assert facts.title == name and facts.run.root == root / "runs" / name
        analysis.analyze(build(AnalyzeParams, {"dataset": str(root / "data dir" / f"{name}.jsonl"),
                                               "bootstrap_resamples": 100}))


def older_run(root: Path, mine: Path) -> tuple[Path, RunDir]:
    """données.jsonl (`mine`'s rows) and its run as an older repro named it, runs/donn-es, recording it where the
    project was then."""
    data = root / "données.jsonl"
    data.write_bytes(mine.read_bytes())
    older = RunDir(root / "runs" / "donn-es")
    was = Path("/elsewhere/project")
    older.root.mkdir(parents=True)
    (older.root / "manifest.json").write_text(json.dumps({
        "status": "complete", "subject": {"dataset": str(was / data.name), "parameter": "dataset"},
        "parameters": {"dataset": str(was / data.name), "run_dir": str(was / "runs" / "donn-es")}}))
    return data, older


def test_a_datasets_run_an_older_repro_named_without_its_letters_is_used_and_said_so(project, capsys):
    # an older repro named the run of données.jsonl runs/donn-es; after an upgrade the notebook wrote runs/données,
    # the analysis done there unused, without a word
    root, _, mine = project
    data, older = older_run(root, mine)
    assert run_dir_of(str(data), "demo") == older.root
    analysis.analyze(validate_namespace("analyze", {"dataset": str(data), "bootstrap_resamples": 100}))
    assert json.loads(older.metrics.read_text())["n"] == 60 and not (root / "runs" / "données").exists()
    assert capsys.readouterr().out.startswith(
        f"run directory: {older.root} (the one of dataset='{data}', named by an older repro: a new run would be "
        f"runs/données; set run_dir to choose another)\n")
    # a dataset of the same old name but another subject, or one whose run of the new name exists: as before
    other = root / "donnèes.jsonl"
    other.write_bytes(mine.read_bytes())
    assert run_dir_of(str(other), "demo") == root / "runs" / "donnèes"
    (root / "runs" / "données").mkdir()
    assert run_dir_of(str(data), "demo") == root / "runs" / "données"
    analysis.analyze(validate_namespace("analyze", {"dataset": str(data), "bootstrap_resamples": 100}))
    assert "older repro" not in capsys.readouterr().out


def test_a_card_written_into_a_datasets_run_an_older_repro_named_is_titled_with_the_datasets_name(project):
    # 03_card of données.jsonl wrote into runs/donn-es (an older repro's name for its run) and titled the card from
    # the folder: 'pretty_name: donn-es', '# Dataset Card for "donn-es"', where a fresh project's card says données
    from repro.card import write_card

    root, _, mine = project
    data, older = older_run(root, mine)
    facts = gather_facts(build(CardParams, {"card_dataset": str(data)}))
    assert facts.run.root == older.root and facts.title == "données"
    card = write_card(facts).read_text(encoding="utf-8")
    assert "pretty_name: données\n" in card and '# Dataset Card for "données"' in card and "「données」" in card
    assert "donn-es" not in card.split("## ")[0]
    # the card made again in that run, run_dir given and card_dataset unset (its dataset/ now): titled as before
    assert gather_facts(build(CardParams, {"run_dir": str(older.root)})).title == "données"
    # a folder of another name keeps its own, as before (the demo's card: its folder's)
    assert gather_facts(build(CardParams, {"card_dataset": str(data), "run_dir": "runs/x"})).title == "x"


def test_01_construct_never_builds_into_a_run_directory_of_another_dataset(project):
    from repro.construct.stages import begin
    from repro.parameters import ConstructParams

    root, run, mine = project
    analysis.analyze(build(AnalyzeParams, {"dataset": str(mine), "bootstrap_resamples": 100}))
    with pytest.raises(ParameterError, match=rf"describes '{mine}'.*01_construct would build a dataset of its own"):
        begin(build(ConstructParams, {"run_dir": "runs/mine"}))


def test_repro_run_refuses_a_run_directory_of_another_dataset_before_it_records_anything(project, capsys):
    """The notebooks refused it, but `repro run` had recorded its run first: the manifest said failed, with every
    value of 01_construct, and its check had offered --set values and --force that could not work."""
    from repro import cli

    root, run, mine = project
    analysis.analyze(build(AnalyzeParams, {"dataset": str(mine), "bootstrap_resamples": 100}))
    own = RunDir(root / "runs" / "mine")
    before = files_of(own.root)
    for extra in ([], ["--force"], ["--check"]):
        assert cli.main(["run", str(ROOT / "params" / "demo.yaml"), "--out", str(own.root), *extra]) in (1, 2)
        said = "".join(capsys.readouterr())
        assert (f"REFUSED  run directory: --out '{own.root}' describes '{mine}' (its manifest.json says so), but "
                f"01_construct would build a dataset of its own there: writing it there would mix two datasets in one "
                f"run directory. Give this run another --out") in said, said
        assert "--set" not in said and files_of(own.root) == before
    # a params file of 02_analyze on a third dataset, given the run's folder, likewise
    other = root / "other.jsonl"
    shutil.copyfile(mine, other)
    params = root / "p.yaml"
    params.write_text(f"notebooks: [02_analyze]\ndataset: {other}\nrun_dir: {own.root}\n")
    assert cli.main(["run", str(params), "--check"]) == 1
    assert (f"run_dir '{own.root}' describes '{mine}' (its manifest.json says so), but dataset='{other}' is another "
            f"dataset" in capsys.readouterr().out)
    assert files_of(own.root) == before
    # a family member's folder holding it: named as the member's, with the family's advice (it read "--out (the
    # family's folder) '.../mini_0'")
    shutil.copytree(own.root, root / "fam" / "mini_0")
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root / "fam"), "--check"]) == 1
    said = capsys.readouterr().out
    assert (f"REFUSED  run directory (member mini_0): the member's folder '{root / 'fam' / 'mini_0'}' describes "
            f"'{mine}'") in said and "Move that run, or give the family another --out" in said, said


def test_plain_papermill_on_a_foreign_dataset_leaves_the_demo_run_byte_identical(project, monkeypatch, run_notebook):
    root, run, mine = project
    before = files_of(run.root)
    out = root / "out.ipynb"
    monkeypatch.chdir(root)
    run_notebook(ROOT / "notebooks" / "02_analyze.ipynb", out, cwd=str(root),
                 parameters={"dataset": "mine.jsonl", "bootstrap_resamples": 100})
    assert files_of(run.root) == before
    assert json.loads((root / "runs" / "mine" / "metrics.json").read_text())["n"] == 60
    first = next(o for c in json.loads(out.read_text())["cells"] for o in c.get("outputs", []))
    assert "".join(first["text"]).startswith(f"run directory: {root / 'runs' / 'mine'} (the one of dataset=")


def test_a_runs_own_parquet_file_means_that_run_and_same_named_datasets_get_possible_advice(project):
    """JupyterLab's file browser shows runs/demo/dataset/data/train_prefs-00000-of-00001.parquet: given as `dataset`,
    it made runs/train_prefs-00000-of-00001/, which every run's file of that name then shared; the second was refused
    with "leave run_dir unset (the notebook then writes runs/train_prefs-...)", as run_dir already was."""
    root, run, mine = project
    shard = run.shards()[0]
    assert run_dir_of(str(shard), "x") == run.root
    assert build(AnalyzeParams, {"dataset": str(shard)}).run_root == run.root
    analysis.analyze(build(AnalyzeParams, {"dataset": str(shard), "bootstrap_resamples": 100}))
    assert json.loads(run.metrics.read_text())["n"] == 30 and not (root / "runs" / shard.stem).exists()
    (root / "b").mkdir()
    shutil.copyfile(mine, root / "b" / "mine.jsonl")  # another dataset of the same file name
    analysis.analyze(build(AnalyzeParams, {"dataset": str(mine), "bootstrap_resamples": 100}))
    with pytest.raises(ParameterError, match=r"runs/mine' describes .*Give this notebook a run_dir of its own") as info:
        analysis.analyze(build(AnalyzeParams, {"dataset": str(root / "b" / "mine.jsonl"), "bootstrap_resamples": 100}))
    assert "Leave run_dir unset" not in str(info.value)
    for inside in (run.dataset, run.data, run.figures):  # a folder of the run, as the file browser shows it
        with pytest.raises(ParameterError, match=rf"run_dir: is the {inside.relative_to(run.root)}/ folder of the run "
                                                 rf"{run.root}, not a run directory: give run_dir {run.root}"):
            build(AnalyzeParams, {"run_dir": str(inside)})


def test_a_runs_own_dataset_named_by_a_notebook_is_recorded_as_its_own(project, tmp_path):
    """02_analyze on its own with dataset = the run (or its dataset/, or a file of the split it built) recorded
    that path, so the run's next `repro run` was refused for `dataset` ('...' there, null now)."""
    root, run, mine = project
    for given in (run.root, run.dataset, run.shards()[0]):
        p = build(AnalyzeParams, {"dataset": str(given)})
        assert (p.dataset, p.run_root, p.run_name) == (None, run.root, run.root.name)
    other = build(AnalyzeParams, {"dataset": str(run.root), "run_dir": str(root / "runs" / "x")})
    assert other.dataset == str(run.root)  # into another folder it stays what it was given
    # a run whose split is not train_prefs (output_split, a recipe's `train`): its files mean the run too
    Manifest(run).update(dataset={"split": "train"})
    (run.data / "train-00000-of-00001.parquet").write_bytes(run.shards()[0].read_bytes())
    assert run_dir_of(str(run.data / "train-00000-of-00001.parquet"), "x") == run.root
    assert run_dir_of(str(run.shards()[0]), "x") != run.root  # now another split's file: not the run's own data


def test_a_runs_dataset_data_folder_is_that_run_in_every_notebook(project):
    """A run's dataset/data/ (the folder holding its parquet) given as a notebook's dataset was no run's: 02_analyze
    wrote a new run, runs/data, and into another run_dir read the stand-in's noise as PairRM's scores ("no record
    names the scorer"), 03_card and 04_compare alike; its dataset/ was the run. Now dataset/data/ is that run too."""
    root, run, mine = project
    Manifest(run).update(scorer={"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    theirs = root / "theirs.jsonl"  # the same rows, of no run
    datasets.Dataset.from_parquet(str(run.shards()[0])).to_json(theirs)
    assert run_dir_of(str(run.data), "x") == run.root
    p = build(AnalyzeParams, {"dataset": str(run.data)})
    assert (p.dataset, p.run_root, p.run_name) == (None, run.root, run.root.name)
    for given in (run.dataset, run.data):
        into = str(root / "runs" / f"of-{given.name}")
        analysis.analyze(build(AnalyzeParams, {"dataset": str(given), "run_dir": into, "bootstrap_resamples": 100}))
        metrics = json.loads(RunDir(into).metrics.read_text())
        assert (metrics["scorer"]["model"], metrics["scores_from_stand_in"]) == ("builtin:tiny-pairrm", True)
        facts = gather_facts(build(CardParams, {"card_dataset": str(given), "run_dir": into + "-card"}))
        assert facts.scorer["stand_in"] and facts.scorer["declared"] == "manifest"
        out = compare.compare(build(CompareParams, {"run_dir": into + "-compare", "candidate": str(theirs),
                                                    "reference": str(given)}))
        assert any("The reference's scores come from a stand-in scorer" in note for note in out.result["notes"])
    # a shard of its test split: not its own dataset (a run of its own), but the stand-in's scores all the same
    test = shutil.copyfile(run.shards()[0], run.data / "test_prefs-00000-of-00001.parquet")
    metrics = analysis.analyze(build(AnalyzeParams, {"dataset": str(test), "bootstrap_resamples": 100})).metrics
    assert (metrics["scorer"]["model"], metrics["scores_from_stand_in"]) == ("builtin:tiny-pairrm", True)


def test_the_advice_to_leave_run_dir_unset_names_where_the_notebook_then_writes(project):
    # the dataset of a run outside runs/: "the notebook then writes runs/x", where it writes that run's folder
    root, run, mine = project
    other = RunDir(root / "elsewhere" / "x")
    shutil.copytree(run.dataset, other.dataset)
    Manifest(other).update(status="complete", counts={"kept": 30}, scorer={"model": "builtin:tiny-pairrm"})
    with pytest.raises(ParameterError, match=rf"Leave run_dir unset \(the notebook then writes {other.root}\)"):
        analysis.analyze(build(AnalyzeParams, {"run_dir": str(run.root), "dataset": str(other.root)}))
    assert build(AnalyzeParams, {"dataset": str(other.root)}).run_root == other.root


def test_a_claim_reads_the_runs_manifest_once(project, monkeypatch):
    """claim read the run's manifest.json twice (its refusal's check, then what to record): once now, and it records
    the same."""
    import sys

    from repro.subject import claim

    root, run, mine = project
    own, reads, read = RunDir(root / "runs" / "mine"), [], Manifest.read

    def spy(self):
        if sys._getframe(1).f_globals["__name__"] == "repro.subject":
            reads.append(self.path)
        return read(self)

    monkeypatch.setattr(Manifest, "read", spy)
    try:
        claim(own, str(mine), "dataset")
        assert reads == [own.manifest]
        assert Manifest(own).read()["subject"] == {"dataset": str(mine), "parameter": "dataset"}
        reads.clear()
        claim(run, None, "dataset")
        assert reads == [run.manifest]
    finally:
        own.release(kernel=True)
        run.release(kernel=True)


def test_a_project_moved_or_copied_describes_the_same_datasets(project, monkeypatch):
    # a copy of the project (a colleague's, a reproduction): its run of mine.jsonl "describes
    # '/old/…/mine.jsonl', but dataset='/new/…/mine.jsonl' is another dataset"
    from repro.subject import claim, subject_refusal

    root, _, mine = project
    run = RunDir(root / "runs" / "mine")
    claim(run, str(mine), "dataset")  # as 02_analyze on its own records it
    Manifest(run).start_run({"dataset": str(mine), "run_dir": str(run.root)}, ["02_analyze"], driver="papermill")
    run.release(kernel=True)
    (run.root / "metrics.json").write_text("{}")
    Manifest(run).add_outputs(run.root / "metrics.json")
    copy = root.parent / "copy of the project"
    shutil.copytree(root, copy)
    monkeypatch.setenv("REPRO_HOME", str(copy))
    moved = RunDir(copy / "runs" / "mine")
    assert subject_refusal(moved, str(copy / "mine.jsonl"), "dataset") is None
    Manifest(moved).start_run({"dataset": str(copy / "mine.jsonl"), "run_dir": str(moved.root)}, ["02_analyze"],
                              driver="papermill", merge=True)  # the record follows the project where it is now
    assert Manifest(moved).read()["subject"]["dataset"] == str(copy / "mine.jsonl")
    (copy / "other.jsonl").write_bytes(mine.read_bytes())
    assert "is another dataset" in subject_refusal(moved, str(copy / "other.jsonl"), "dataset")


def test_declared_scorer_reads_the_marker_of_a_real_scorers_file_once(tmp_path, monkeypatch, train_rows):
    """declared_scorer read the repro score marker of a file (and of each file of a folder) twice where the scorer
    was no stand-in: once inside declared_stand_ins, once itself. Now once: no read beyond declared_stand_ins', and the
    same scorer."""
    rm = {"model": "owner/reward-model", "kind": "sequence_classifier", "stand_in": False}
    for k, name in enumerate(("a.jsonl", "b.jsonl")):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in train_rows[3 * k:3 * k + 3]))
        mark_scorer(tmp_path / name, rm)
    reads, read_text = [], Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: reads.append(self.name) or read_text(self, *a, **k))
    assert declared_scorer(str(tmp_path / "a.jsonl")) == rm | {"declared": "marker"}
    assert reads == [STAND_IN_MARKER]
    reads.clear()
    assert declared_stand_ins(str(tmp_path)) == {}  # the folder: its marker's check, and each file's entry
    alone = list(reads)
    reads.clear()
    assert declared_scorer(str(tmp_path)) == rm | {"declared": "marker"} and reads == alone


def test_a_damaged_stand_in_marker_is_an_error_naming_it_and_its_place(tmp_path, train_rows):
    """repro_stand_in.json (what `repro score` records of each file's scorer) was read without a shape: a scorer's
    `kind` a list failed 03_card in its template ("unhashable type: 'list'", said to be a bug in repro.card), its
    `stand_in` "no" was read as a stand-in, `files` a list as a marker of no files (a stand-in's). Now each is a
    DataError naming the file and the place, saying what to do."""
    scored, marker = tmp_path / "scored.jsonl", tmp_path / STAND_IN_MARKER
    scored.write_text("".join(json.dumps(r) + "\n" for r in train_rows[:6]))
    mark_scorer(scored, {"model": "owner/reward-model", "kind": "sequence_classifier", "stand_in": False})
    written = json.loads(marker.read_text())
    for files, said in (({"kind": ["a"]}, 'a list as its files["scored.jsonl"]["kind"] where text belongs'),
                        ({"stand_in": "no"}, '"no" as its files["scored.jsonl"]["stand_in"] where true or false '
                                             'belongs'), ([], 'a list as its files where a mapping belongs')):
        damaged = files if isinstance(files, list) else {"scored.jsonl": written["files"]["scored.jsonl"] | files}
        marker.write_text(json.dumps({**written, "files": damaged}))
        for spec in (scored, tmp_path):  # the file, its folder
            with pytest.raises(DataError, match=re.escape(f"{marker} holds {said}, not what `repro score` writes: ")):
                declared_scorer(str(spec))
    with pytest.raises(DataError, match=re.escape(f"{marker} holds a list as its files")):  # 03_card's: no traceback
        gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run"), "card_dataset": str(scored)}))


def test_a_file_in_a_data_folder_of_no_dataset_is_read_as_that_file(tmp_path, sample_dir):
    """03_card on /somewhere/data/f.jsonl (no run's, no dataset card above it) read /somewhere as the dataset folder:
    datasets scanned all of it and failed with "Couldn't infer the same data file format for all splits"."""
    for folder, other in ((tmp_path / "w", "train.csv"), (tmp_path / "ds", "README.md")):
        (folder / "data").mkdir(parents=True)
        shutil.copy(sample_dir / "train_prefs.jsonl", folder / "data" / "f.jsonl")
        (folder / other).write_text("---\ntags: [stand-in-scores]\n---\n" if other == "README.md" else "x,y\n1,2\n")
    shutil.copy(sample_dir / "test_prefs.jsonl", tmp_path / "w" / "test.jsonl")  # (w: a csv split and a json one)
    facts = gather_facts(build(CardParams, {"run_dir": str(tmp_path / "run"), "card_dataset": str(
        tmp_path / "w" / "data" / "f.jsonl")}))
    assert facts.scorer == {} and facts.generation == {} and not facts.built_here
    # a dataset folder (its card's YAML header): its file is read as part of it, its card's tags declare
    assert declared_stand_ins(str(tmp_path / "ds" / "data" / "f.jsonl"), "train_prefs") == {
        "scorer": {"stand_in": True, "declared": "card"}}


def half_built(run: RunDir, at: Path) -> RunDir:
    """A copy of `run` at `at` whose 01_construct is running again (a cell run again in JupyterLab): half-built."""
    half = RunDir(shutil.copytree(run.root, at))
    Manifest(half).update(status="running", notebooks={"01_construct": {"status": "running"}})
    return half


def test_04_compare_refuses_a_half_built_run_on_any_side(project):
    """04_compare refused a half-built run given as `candidate`, but compared one given as `reference` (or in its
    list) or `compare_source`, and wrote compare.json from rows its record may not describe. Now each is refused."""
    root, run, mine = project
    half = half_built(run, root / "runs" / "half")
    other = root / "runs" / "other"
    for given in ({"reference": str(half.root)}, {"reference": [str(mine), str(half.dataset)]},
                  {"reference": str(mine), "compare_source": str(half.root)}):
        with pytest.raises(DataError, match=rf"{half.root} holds a run whose 01_construct did not finish"):
            compare.compare(build(CompareParams, {"run_dir": str(other), "candidate": str(run.root), **given}))
        assert not other.exists()


def test_a_link_to_a_half_built_runs_dataset_is_refused_as_the_folder_it_links_to(project):
    """A symlink placed elsewhere to a half-built run's dataset/ or dataset/data/ was read (rows its record may not
    describe) where the folder itself was refused: the check looked at the link's own path. Now it looks where it
    leads, for 02_analyze's dataset and 04_compare's reference alike."""
    root, run, mine = project
    half = half_built(run, root / "runs" / "half")
    other = root / "runs" / "other"
    for target in (half.dataset, half.data):
        link = root / "links" / target.name
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
        with pytest.raises(DataError, match=rf"{half.root} holds a run whose 01_construct did not finish"):
            analysis.analyze(build(AnalyzeParams, {"run_dir": str(other), "dataset": str(link)}))
        with pytest.raises(DataError, match=rf"{half.root} holds a run whose 01_construct did not finish"):
            compare.compare(build(CompareParams, {"run_dir": str(other), "candidate": str(run.root),
                                                  "reference": str(link)}))
        assert not other.exists()


def test_a_run_whose_manifest_holds_damaged_notebooks_is_refused_naming_the_file(project):
    """A manifest.json whose `notebooks` (or its 01_construct's entry) is a string made 02_analyze, 03_card and
    04_compare of that run raise a bare AttributeError ('str' object has no attribute 'get'), where a manifest that is
    not JSON was refused naming the file. Now it is refused alike."""
    root, run, mine = project
    for name, notebooks, said in (("a", "x", 'holds "x" as its notebooks where a mapping belongs'),
                                  ("b", {"01_construct": "done"},
                                   'holds "done" as its notebooks["01_construct"] where a mapping belongs')):
        damaged = RunDir(shutil.copytree(run.root, root / "runs" / name))
        Manifest(damaged).update(notebooks=notebooks)
        with pytest.raises(DataError, match=re.escape(f"{damaged.manifest} {said}, not a run's record: restore it")):
            analysis.analyze(build(AnalyzeParams, {"run_dir": str(root / "runs" / "other"),
                                                   "dataset": str(damaged.root)}))
        assert not (root / "runs" / "other").exists()


def test_any_folder_or_file_of_a_half_built_runs_dataset_is_refused(project):
    """A half-built run given as its dataset/data/ folder, or as a shard of a split it did not name as built (its
    test_prefs), was analysed: only the run, its dataset/ and its built split's shards were refused."""
    root, run, mine = project
    half = half_built(run, root / "runs" / "half")
    test = shutil.copyfile(half.shards()[0], half.data / "test_prefs-00000-of-00001.parquet")
    for given in (half.data, test):
        with pytest.raises(DataError, match=rf"{half.root} holds a run whose 01_construct did not finish"):
            analysis.analyze(build(AnalyzeParams, {"run_dir": str(root / "runs" / "other"), "dataset": str(given)}))
        assert not (root / "runs" / "other").exists()
