import gzip
import json
import re
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets.info import DatasetInfo, DatasetInfosDict
from huggingface_hub import DatasetCard, DatasetCardData, constants

from repro.dataset_io import SEED_FEATURES, write_split
from repro.cli import main
from repro.errors import DataError, DatasetLoadError
from repro.paths import STAND_IN_MARKER
from repro.sources import held_splits, iter_jsonl, load_source, require_columns, text_lines
from repro.subject import mark_scorer


def test_demo_source_loads():
    ds = load_source("demo")
    assert len(ds) >= 32 and {"prompt", "resp0", "resp1", "resp2", "reference_response"} <= set(ds.column_names)


def test_local_files_and_folders(tmp_path, train_rows):
    rows = train_rows[:5]
    jsonl = tmp_path / "rows.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = load_source(str(jsonl))
    assert ds["prompt"] == [r["prompt"] for r in rows]
    ds.to_parquet(str(tmp_path / "rows.parquet"))
    assert load_source(str(tmp_path / "rows.parquet"))["prompt_id"] == ds["prompt_id"]
    ds.save_to_disk(str(tmp_path / "saved"))
    assert len(load_source(str(tmp_path / "saved"))) == 5
    datasets.DatasetDict({"train_prefs": ds}).save_to_disk(str(tmp_path / "saved_dict"))
    assert len(load_source(str(tmp_path / "saved_dict"), "train_prefs")) == 5
    with pytest.raises(DataError, match="no split 'test_prefs'.*train_prefs.*Set source_split to one of those"):
        load_source(str(tmp_path / "saved_dict"), "test_prefs")
    # the error names the parameter the user sets, whichever notebook reads the dataset
    with pytest.raises(DataError, match="Set card_split to one of those"):
        load_source(str(tmp_path / "saved_dict"), "test_prefs", "card_dataset", "card_split")
    with pytest.raises(DataError, match="Set reference_split to one of those"):
        load_source(str(tmp_path / "saved_dict"), "test_prefs", "reference")


def test_hub_layout_folder(tmp_path):
    row = {"prompt": "p", "prompt_id": "i", "messages": [], "score_chosen": 1.0, "score_rejected": 0.0,
           "reference_response": None, "chosen": [], "rejected": []}
    write_split(datasets.Dataset.from_list([row], features=SEED_FEATURES), tmp_path / "ds")
    ds = load_source(str(tmp_path / "ds"))
    assert ds.features == SEED_FEATURES


def test_bad_sources(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="neither an existing file"):
        load_source("no/such/file.jsonl")
    (tmp_path / "x.csvv").write_text("a")
    with pytest.raises(DataError, match="unsupported file type"):
        load_source(str(tmp_path / "x.csvv"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DatasetLoadError, match="switched off.*local-dir.*set source to that folder"):
        load_source("someone/not-here-offline")


def _in_the_hub_cache(tmp_path: Path, monkeypatch, rows: list[dict]) -> Path:
    """Hub dataset someone/cached at commit 0123abcd, its train_prefs `rows`, in a hub cache of its own (offline)."""
    snapshot = tmp_path / "hub" / "datasets--someone--cached" / "snapshots" / "0123abcd"
    write_split(datasets.Dataset.from_list(rows), snapshot, "train_prefs")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    return snapshot


def test_offline_a_hub_dataset_in_the_hub_cache_is_read_from_it(tmp_path, monkeypatch, train_rows, capsys):
    # README step 2 downloads into the hub cache (`hf download ... --repo-type dataset`), and `--check` says "in the
    # local hub cache"; datasets' load_dataset, offline, reads only its own prepared copies: the run failed
    _in_the_hub_cache(tmp_path, monkeypatch, train_rows[:3])
    assert load_source("someone/cached", "train_prefs")["prompt"] == [r["prompt"] for r in train_rows[:3]]
    with pytest.raises(DataError, match="source 'someone/cached' has no split 'test_prefs'"):  # the id, not the path
        load_source("someone/cached", "test_prefs")
    # a machine without network that is not told so (HF_HUB_OFFLINE unset): the cache too, and a line says so
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: (_ for _ in ()).throw(ConnectionError("no route")))
    assert len(load_source("someone/cached", "train_prefs")) == 3
    assert "source 'someone/cached': read from the local hub cache (ConnectionError from the hub)" in \
        capsys.readouterr().err


def test_offline_a_pinned_revision_not_in_the_hub_cache_says_to_download_that_revision(tmp_path, monkeypatch,
                                                                                       train_rows):
    # its hint `hf download ID --repo-type dataset --local-dir DIR` fetched the newest commit, and the folder with
    # source_revision still set was then refused ("is not a hub id ... and has no revisions")
    _in_the_hub_cache(tmp_path, monkeypatch, train_rows[:3])  # commit 0123abcd, the newest
    with pytest.raises(DatasetLoadError) as failed:
        load_source("someone/cached", "train_prefs", revision="c" * 40)
    assert (f"run `hf download someone/cached --repo-type dataset --revision {'c' * 40} --local-dir DIR`, copy DIR "
            f"here, and set source to that folder instead of the id (and source_revision: null)") in str(failed.value)


def test_a_hub_dataset_in_the_hub_cache_whose_shards_differ_is_named_by_its_id(tmp_path, monkeypatch):
    # read from the hub cache as a local folder: a bare DatasetGenerationError and a long traceback
    snapshot = tmp_path / "hub" / "datasets--someone--shards" / "snapshots" / "0123abcd"
    for i, columns in enumerate((["prompt", "resp0"], ["prompt", "resp0", "resp1"])):
        datasets.Dataset.from_list([dict.fromkeys(columns, "x")]).to_parquet(
            snapshot / "data" / f"train_prefs-{i:05d}-of-00002.parquet")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(DataError, match=r"^source 'someone/shards': the 2 shards of split 'train_prefs' .* could not "
                                        r"be read as one dataset \(their columns differ: data/train_prefs-00001-of-"
                                        r"00002\.parquet has prompt, resp0, resp1; data/train_prefs-00000-of-00002\."
                                        r"parquet has prompt, resp0\)\. .* these are the shards the hub publishes, "
                                        r"so downloading them again gives the same: download them \(`hf download "
                                        r"someone/shards --repo-type dataset --local-dir DIR`\)"):
        load_source("someone/shards", "train_prefs")


def test_a_mistyped_split_of_a_folder_of_data_files_lists_the_splits_that_load(sample_dir):
    # "has no split 'test_pref'; it has ['test', 'train']": not the names of its files, which load
    assert load_source(str(sample_dir), "test_prefs")["prompt"] == load_source(str(sample_dir / "test_prefs.jsonl"))[
        "prompt"]
    with pytest.raises(DataError, match=r"^source '\S*ultrafeedback' has no split 'test_pref'; it has \['test', "
                                        r"'test_prefs', 'train', 'train_prefs'\]\. Did you mean 'test_prefs'\? Set "
                                        r"source_split to one of those\.$"):
        load_source(str(sample_dir), "test_pref")


def test_a_folder_without_a_dataset_is_said_to_hold_none(tmp_path):
    # a run directory whose 01_construct has not run, and a `repro selfcheck --report` folder: their own JSON files
    # were read as one data row ("has no split 'train_prefs'; it has ['train']", then "neither a prompt_id nor ...")
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text("{}")
    (run / "compare.json").write_text("{}")
    with pytest.raises(DataError, match=r"candidate '\S*run' is a run directory without a dataset \(no dataset/: "
                                        r"its 01_construct has not finished\); build it first"):
        load_source(str(run), "train_prefs", "candidate")
    # a comparison-only run never had a 01_construct to finish: the run that built the dataset is what to give
    (run / "manifest.json").write_text('{"notebooks": {"04_compare": {"status": "done"}}}')
    with pytest.raises(DataError, match=r"candidate '\S*run' is a run directory without a dataset of its own \(its "
                                        r"notebooks: 04_compare; no 01_construct\): give the run that built it"):
        load_source(str(run), "train_prefs", "candidate")
    report = tmp_path / "selfcheck"
    report.mkdir()
    (report / "selfcheck.json").write_text('{"tool": "repro selfcheck"}')
    (report / "selfcheck.md").write_text("# report")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "margins.png").write_bytes(b"png")
    for folder in (report, tmp_path / "figures"):
        with pytest.raises(DataError, match=r"holds no data files \(\.jsonl, \.json, \.parquet"):
            load_source(str(folder), "train_prefs", "reference")
    # a run's own subfolders, a folder of runs, and a family's folder
    (run / "dataset").mkdir()
    (run / "tables").mkdir()
    (run / "tables" / "summary_statistics.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataError, match=r"is the tables/ folder of the run \S*run, not a dataset: give the run "
                                        r"directory itself"):
        load_source(str(run / "tables"), "train_prefs", "dataset")
    with pytest.raises(DataError, match=r"holds run directories, not one dataset: give one of them"):
        load_source(str(tmp_path), "train_prefs", "dataset")
    family = tmp_path / "fam"
    family.mkdir()
    (family / "manifest.json").write_text('{"notebooks": {"05_family": {"status": "done"}}}')
    with pytest.raises(DataError, match=r"is a family's folder: give one of its members"):
        load_source(str(family), "train_prefs", "dataset")
    mine = tmp_path / "mine"  # a folder of the user's data files still loads
    mine.mkdir()
    (mine / "rows.jsonl").write_text('{"prompt": "p"}\n')
    (mine / "README.md").write_text("# my rows")
    assert load_source(str(mine), "train")["prompt"] == ["p"]


def test_a_byte_order_mark_is_read_by_repro_score_as_by_repro_run(tmp_path):
    # Windows editors save UTF-8 with a BOM: `repro run` read it, `repro score` refused line 1 ("Unexpected UTF-8 BOM")
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"prompt": "p", "candidates": ["a", "b"]}).encode() + b"\n")
    assert [row for _, row in iter_jsonl(path)] == [{"prompt": "p", "candidates": ["a", "b"]}]
    assert load_source(str(path))["prompt"] == ["p"]


def test_require_columns_names_missing_ones():
    with pytest.raises(DataError, match=r"\['resp1'\].*resp0"):
        require_columns(["prompt", "resp0"], ["resp0", "resp1"], "source x")


def test_empty_and_broken_files_are_clear_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataError, match="empty file"):
        load_source(str(tmp_path / "empty.jsonl"))
    (tmp_path / "broken.jsonl").write_text('{"prompt": "a"\nnot json\n')
    with pytest.raises(DataError, match=r"line 1 of source '\S*broken.jsonl' is not valid JSON"):
        load_source(str(tmp_path / "broken.jsonl"))


def test_errors_about_another_notebooks_dataset_name_its_parameter(tmp_path):
    """02_analyze's `dataset`, 03_card's `card_dataset`, 04_compare's `reference`: not "source", which is 01's."""
    folder = tmp_path / "hubby" / "data"
    folder.mkdir(parents=True)
    datasets.Dataset.from_list([{"score_chosen": 1.0, "score_rejected": 0.0}]).to_parquet(
        folder / "train-00000-of-00001.parquet")
    (folder / "test-00000-of-00001.parquet").write_bytes((folder / "train-00000-of-00001.parquet").read_bytes())
    with pytest.raises(DataError, match=r"^dataset '\S*hubby' has no split 'train_prefs'; it has \['test', 'train'\]"
                                        r"\. Did you mean 'train'\? Set dataset_split"):
        load_source(str(tmp_path / "hubby"), "train_prefs", "dataset")
    with pytest.raises(DataError, match=r"^reference 'no/such/file\.jsonl' is neither an existing file"):
        load_source("no/such/file.jsonl", "train_prefs", "reference")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataError, match=r"^card_dataset '\S*empty\.jsonl' is an empty file"):
        load_source(str(tmp_path / "empty.jsonl"), "train_prefs", "card_dataset")


def test_a_mistyped_split_of_a_folder_is_refused_from_the_file_names_alone(tmp_path):
    # a folder of files by split, one of them garbage: a mistyped split read every file first, and the garbage one
    # failed ("could not read a dataset from this folder") before the "Did you mean" could be said
    parquet, jsonl = tmp_path / "by_parquet", tmp_path / "by_jsonl"
    parquet.mkdir(), jsonl.mkdir()
    pq.write_table(pa.table({"prompt": ["p"]}), parquet / "train_prefs-00000.parquet")
    (parquet / "test_prefs-00000.parquet").write_bytes(b"not parquet at all")
    (jsonl / "train_prefs.jsonl").write_text('{"prompt": "p"}\n')
    (jsonl / "test_prefs.jsonl").write_text("not json at all\n")
    for folder in (parquet, jsonl):
        with pytest.raises(DataError, match=rf"^dataset '\S*{folder.name}' has no split 'train_pref'; it has \[.*"
                                            r"'train_prefs'.*\]\. Did you mean 'train_prefs'\? Set dataset_split"):
            load_source(str(folder), "train_pref", "dataset")
        assert load_source(str(folder), "train_prefs", "dataset")["prompt"] == ["p"]


def test_an_empty_shard_beside_full_ones_adds_no_rows(tmp_path):
    # a shard of columns and no rows (pyarrow writes one empty row group): datasets' "BatchSize must be greater than
    # 0", and the folder was called damaged; the other shards' rows are the dataset
    folder = tmp_path / "hubby" / "data"
    folder.mkdir(parents=True)
    full = pa.Table.from_pylist([{"prompt": f"p{i}", "score_chosen": 1.0} for i in range(3)])
    pq.write_table(full, folder / "train-00000-of-00003.parquet")
    pq.write_table(full.slice(0, 0), folder / "train-00001-of-00003.parquet")
    pq.write_table(full.slice(1), folder / "train-00002-of-00003.parquet")
    assert load_source(str(tmp_path / "hubby"), "train")["prompt"] == ["p0", "p1", "p2", "p1", "p2"]
    # every shard empty: the dataset has no rows, said as of one file of none ("split 'train' has no rows" came later)
    for i in (0, 2):
        pq.write_table(full.slice(0, 0), folder / f"train-{i:05d}-of-00003.parquet")
    with pytest.raises(DataError, match=r"^dataset '\S*hubby': the 3 shards of split 'train' \(data/train-00000-of-"
                                        r"00003\.parquet, .*\) hold no rows: give a dataset that has rows"):
        load_source(str(tmp_path / "hubby"), "train", "dataset")


def test_shards_whose_numbers_differ_in_width_load_unchanged(tmp_path):
    # only text beside numbers is refused (datasets casts it without a word); float32 or int64 beside float64 loads as
    # float64, every value kept
    folder = tmp_path / "hubby" / "data"
    folder.mkdir(parents=True)
    for name, kind in (("f32", pa.float32()), ("int", pa.int64())):
        pq.write_table(pa.table({"prompt": ["p"], "score_chosen": pa.array([0.5], pa.float64())}),
                       folder / f"{name}-00000-of-00002.parquet")
        pq.write_table(pa.table({"prompt": ["q"], "score_chosen": pa.array([2], kind)}),
                       folder / f"{name}-00001-of-00002.parquet")
        assert load_source(str(tmp_path / "hubby"), name)["score_chosen"] == [0.5, 2.0]


def test_shards_of_integers_and_whole_floats_load_as_floats(tmp_path):
    """A column of integers in the first shard and whole floats in another loaded as int64 (2.0 read as 2: the float
    shard's type lost); a column that is a float in any shard loads as float64, whichever shard comes first."""
    folder = tmp_path / "hubby" / "data"
    folder.mkdir(parents=True)
    for i, (value, kind) in enumerate([(1, pa.int64()), (2.0, pa.float32()), (3, pa.int32())]):
        pq.write_table(pa.table({"prompt": [f"p{i}"], "score_chosen": pa.array([value], kind)}),
                       folder / f"train-0000{i}-of-00003.parquet")
    ds = load_source(str(tmp_path / "hubby"), "train")
    assert ds.features["score_chosen"] == datasets.Value("float64") and ds["score_chosen"] == [1.0, 2.0, 3.0]
    assert [type(v) for v in ds["score_chosen"]] == [float] * 3
    # a fraction beside integers failed the load ("Float value 1.5 was truncated converting to int64")
    pq.write_table(pa.table({"prompt": ["p1"], "score_chosen": [1.5]}), folder / "train-00001-of-00003.parquet")
    assert load_source(str(tmp_path / "hubby"), "train")["score_chosen"] == [1.0, 1.5, 3.0]


def test_a_rewritten_dataset_keeps_one_arrow_copy_in_the_cache(tmp_path, monkeypatch):
    # datasets caches an Arrow copy of every parquet it reads, keyed by the file's modification time: a run's
    # dataset written again (every re-run of 01_construct) added a copy to the shared cache each time
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf"))
    row = {"prompt": "p", "prompt_id": "i", "messages": [], "score_chosen": 1.0, "score_rejected": 0.0,
           "reference_response": None, "chosen": [], "rejected": []}
    for n in (3, 5, 4):
        write_split(datasets.Dataset.from_list([row] * n, features=SEED_FEATURES), tmp_path / "ds")
        assert len(load_source(str(tmp_path / "ds"))) == n
        arrows = list((tmp_path / "hf").rglob("*.arrow"))
        assert len(arrows) == 1, arrows
    other = tmp_path / "other.parquet"  # another dataset keeps its own copy
    datasets.Dataset.from_list([row] * 2, features=SEED_FEATURES).to_parquet(str(other))
    assert len(load_source(str(other))) == 2 and len(list((tmp_path / "hf").rglob("*.arrow"))) == 2
    assert len(load_source(str(tmp_path / "ds"))) == 4  # and the first reads its copy again, unchanged
    assert len(list((tmp_path / "hf" / "repro").glob("*/*.lock"))) == 2  # locks of removed copies go with them
    other.unlink()  # a dataset removed (a run deleted): its copy goes when a copy is next made
    write_split(datasets.Dataset.from_list([row] * 6, features=SEED_FEATURES), tmp_path / "ds")
    assert len(load_source(str(tmp_path / "ds"))) == 6 and len(list((tmp_path / "hf").rglob("*.arrow"))) == 1


def test_a_split_is_not_read_from_files_of_another_split_that_begins_with_its_name(tmp_path):
    """`train` also read train_prefs.parquet beside train.parquet (a `{split}*` glob), with no word."""
    row = {"prompt": "p", "prompt_id": "i", "messages": [], "score_chosen": 1.0, "score_rejected": 0.0,
           "reference_response": None, "chosen": [], "rejected": []}
    for name, n in (("train", 2), ("train_prefs", 3), ("train-00001-of-00002", 4)):
        datasets.Dataset.from_list([row] * n, features=SEED_FEATURES).to_parquet(str(tmp_path / f"{name}.parquet"))
    assert len(load_source(str(tmp_path), "train")) == 6
    assert len(load_source(str(tmp_path), "train_prefs")) == 3


def test_a_folder_of_several_formats_is_refused_not_read_in_part(tmp_path):
    (tmp_path / "mixed").mkdir()
    datasets.Dataset.from_list([{"prompt": "p"}] * 8).to_parquet(str(tmp_path / "mixed" / "a.parquet"))
    (tmp_path / "mixed" / "b.jsonl").write_text('{"prompt": "q"}\n')
    with pytest.raises(DataError, match=r"holds data files of 2 formats \(.jsonl, .parquet\), of which datasets would "
                                        r"read one and leave the others out without a word"):
        load_source(str(tmp_path / "mixed"), "train")


def test_the_hub_commit_a_run_read_is_recorded(tmp_path, monkeypatch, train_rows):
    # a hub id read without source_revision recorded `revision: None` and nothing else: which data a rebuild used was
    # unknown (a model's commit is known: revisions.model_identity)
    from repro.construct import stages
    from repro.manifest import Manifest
    from repro.parameters import ConstructParams
    from repro.paths import RunDir
    from repro.revisions import hub_commit

    snapshot = _in_the_hub_cache(tmp_path, monkeypatch, train_rows[:3])
    assert hub_commit("someone/cached") == "0123abcd"
    assert hub_commit("someone/absent") is None and hub_commit(str(snapshot)) is None
    p = ConstructParams(run_dir=str(tmp_path / "run"), source="someone/cached", candidate_columns=[],
                        include_original_pair=True, scorer_model="builtin:tiny-pairrm", device="cpu")
    stages.load(stages.begin(p))
    load = Manifest(RunDir(tmp_path / "run")).read()["stages"]["load"]
    assert load["revision"] is None and load["commit"] == "0123abcd"


def test_a_load_looks_at_each_file_once(tmp_path, monkeypatch):
    """A split's shards had their footers read twice (their check, then their row counts when read), and a file of
    a line that is not UTF-8 was read to its first line (its check), then again to that line (the error): once now,
    with the same messages."""
    import sys

    from repro import sources

    looked: list[str] = []
    for name in ("ParquetFile", "read_metadata"):  # (datasets' own reads of the files are not counted)
        def spy(where, *args, real=getattr(pq, name), **kwargs):
            if sys._getframe(1).f_globals["__name__"] == "repro.sources":
                looked.append(Path(where).name)
            return real(where, *args, **kwargs)
        monkeypatch.setattr(pq, name, spy)
    folder = tmp_path / "hubby" / "data"
    folder.mkdir(parents=True)
    for i in range(2):
        pq.write_table(pa.table({"prompt": [f"p{i}"]}), folder / f"train-0000{i}-of-00002.parquet")
    assert load_source(str(tmp_path / "hubby"), "train")["prompt"] == ["p0", "p1"]
    assert sorted(looked) == ["train-00000-of-00002.parquet", "train-00001-of-00002.parquet"]
    looked.clear()
    pq.write_table(pa.table({"prompt": ["p"]}), tmp_path / "rows.parquet")
    assert load_source(str(tmp_path / "rows.parquet"))["prompt"] == ["p"] and looked == ["rows.parquet"]
    opened = []
    monkeypatch.setattr(sources, "text_lines", lambda path, name: opened.append(path) or text_lines(path, name))
    for suffix in (".jsonl", ".json"):
        latin1 = tmp_path / f"latin1{suffix}"
        latin1.write_bytes(b'{"prompt": "a"}\n' + '{"prompt": "caf\xe9"}\n'.encode("latin-1"))
        with pytest.raises(DataError, match=rf"^line 2 of source '\S*latin1{suffix}' is not UTF-8 text \(byte 0xe9"):
            load_source(str(latin1))
        assert opened == [latin1]
        opened.clear()


def test_the_checks_read_a_json_file_to_its_first_row_only(tmp_path, monkeypatch):
    """`repro run --check` (file_problem without the load's name) asks whether a json file holds a row: it read
    every line of the file since the load's check reads them all (a large source, read whole by a check)."""
    from repro import sources

    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n" + "".join(f'{{"prompt": "p{i}"}}\n' for i in range(500)))
    read: list[int] = []

    def counting(path, name):
        for number, line in text_lines(path, name):
            read.append(number)
            yield number, line
    monkeypatch.setattr(sources, "text_lines", counting)
    assert sources.file_problem(rows) is None and read == [1, 2]
    read.clear()
    assert sources.file_problem(rows, "source 'rows.jsonl'") is None and len(read) == 501  # the load's: every line
    (blank := tmp_path / "blank.jsonl").write_text("\n \n")
    assert "holds no rows" in sources.file_problem(blank)


def test_shards_of_nulls_or_lists_of_other_numbers_load_as_one(tmp_path):
    """A column of nulls only in the first shard (a chunk whose scores are all missing) refused the load ("Couldn't
    cast array of type int64 to null", the message naming another column), and lists of integers beside lists of
    floats were refused: each column now loads as every shard's types allow; text beside numbers stays refused."""
    folder = tmp_path / "hubby" / "data"
    folder.mkdir(parents=True)
    first = datasets.Dataset.from_dict({"prompt": ["p0"], "score_chosen": [None], "scores": [[1, 2]]})
    first.to_parquet(str(folder / "train-00000-of-00002.parquet"))  # (with datasets' own metadata: its features)
    assert pq.read_schema(folder / "train-00000-of-00002.parquet").field("score_chosen").type == pa.null()
    pq.write_table(pa.table({"prompt": ["p1"], "score_chosen": [2.5], "scores": [[0.5, 1.0]]}),
                   folder / "train-00001-of-00002.parquet")
    ds = load_source(str(tmp_path / "hubby"), "train")
    assert ds["score_chosen"] == [None, 2.5] and ds["scores"] == [[1.0, 2.0], [0.5, 1.0]]
    assert ds.features["score_chosen"] == datasets.Value("float64")
    pq.write_table(pa.table({"prompt": ["p0"], "score_chosen": [1], "scores": [[1]]}),
                   folder / "train-00000-of-00002.parquet")
    pq.write_table(pa.table({"prompt": ["p1"], "score_chosen": ["2.5"], "scores": [[0.5]]}),
                   folder / "train-00001-of-00002.parquet")
    with pytest.raises(DataError, match=r"column 'score_chosen' holds string in .* and int64 in"):
        load_source(str(tmp_path / "hubby"), "train")


def _loose_folder(folder: Path, names: list[str]) -> Path:
    """A folder of data files straight in it (no data/), each named as given, of one row each."""
    folder.mkdir()
    for k, name in enumerate(names):
        ds = datasets.Dataset.from_list([{"prompt": f"{name} {k}", "score_chosen": 1.0, "score_rejected": 0.0}])
        ds.to_parquet(folder / name) if name.endswith(".parquet") else ds.to_json(folder / name)
    return folder


def test_a_mistyped_split_of_a_folder_of_shards_offers_split_names_not_file_stems(tmp_path):
    """A folder of train_prefs-00000-of-00002.parquet ... (no data/ folder): a mistyped split was told "it has ['test',
    'test_prefs', 'test_prefs-00000', 'test_prefs-00000-of', 'test_prefs-00000-of-00001', 'train', ...]", its files'
    names cut at each '-'; it names the splits now, those that load (datasets' and the files' own), and no others
    (`repro run --check`'s: tests/test_preflight.py)."""
    shards = _loose_folder(tmp_path / "shards", ["train_prefs-00000-of-00002.parquet",
                                                 "train_prefs-00001-of-00002.parquet",
                                                 "test_prefs-00000-of-00001.parquet"])
    for split in ("train_prefs", "train", "test_prefs", "test"):
        assert len(load_source(str(shards), split)) == (2 if split.startswith("train") else 1), split
    said = "has no split 'train_pref'; it has ['test', 'test_prefs', 'train', 'train_prefs']"
    with pytest.raises(DataError, match=rf"^dataset '\S*shards' {re.escape(said)}\. Did you mean 'train_prefs'\? Set "
                                        r"dataset_split to one of those\.$"):
        load_source(str(shards), "train_pref", "dataset")
    # a folder of train.jsonl and test.jsonl: the splits datasets names, which are the files' names
    plain = _loose_folder(tmp_path / "plain", ["train.jsonl", "test.jsonl"])
    with pytest.raises(DataError, match=r"^source '\S*plain' has no split 'tset'; it has \['test', 'train'\]\. Did you "
                                        r"mean 'test'\? Set source_split to one of those\.$"):
        load_source(str(plain), "tset")


def test_the_splits_held_by_a_folder_of_loose_data_files_are_those_datasets_names(tmp_path):
    """held_splits (the card's and 04_compare's "other splits") said none of a folder of train.jsonl and test.jsonl,
    or of train_prefs.parquet and test_prefs.parquet, with no data/ folder; it names them as datasets does now, less
    the split read (train_prefs.parquet is datasets' split train: not another split beside train_prefs)."""
    from repro.compare import load_side

    plain = _loose_folder(tmp_path / "plain", ["train.jsonl", "test.jsonl"])
    prefs = _loose_folder(tmp_path / "prefs", ["train_prefs.parquet", "test_prefs.parquet"])
    mixed = _loose_folder(tmp_path / "mixed", ["train_prefs.jsonl", "validation.jsonl", "test_prefs.jsonl"])
    rows = _loose_folder(tmp_path / "rows", ["mine.jsonl", "yours.jsonl"])
    for folder, want in ((plain, ["test", "train"]), (prefs, ["test", "train"]),
                         (mixed, ["test", "train", "validation"]), (rows, ["train"])):
        assert held_splits(str(folder)) == want, folder.name
        assert sorted(datasets.load_dataset(str(folder))) == want  # as datasets itself names them
    assert held_splits(str(prefs), ["train"]) == ["test"]
    # beside the split read by its file's own name (train_prefs), the others by theirs: test_prefs, not datasets' test
    assert held_splits(str(prefs), ["train_prefs"]) == ["test_prefs"]
    assert held_splits(str(mixed), ["train_prefs"]) == ["test_prefs", "validation"]
    assert held_splits(str(mixed), ["test_prefs", "train"]) == ["validation"]
    assert held_splits(str(plain / "train.jsonl")) == []  # a file has no splits
    assert load_side("reference", str(prefs), "train_prefs").other_splits == ["test_prefs"]
    assert load_side("reference", [str(plain), str(mixed)], "test").other_splits == ["train", "validation"]


def test_the_stand_in_marker_beside_repro_scores_output_is_no_data_file(tmp_path, train_rows):
    """A folder of `repro score`'s output and the repro_stand_in.json it writes beside it, given as a folder, was
    refused as "holds data files of 2 formats (.json, .jsonl)": the marker was counted (and datasets read it) as rows.
    Now it is left out as datasets leaves out its own records: the folder's one split is its rows."""
    rows = tmp_path / "scored" / "h4.jsonl"
    rows.parent.mkdir()
    rows.write_text("".join(json.dumps(r) + "\n" for r in train_rows[:5]))
    mark_scorer(rows, {"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    assert load_source(str(rows.parent), "train")["prompt"] == [r["prompt"] for r in train_rows[:5]]
    assert held_splits(str(rows.parent)) == ["train"]
    with pytest.raises(DataError, match=r"has no split 'train_prefs'; it has \['h4', 'train'\]\."):
        load_source(str(rows.parent))


def test_a_readmes_configs_are_honoured_beside_the_marker_repro_score_writes(tmp_path, tiny_pairrm_dir, train_rows):
    """A hub-style folder whose README.md declares its configs (the split's data_files, the features) and that holds
    `repro score`'s output lost the README's features once repro_stand_in.json was beside the rows (`score_chosen`,
    declared float32, read as float64): the marker, no data, made the folder read from its files alone. Now it is
    read as it is without the marker."""
    folder, src = tmp_path / "hub", tmp_path / "input.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in train_rows[:4]))
    assert main(["score", "--model", str(tiny_pairrm_dir), "--input", str(src), "--output", str(folder / "h4.jsonl"),
                 "--device", "cpu", "--source-maxlength", "64", "--candidate-maxlength", "32"]) == 0
    features = datasets.Dataset.from_json(str(folder / "h4.jsonl")).features
    features["score_chosen"] = datasets.Value("float32")
    card = DatasetCardData(configs=[{"config_name": "default",
                                     "data_files": [{"split": "train_prefs", "path": "h4.jsonl"}]}])
    DatasetInfosDict({"default": DatasetInfo(features=features)}).to_dataset_card_data(card)
    DatasetCard(f"---\n{card.to_yaml()}\n---\n").save(folder / "README.md")
    marked = load_source(str(folder), "train_prefs")
    (folder / STAND_IN_MARKER).unlink()
    bare = load_source(str(folder), "train_prefs")
    assert marked.features == bare.features == features and marked.to_list() == bare.to_list()


def test_paths_with_square_brackets_are_read_as_themselves(tmp_path, train_rows):
    """datasets reads the files it is given as glob patterns: prompts[v2].jsonl matched nothing (a bare StopIteration
    from inside datasets), nor did the shards of a dataset folder pub[1] ("could not be read as one dataset"), nor a
    file [x] beside the marker `repro score` writes. Each is read as itself now; a folder of loose data files, which
    datasets' own folder loader lists by patterns under the folder's path, is refused saying so."""
    rows = train_rows[:5]
    source = tmp_path / "prompts[v2].jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = load_source(str(source))
    assert ds["prompt"] == [r["prompt"] for r in rows]
    write_split(ds, tmp_path / "pub[1]")
    assert load_source(str(tmp_path / "pub[1]"))["prompt"] == ds["prompt"]
    ds.to_parquet(str(tmp_path / "rows*.parquet"))
    assert load_source(str(tmp_path / "rows*.parquet"))["prompt"] == ds["prompt"]
    marked = _loose_folder(tmp_path / "scored", ["h4[1].jsonl"])
    mark_scorer(marked / "h4[1].jsonl", {"model": "builtin:tiny-pairrm", "kind": "pairrm", "stand_in": True})
    assert len(load_source(str(marked), "train")) == 1
    loose = _loose_folder(tmp_path / "loose[2]", ["rows.jsonl"])
    with pytest.raises(DataError, match=re.escape(f"source {str(loose)!r} has [, ], * or ? in its path")):
        load_source(str(loose), "train")
    # a compressed file so named: datasets' gzip reader takes [1] for an address ("'1' does not appear to be an IPv4
    # or IPv6 address", and the advice to check a file that is sound); refused saying what to do
    packed = tmp_path / "rows[1].jsonl.gz"
    packed.write_bytes(gzip.compress(source.read_bytes()))
    with pytest.raises(DataError, match=re.escape(f"source {str(packed)!r} is compressed and has [, ], * or ? in its "
                                                  "path, which datasets cannot read: rename it, or decompress it")):
        load_source(str(packed))
