"""Families of runs (repro.family, repro.cli.family, repro.analysis.family_view, notebooks/05_family): grids, member names and fingerprints,
reuse of complete members, the family view on hand-built members, and the demo family end to end."""

from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import html_elements, shown_text
from markdown_it import MarkdownIt

from killed_run import command_line
from repro import family as fam
from repro import paths
from repro.analysis import family_view as family_view_module
from repro.analysis.family_view import differing_parameters, family_view, origins, show_verdicts
from repro import cli
from repro.cli import family as family_cli
from repro.cli import main
from repro.errors import DataError, ParameterError
from repro.manifest import Manifest
from repro.parameters import FamilyViewParams, code_span, load_params_file, one_line
from repro.paths import RunDir

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "params" / "demo.yaml"
DEMO_FAMILY = ROOT / "params" / "demo_family.yaml"


def _plan(values: dict, tmp_path: Path, grid_args=None) -> fam.Family:
    return fam.plan_family(values, default_name="f", grid_args=grid_args, out=str(tmp_path / "f"))


def test_grid_arguments_read_values_as_yaml():
    assert fam.parse_grid_args(["mini_index=0,1,2,3", "scorer_model=builtin:tiny-pairrm,x/y"]) == {
        "mini_index": [0, 1, 2, 3], "scorer_model": ["builtin:tiny-pairrm", "x/y"]}
    with pytest.raises(ParameterError, match="--grid expects KEY=VALUE1,VALUE2"):
        fam.parse_grid_args(["mini_index"])
    # a value is read as --set reads one: text YAML would cut at a ' #' or make a mapping of is taken as typed
    assert fam.parse_grid_args(["source=data dir/a #1.jsonl, data dir/b.jsonl", "card_dataset=note: v2.jsonl,x",
                                "scorers=[{name: a}], [{name: b}]", "known_recipe={a: b}, c: d"]) == {
        "source": ["data dir/a #1.jsonl", "data dir/b.jsonl"], "card_dataset": ["note: v2.jsonl", "x"],
        "scorers": [[{"name": "a"}], [{"name": "b"}]], "known_recipe": [{"a": "b"}, "c: d"]}
    # a ' #' cut the list's end off and the values were split at every comma, quoted ones too
    assert fam.parse_grid_args(["known_recipe='PairRM, best vs worst',UF #2", 'x="data dir/a, b.jsonl",run #2']) == {
        "known_recipe": ["PairRM, best vs worst", "UF #2"], "x": ["data dir/a, b.jsonl", "run #2"]}
    with pytest.raises(ParameterError, match="--grid scorers=.a, b: the values are not a YAML list"):
        fam.parse_grid_args(["scorers=[a, b"])
    # a key given twice: the last list replaced the first, and its members were left out without a word
    with pytest.raises(ParameterError, match=r"--grid mini_index=2: mini_index is set twice on the command line "
                                             r"\(--grid mini_index=0,1 before\): give its values in one --grid"):
        fam.parse_grid_args(["mini_index=0,1", "mini_index=2"])
    # --set and --grid of one key: the grid's values won, the --set value was dropped without a word
    from repro import cli

    args = cli.build_parser("run").parse_args(["run", str(ROOT / "params" / "demo.yaml"), "--set", "limit=5", "--grid",
                                               "limit=6,7", "--check"])  # (imports repro.cli.family)
    with pytest.raises(ParameterError, match=r"--grid and --set both give limit: a member takes the grid's value"):
        cli.family.main(args)


def test_a_grid_expands_to_the_product_in_the_order_written(tmp_path):
    values = {**load_params_file(DEMO), "mini_count": 4,
              "family": {"name": "sweep", "grid": {"mini_index": [0, 1], "bootstrap_seed": [5, 6, 7]}}}
    family = _plan(values, tmp_path)
    assert family.name == "sweep" and family.root == tmp_path / "f"
    assert [m.name for m in family.members] == [
        f"mini_index-{i}__bootstrap_seed-{s}" for i in (0, 1) for s in (5, 6, 7)]
    first = family.members[0]
    assert first.values["mini_index"] == 0 and first.values["bootstrap_seed"] == 5 and "family" not in first.values
    assert first.run_dir == tmp_path / "f" / first.name and first.values["run_name"] == f"sweep-{first.name}"
    assert first.record("sweep")["grid"] == {"mini_index": 0, "bootstrap_seed": 5}
    # --member takes a name or an index (a Slurm array task id)
    assert family.member("mini_index-1__bootstrap_seed-6") == family.member("4") == family.members[4]
    # fingerprints: one per member, the same when planned again, another when a parameter changes
    assert len({json.dumps(m.fingerprint, sort_keys=True) for m in family.members}) == 6
    assert [m.fingerprint for m in _plan(values, tmp_path).members] == [m.fingerprint for m in family.members]
    changed = _plan({**values, "batch_tokens": 4096}, tmp_path)
    assert changed.members[0].fingerprint != first.fingerprint
    # a local source rewritten in place is other data: its members are not reused (they were, silently)
    source = tmp_path / "rows.jsonl"
    source.write_text((ROOT / "src" / "repro" / "data" / "demo_prompts.jsonl").read_text())
    local = _plan({**values, "source": str(source)}, tmp_path).members[0].fingerprint
    assert _plan({**values, "source": str(source)}, tmp_path).members[0].fingerprint == local
    source.write_text(source.read_text().replace("Python", "Rust"))
    assert _plan({**values, "source": str(source)}, tmp_path).members[0].fingerprint != local
    # --grid adds keys to the file's grid, and replaces the values of a key it names
    more = _plan(values, tmp_path, grid_args={"bootstrap_seed": [9]})
    assert [m.name for m in more.members] == ["mini_index-0__bootstrap_seed-9", "mini_index-1__bootstrap_seed-9"]


def test_a_bundle_that_varies_a_parameter_the_members_read_is_planned(tmp_path):
    # one of its parameters read (mini_index), another not (hub_repo_id: 03_card's, not run): the members differ
    values = {**load_params_file(DEMO), "mini_count": 4, "notebooks": ["01_construct"],
              "family": {"grid": {"part": [{"name": "a", "mini_index": 0, "hub_repo_id": "x/y"},
                                           {"name": "b", "mini_index": 1}]}}}
    assert [m.values["mini_index"] for m in _plan(values, tmp_path).members] == [0, 1]
    # alike in what the members read, unlike in the rest: one run twice
    values["family"]["grid"]["part"][0]["card_split"] = values["family"]["grid"]["part"][1]["card_split"] = "t"
    values["family"]["grid"]["part"][1].update(mini_index=0, hub_repo_id="z/w")  # (card_split alike: not named)
    with pytest.raises(ParameterError, match=r"family\.grid\.part in .*: hub_repo_id is read by 03_card, which the "
                                             r"members do not run \(notebooks: 01_construct\)"):
        _plan(values, tmp_path)


def test_members_alike_in_every_value_that_shapes_their_data_are_refused_as_one_run(tmp_path, capsys):
    # a grid over what shapes no data was planned as a sweep: byte-identical members, "differ in: generation_seed"
    values = {**load_params_file(DEMO), "limit": 4, "notebooks": ["01_construct", "02_analyze"]}
    for grid, why in [({"generation_seed": [0, 1]}, r"generate is false, so no candidates are generated and "
                                                    r"generation_seed shapes nothing; set generate: true, or take"),
                      ({"temperature": [0.5, 0.9]}, r"generate is false"),
                      ({"mini_index": [0], "chunk_size": [4, 8]}, r"chunk_size only decides how the work is cut and "
                                                                  r"run, not what the data holds"),
                      # a key its selection leaves idle in every member: two members of one dataset
                      ({"length_penalty": [0.0, 0.5]}, r"length_penalty acts only with selection: "
                                                       r"best_worst_length_penalised, which neither member has; set "
                                                       r"that, or take length_penalty out of the grid"),
                      ({"opts": [{"name": "base"}, {"name": "four", "limit": 4}]},
                       r"limit is 4 in both once resolved \(the params file's value where the grid sets none")]:
        with pytest.raises(ParameterError, match=rf"family\.grid\.{list(grid)[-1]} in the params file does not tell "
                                                 rf"members \S+ and \S+ apart, they would be the same run: {why}"):
            _plan({**values, "family": {"grid": grid}}, tmp_path)
    # a key idle for some members only (a seed beside a selection that takes none): the advice names bundles
    grid = {"selection": ["best_worst", "random_pair"], "selection_seed": [0, 1]}
    with pytest.raises(ParameterError, match=r"selection_seed acts only with selection: best_random or random_pair, "
                                             r"which neither member has; set that, or take selection_seed out of the "
                                             r"grid; or vary it only where it acts, each combination a bundle of a key "
                                             r"of your own: `runs: \[\{selection: best_worst\}, \{selection: "
                                             r"random_pair, selection_seed: 0\}, \{selection: random_pair, "
                                             r"selection_seed: 1\}\]`"):
        _plan({**values, "family": {"grid": grid}}, tmp_path)
    runs = [{"selection": "best_worst"}, *({"selection": "random_pair", "selection_seed": s} for s in (0, 1))]
    assert len(_plan({**values, "family": {"grid": {"runs": runs}}}, tmp_path).members) == 3
    # what tells them apart: a seed where the members generate, a limit the file does not set
    policy = {"generate": True, "policy_model": "builtin:tiny-policy", "candidate_columns": ["resp0", "resp1"]}
    assert len(_plan({**values, **policy, "family": {"grid": {"generation_seed": [0, 1]}}}, tmp_path).members) == 2
    penalised = {"selection": "best_worst_length_penalised", "family": {"grid": {"length_penalty": [0.0, 0.5]}}}
    assert len(_plan({**values, **penalised}, tmp_path).members) == 2
    assert len(_plan({**values, "family": {"grid": {"opts": [{"name": "a"}, {"name": "b", "limit": 3}]}}},
                     tmp_path).members) == 2
    # the verifier's command: refused before anything is written
    out = tmp_path / "bad5"
    assert main(["run", str(DEMO), "--set", "limit=4", "--set", "notebooks=[01_construct, 02_analyze]",
                 "--grid", "generation_seed=0,1", "--out", str(out), "--check"]) == 2
    assert "family.grid.generation_seed in --grid does not tell members generation_seed-0 and generation_seed-1 " \
           "apart, they would be the same run: generate is false" in capsys.readouterr().err and not out.exists()


def test_grid_on_a_file_of_no_family_goes_where_out_or_set_run_dir_says(tmp_path, capsys):
    # --set run_dir=NEW is the family's folder as --out is (it was refused as "its run's folder")
    for where in (["--out", str(tmp_path / "a")], ["--set", f"run_dir={tmp_path / 'b'}"]):
        assert main(["run", str(DEMO), "--grid", "mini_index=0,1", "--set", "mini_count=4", *where, "--check"]) == 0, \
            capsys.readouterr().err


def test_a_grid_over_list_values_names_each_member_by_a_hash_of_its_list(tmp_path):
    # a list is no folder name: the member is named by a hash of it (a NameError once the hash's import was lost)
    values = {**load_params_file(DEMO),
              "family": {"grid": {"candidate_columns": [["resp0", "resp1"], ["resp2", "resp3"]]}}}
    names = [m.name for m in _plan(values, tmp_path).members]
    assert len(set(names)) == 2 and all(re.fullmatch(r"candidate_columns-h[0-9a-f]{8}", n) for n in names)
    assert names == [m.name for m in _plan(values, tmp_path).members]


def test_members_and_families_named_in_any_script_keep_their_letters(tmp_path):
    # a grid value in another script made a member "empty" (two of them: the same folder) and a family name of its
    # letters was refused, as dataset run names were (repro.paths.dataset_run_name keeps them)
    values = {**load_params_file(DEMO), "family": {"name": "数据族", "grid": {"source_split": ["训练 数据", "训练 结果"]}}}
    family = fam.plan_family(values, default_name="f")  # (the family's folder: runs/<its name>)
    assert family.root.name == "数据族" and family.name == "数据族"
    assert [m.name for m in family.members] == ["source_split-训练-数据", "source_split-训练-结果"]
    values["family"]["member_name"] = "{source_split} é"
    assert [m.name for m in _plan(values, tmp_path).members] == ["训练-数据-é", "训练-结果-é"]
    # vowel signs (marks): two values were one member's name ('known_recipe-ड-ट'), the family's name refused
    values["family"] = {"name": "डेटा", "grid": {"source_split": ["डेटा", "डाटा", "re\u0301sume\u0301"]}}
    assert fam.plan_family({**values, "family": {"name": "cafe\u0301", "grid": {"mini_index": [0]}}},
                           default_name="f").root.name == "caf\u00e9"  # (composed, as its members' names)
    family = fam.plan_family(values, default_name="f")
    assert family.name == "डेटा" and [m.name for m in family.members] == [
        "source_split-डेटा", "source_split-डाटा", "source_split-résumé"]


def test_a_name_starting_with_a_lone_combining_mark_drops_the_mark(tmp_path):
    # "\u0301x" (an accent on no letter) made the folder "source_split-\u0301x", a name starting with a stray accent
    values = {**load_params_file(DEMO), "family": {"grid": {"source_split": ["\u0301x", "\u0301", "a \u0301b"]}}}
    assert [m.name for m in _plan(values, tmp_path).members] == [
        "source_split-x", "source_split-empty", "source_split-a-b"]
    values["family"] = {"grid": {"source_split": ["\u0301x"]}, "member_name": "\u0301{source_split}_e\u0301"}
    assert [m.name for m in _plan(values, tmp_path).members] == ["x_\u00e9"]  # (and composed: é)
    # a run named after its dataset's file: runs/x, not runs/\u0301x
    assert paths.dataset_run_name("/data/\u0301x.jsonl") == "x" and paths.dataset_run_name("\u0301.jsonl") == "dataset"
    assert paths.folder_safe("\u0301\u0301re\u0301sume\u0301") == "r\u00e9sum\u00e9"


def test_bundles_set_several_parameters_together_and_name_members(tmp_path):
    values = {**load_params_file(DEMO), "mini_count": 2, "family": {
        "grid": {"part": [{"name": "first", "part_start": 0, "part_stop": 20},
                          {"part_start": 20, "part_stop": 40}],
                 "mini_index": [0, 1]},
        "member_name": "{part}_mini_{mini_index}"}}
    family = _plan(values, tmp_path)
    assert [m.name for m in family.members] == ["first_mini_0", "first_mini_1", "part1_mini_0", "part1_mini_1"]
    assert (family.members[2].values["part_start"], family.members[2].values["part_stop"]) == (20, 40)
    assert family.members[0].grid_values == {"part": {"name": "first", "part_start": 0, "part_stop": 20},
                                             "mini_index": 0}
    with pytest.raises(ParameterError, match=r"family\.grid\.part .*'mini_idx' in .* is not a parameter"):
        _plan({**values, "family": {"grid": {"part": [{"mini_idx": 1}]}}}, tmp_path)
    with pytest.raises(ParameterError, match=r"member_name '\{parts\}' .* cannot be filled"):
        _plan({**values, "family": {**values["family"], "member_name": "{parts}"}}, tmp_path)


def test_a_grid_over_a_parameter_whose_values_are_mappings_gives_that_parameter_each_mapping(tmp_path):
    # known_recipe's mappings were spread as bundles: the members' `source` became "a" and "b", known_recipe unset
    recipes = [{"source": "a", "slice": "all"}, {"source": "b", "slice": "all"}]
    values = {**load_params_file(DEMO), "family": {"grid": {"known_recipe": recipes}}}
    family = _plan(values, tmp_path)
    assert [m.values["known_recipe"] for m in family.members] == recipes
    assert {m.values["source"] for m in family.members} == {values["source"]}
    assert all(re.fullmatch(r"known_recipe-h[0-9a-f]{8}", m.name) for m in family.members)
    assert family.members[1].grid_values == {"known_recipe": recipes[1]}
    assert fam.grid_keys({"known_recipe": recipes}) == {"known_recipe"}
    # (scorer_options' were refused: output_index is no parameter a member can set)
    options = _plan({**values, "family": {"grid": {"scorer_options": [{"output_index": 0}, {"output_index": 1}]}}},
                    tmp_path)
    assert [m.values["scorer_options"] for m in options.members] == [{"output_index": 0}, {"output_index": 1}]
    # alike in what is read: the duplicate checks still say so
    with pytest.raises(ParameterError, match=r"family\.grid\.known_recipe in .* lists \{'source': 'a', 'slice': "
                                             r"'all'\} twice: give each value once"):
        _plan({**values, "family": {"grid": {"known_recipe": [recipes[0], dict(recipes[0])]}}}, tmp_path)
    with pytest.raises(ParameterError, match=r"family\.grid\.known_recipe in .*: known_recipe is read by 02_analyze "
                                             r"and 03_card, which the members do not run"):
        _plan({**values, "notebooks": ["01_construct"]}, tmp_path)
    # a bundle under the name of a parameter that takes no mapping is a bundle still (it was refused as that
    # parameter's value: "part_start: Input should be a valid integer")
    parts = [{"name": "p0", "part_start": 0, "part_stop": 20}, {"name": "p1", "part_start": 20, "part_stop": 40}]
    family = _plan({**values, "family": {"grid": {"part_start": parts}}}, tmp_path)
    assert [m.name for m in family.members] == ["p0", "p1"]
    assert [(m.values["part_start"], m.values["part_stop"]) for m in family.members] == [(0, 20), (20, 40)]


def test_a_complete_member_of_the_same_fingerprint_is_not_run_again(tmp_path, monkeypatch, capsys):
    values = {**load_params_file(DEMO), "mini_count": 2, "family": {"grid": {"mini_index": [0, 1]}}}
    family = _plan(values, tmp_path)
    ran = []
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append((root, kw["record"])) or 0)
    done, other = family.members
    manifest = Manifest(RunDir(done.run_dir))
    manifest.start_run({}, ["01_construct"])
    manifest.update(family=done.record(family.name), fingerprint=done.fingerprint)
    manifest.finish_run("complete")
    assert family_cli.run_member(family, done) == "reused" and not ran
    assert "is complete with the same parameters" in capsys.readouterr().out
    # another fingerprint (the parameters changed since), or a run that did not finish: it runs
    manifest.update(fingerprint="0" * 16)
    assert family_cli.run_member(family, done) == "done"
    manifest.update(fingerprint=done.fingerprint)
    manifest.finish_run("failed")
    assert family_cli.run_member(family, done) == "done"
    assert family_cli.run_member(family, other) == "done"
    assert [r for r, _ in ran] == [done.run_dir, done.run_dir, other.run_dir]
    assert ran[-1][1] == {"family": other.record(family.name)}


def test_a_view_value_the_members_differ_in_is_the_views_default_and_said(tmp_path, monkeypatch, capsys):
    # a grid over bootstrap_resamples: every member's interval in the view had used the first member's 100, unsaid
    values = {**load_params_file(DEMO), "mini_count": 2, "bootstrap_resamples": 300,
              "family": {"grid": {"mini_index": [0, 1], "bootstrap_resamples": [100, 200]}}}
    family = _plan(values, tmp_path)
    views = []
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: views.append(values) or 0)
    args = cli.build_parser("run").parse_args(["run", str(DEMO), "--out", str(tmp_path / "f")])
    assert family_cli.run_family(args, family) == 0
    assert views[-1]["notebooks"] == ["05_family"] and views[-1]["bootstrap_resamples"] == 1000
    assert views[-1]["bootstrap_seed"] == 0
    assert (f"family {family.name}: its members differ in bootstrap_resamples: the family view takes its default "
            f"(bootstrap_resamples=1000) for its own intervals") in capsys.readouterr().out


def test_ctrl_c_in_a_member_stops_the_family(tmp_path, monkeypatch, capsys):
    # one member after another: Ctrl-C stopped the member, then the next member and 05_family ran, and the
    # interrupted member was called FAILED (exit 1, 45 s later)
    import argparse

    parser = argparse.ArgumentParser()
    family_cli.configure(parser)
    args = parser.parse_args([str(DEMO), "--grid", "mini_index=0,1", "--set", "mini_count=2", "--out",
                              str(tmp_path / "f")])
    family = fam.plan_family(load_params_file(DEMO, args.overrides), default_name="demo",
                             grid_args=fam.parse_grid_args(args.grid), out=args.out)
    ran = []
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append(Path(root)) or 130)
    assert family_cli.run_family(args, family) == 130
    assert ran == [Path(family.members[0].run_dir)]  # neither the next member nor the family view
    err = capsys.readouterr().err
    assert "family demo: interrupted in member mini_index-0; mini_index-1 not run" in err
    assert "Run the same command again to continue" in err and "FAILED" not in err
    # one member alone (a Slurm array task) exited 0 when interrupted, so `afterok` went on as if it were done
    member = ["run", str(DEMO), "--grid", "mini_index=0,1", "--set", "mini_count=2", "--out", str(tmp_path / "f")]
    for code in (130, 1, 0):
        monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, code=code, **kw: code)
        assert main([*member, "--member", "1"]) == code


def test_ctrl_c_in_the_family_view_says_what_the_family_keeps(tmp_path, monkeypatch, capsys):
    # it said "0 finished chunks (every stage's) are safe in <family>/work": a family's folder has no work/
    from repro.cli import run as runner
    from repro.cli.interrupt import Interrupted

    args = cli.build_parser("run").parse_args(["run", str(DEMO), "--grid", "mini_index=0,1", "--set", "mini_count=2",
                                               "--out", str(tmp_path / "f")])
    family = fam.plan_family(load_params_file(DEMO, args.overrides), default_name="demo",
                             grid_args=fam.parse_grid_args(args.grid), out=args.out)
    monkeypatch.setattr(family_cli, "run_member", lambda family, member, **kw: "done")
    monkeypatch.setattr(runner, "ensure_kernel", lambda name=runner.KERNEL_NAME: name)

    def pressed(*args, **kwargs):
        raise Interrupted("Ctrl-C")

    monkeypatch.setattr(runner, "run_interruptible", pressed)
    assert family_cli.run_family(args, family) == 130
    assert capsys.readouterr().err == ("repro run: interrupted in 05_family: the members' runs are kept in their "
                                       "folders; run the same command again to write the family view.\n")
    assert Manifest(family.root).read()["status"] == "interrupted" and not (family.root / "work").exists()


def test_a_family_stopped_after_its_grid_changed_records_so_and_which_members_its_view_shows(tmp_path, monkeypatch,
                                                                                            capsys):
    # a complete family, its grid changed, stopped in the first new member: the folder's record said `complete` with
    # the new members while family.json, the figures and 05_family still showed the old ones
    import shutil

    from repro.cli import run as runner
    from repro.cli.interrupt import Interrupted

    root, stop_in = tmp_path / "f", []

    def execute(_, notebook, output, parameters, **kw):  # papermill, each notebook as cheap as can be
        if Path(output).parents[1].name in stop_in:
            raise Interrupted("Ctrl-C")
        if Path(notebook).stem == "05_family":
            family_view(FamilyViewParams(run_dir=parameters["run_dir"], bootstrap_resamples=100))
        Path(output).write_text("{}")

    monkeypatch.setattr(runner, "run_interruptible", execute)
    monkeypatch.setattr(family_cli, "ensure_kernel", lambda name=None: name)
    grid = ["run", str(DEMO), "--set", "mini_count=4", "--out", str(root), "--grid"]
    assert main([*grid, "mini_index=0,1"]) == 0
    old = ["mini_index-0", "mini_index-1"]
    record = Manifest(RunDir(root)).read()
    assert record["status"] == "complete" and record["view"] == old
    shown = (root / "family.json").read_bytes()
    stop_in.append("mini_index-2")
    assert main([*grid, "mini_index=2,3"]) == 130
    record = Manifest(RunDir(root)).read()
    assert record["status"] == "interrupted" and "interrupted in member mini_index-2" in record["error"]
    assert list(record["members"]) == ["mini_index-2", "mini_index-3"] and record["view"] == old
    assert (root / "family.json").read_bytes() == shown  # the earlier view stays, said to be of the earlier plan
    # 05_family on its own shows the plan now: the member stopped, and the one not started
    alone = tmp_path / "alone"
    shutil.copytree(root, alone)
    view = family_view(FamilyViewParams(run_dir=str(alone), bootstrap_resamples=100))
    assert [(m["member"], m["status"]) for m in view.summary["members"]] == [
        ("mini_index-2", "interrupted"), ("mini_index-3", "not started")]
    assert Manifest(RunDir(alone)).read()["view"] == ["mini_index-2", "mini_index-3"]
    # the same command again writes the view of its members, and the record says complete
    stop_in.clear()
    assert main([*grid, "mini_index=2,3"]) == 0
    record = Manifest(RunDir(root)).read()
    assert (record["status"], record["view"]) == ("complete", ["mini_index-2", "mini_index-3"])
    assert [m["member"] for m in json.loads((root / "family.json").read_text())["members"]] == record["view"]
    capsys.readouterr()
    assert main([*grid, "mini_index=2,3"]) == 0 and "nothing to do" in capsys.readouterr().out
    assert Manifest(RunDir(root)).read()["status"] == "complete"


@pytest.mark.parametrize("stop, status", [(KeyboardInterrupt, "interrupted"), (OSError, "failed")])
def test_a_family_stopped_between_members_records_how_it_ended(tmp_path, monkeypatch, stop, status):
    # Ctrl-C or an error outside a member's notebooks left the family's record as its last view had it
    args = cli.build_parser("run").parse_args(["run", str(DEMO), "--grid", "mini_index=0,1", "--set", "mini_count=2",
                                               "--out", str(tmp_path / "f")])
    family = fam.plan_family(load_params_file(DEMO, args.overrides), default_name="demo",
                             grid_args=fam.parse_grid_args(args.grid), out=args.out)
    Manifest(RunDir(family.root)).update(status="complete", members=family.plan, family_name="demo")

    def member(family, member, **kw):
        if member.index:
            raise stop("stopped")
        assert Manifest(RunDir(family.root)).read()["status"] == "running"  # while its members run
        return "done"

    monkeypatch.setattr(family_cli, "run_member", member)
    with pytest.raises(stop):
        family_cli.run_family(args, family)
    assert Manifest(RunDir(family.root)).read()["status"] == status


MEMBER_PROCESS = """
import pathlib, signal, sys, time
folder, name = pathlib.Path(sys.argv[1]), sys.argv[2]
if sys.argv[3] == "handled":  # as repro run ends on a stop signal; else as one stopped before it set its handlers
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *a: sys.exit(130))
try:
    (folder / f"started-{name}").touch()  # (its handlers set)
    time.sleep(60)
except (KeyboardInterrupt, SystemExit):  # (its kernel stopping) until the test has pressed again
    (folder / f"stopping-{name}").touch()
    for _ in range(6000):
        if (folder / "stopped").exists():
            break
        time.sleep(0.01)
    sys.exit(130)
"""


def until(files: Path, pattern: str, count: int) -> None:
    """Wait for `count` files matching `pattern` in `files` (the member processes' marks)."""
    deadline = time.monotonic() + 60
    while len(list(files.glob(pattern))) < count:
        assert time.monotonic() < deadline, f"{count} of {pattern} never came"
        time.sleep(0.01)


@pytest.mark.parametrize("stop, handled", [("ctrl-c", True), ("sigterm", True), ("sigterm", False), ("sighup", True)])
def test_a_stop_with_jobs_starts_no_more_members_and_names_them(tmp_path, monkeypatch, capsys, stop, handled):
    # --jobs 2 of four members: after Ctrl-C the two queued members still started, each running to its end while the
    # command waited, and the one line said neither who stopped nor who never ran; SIGTERM to the command alone left
    # its members running; a member the stop ended before its handlers were set was "failed", and the family went on
    import argparse

    parser = argparse.ArgumentParser()
    family_cli.configure(parser)
    args = parser.parse_args([str(DEMO), "--grid", "mini_index=0,1,2,3", "--set", "mini_count=4", "--jobs", "2",
                              "--out", str(tmp_path / "f")])
    family = fam.plan_family(load_params_file(DEMO, args.overrides), default_name="demo",
                             grid_args=fam.parse_grid_args(args.grid), out=args.out)
    monkeypatch.setattr(family_cli, "_member_command", lambda args, member: [
        sys.executable, "-c", MEMBER_PROCESS, str(tmp_path), member.name, "handled" * handled])
    members, sessions = [], []

    def press():
        until(tmp_path, "started-*", 2)
        members.extend(p for p in psutil.Process().children() if str(tmp_path) in " ".join(command_line(p)))
        sessions.extend(os.getsid(member.pid) == member.pid for member in members)  # (their own)
        # to the command alone: `kill`, a scheduler, or a terminal's Ctrl-C (the members are in sessions of their own)
        os.kill(os.getpid(), {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}[stop])
        if handled:  # the members stop only once pressed again: the command is still waiting on them
            until(tmp_path, "stopping-*", 2)
            os.kill(os.getpid(), signal.SIGINT)  # pressed again while the members stop: changes nothing
            (tmp_path / "stopped").touch()

    pressing = threading.Thread(target=press, daemon=True)
    pressing.start()
    assert family_cli.run_family(args, family) == 130
    pressing.join()  # its second press landed in the test after it when the members ended at once (SIGHUP unhandled)
    assert sorted(p.name for p in tmp_path.glob("started-*")) == ["started-mini_index-0", "started-mini_index-1"]
    assert len(members) == 2 and not any(member.is_running() for member in members)
    assert sessions == [True, True]
    err = capsys.readouterr().err
    assert ("family demo: interrupted in members mini_index-0, mini_index-1; mini_index-2, mini_index-3 not run; the "
            "family view was not written") in err


def test_the_members_planned_are_recorded_before_any_runs_and_another_family_is_refused_there(tmp_path, monkeypatch,
                                                                                             capsys):
    # the plan was recorded by 05_family only: after an interruption, 05_family on its own left out the new member
    root = tmp_path / "f"
    grid = ["run", str(DEMO), "--set", "mini_count=3", "--out", str(root), "--grid"]
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: 130)
    assert main([*grid, "mini_index=0,1"]) == 130
    # each member with its grid values (05_family shows them for a member not started: the names alone were kept)
    assert Manifest(RunDir(root)).read()["members"] == {"mini_index-0": {"mini_index": 0},
                                                        "mini_index-1": {"mini_index": 1}}
    capsys.readouterr()
    assert main([*grid, "mini_index=0,2", "--member", "1"]) == 130
    assert list(Manifest(RunDir(root)).read()["members"]) == ["mini_index-0", "mini_index-2"]
    assert "family demo: mini_index-1 of its last plan is no longer in the grid: left out of the family view (its " \
           "folder stays)" in capsys.readouterr().out
    # --check said nothing of the members the run then leaves out; it says so now, as the run does, writing nothing
    assert main([*grid, "mini_index=0", "--check"]) == 0
    assert "family demo: mini_index-2 of its last plan is no longer in the grid: left out of the family view (its " \
           "folder stays)" in capsys.readouterr().out
    assert list(Manifest(RunDir(root)).read()["members"]) == ["mini_index-0", "mini_index-2"]
    # --grid gives a key of the file's grid these values in place of its own (its help said it "adds to" the grid)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "replaces the values of that key, the other keys kept" in " ".join(capsys.readouterr().out.split())
    # a family of another name into that folder took it over unsaid (family.json, figures, the members shown)
    other = tmp_path / "other.yaml"
    other.write_text(f"include: {DEMO}\nmini_count: 3\nfamily: {{name: other, grid: {{mini_index: [0, 1]}}}}\n")
    assert main(["run", str(other), "--out", str(root), "--check"]) == 1
    assert f"REFUSED  family folder: {root} holds family demo's record, not other's: give this family its own " \
           f"--out, or pass --force" in capsys.readouterr().out
    given = tmp_path / "other_given.yaml"  # the folder given as run_dir: the refusal says so (it said --out)
    given.write_text(f"include: {other}\nrun_dir: {root}\n")
    assert main(["run", str(given), "--check"]) == 1
    out = capsys.readouterr().out
    assert "give this family its own run_dir, or pass --force" in out and "--out" not in out
    assert main(["run", str(other), "--out", str(root), "--force"]) == 130
    assert Manifest(RunDir(root)).read()["family_name"] == "other"
    # nor does a run go into a family's folder whose view never ran
    assert main(["run", str(DEMO), "--out", str(root), "--check"]) == 1
    assert "holds a family's folder" in capsys.readouterr().out


def _older_member(folder: Path, grid: dict, index: int = 0, family: str = "demo") -> Manifest:
    """A member's folder as an older repro left it: a run begun there, its record naming the family's member."""
    manifest = Manifest(RunDir(folder))
    manifest.start_run({}, ["01_construct"])
    manifest.update(family={"name": family, "member": folder.name, "index": index, "grid": grid})
    return manifest


def test_members_an_older_repro_named_without_their_letters_keep_their_folders(tmp_path, monkeypatch, capsys):
    # an older repro dropped letters outside ASCII from member names (Straße: pretty_name-Stra-e, Café: ...-Caf):
    # after an upgrade every member was "(new)", the old ones "no longer in the grid", and each was built again
    root = tmp_path / "f"
    old = {"pretty_name-Stra-e": {"pretty_name": "Straße"}, "pretty_name-Caf": {"pretty_name": "Café"}}
    Manifest(RunDir(root)).update(members=old, family_name="demo")  # the family folder's record, as it wrote it
    older = [_older_member(root / name, grid, index) for index, (name, grid) in enumerate(old.items())]
    command = ["run", str(DEMO), "--set", "mini_count=2", "--out", str(root), "--grid"]
    values = {**load_params_file(DEMO), "mini_count": 2, "family": {"grid": {"pretty_name": ["Straße", "Café"]}}}
    family = fam.plan_family(values, default_name="demo", out=str(root))
    assert [m.name for m in family.members] == ["pretty_name-Stra-e", "pretty_name-Caf"]
    assert [m.run_dir for m in family.members] == [root / "pretty_name-Stra-e", root / "pretty_name-Caf"]
    older[0].update(fingerprint=family.members[0].fingerprint)  # Straße's complete there: held, not run again
    older[0].finish_run("complete")
    older[1].finish_run("interrupted")  # Café's stopped: it continues there
    assert main([*command, "pretty_name=Straße,Café", "--check"]) == 0
    out = capsys.readouterr().out
    assert "members: pretty_name-Stra-e: complete with the same parameters, not run again" in out
    assert "pretty_name-Straße" not in out and "pretty_name-Café" not in out  # (no member of the new name)
    ran = []
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append(root) or 130)
    assert main([*command, "pretty_name=Straße,Café", "--member", "pretty_name-Caf"]) == 130
    assert main([*command, "pretty_name=Straße,Café", "--member", "0"]) == 0 and ran == [root / "pretty_name-Caf"]
    out = capsys.readouterr().out
    assert "no longer in the grid" not in out and "nothing to do: pretty_name-Stra-e is complete" in out
    assert Manifest(RunDir(root)).read()["members"] == old
    # by its name now, as `--check` of a fresh project would list it (it was refused: "not a member of family demo")
    assert main([*command, "pretty_name=Straße,Café", "--member", "pretty_name-Café"]) == 130
    assert ran == [root / "pretty_name-Caf"] * 2
    with pytest.raises(fam.FamilyError, match="--member '' is not a member of family 'other'"):  # (none renamed)
        fam.plan_family(values, default_name="other", out=str(root)).member("")
    # --jobs: each member's own process plans the same name
    args = argparse.Namespace(params=DEMO, overrides=["mini_count=2"], grid=["pretty_name=Straße,Café"], force=False,
                              log_output=False, kernel="k", out=str(root))
    assert family_cli._member_command(args, family.members[1])[5:7] == ["--member", "pretty_name-Caf"]
    # a value really taken out of the grid is still told so; a new one gets a name of its letters
    assert main([*command, "pretty_name=Straße,Wien,日本語", "--check"]) == 0
    assert main([*command, "pretty_name=Straße,Wien,日本語", "--member", "2"]) == 130
    out = capsys.readouterr().out
    assert "family demo: pretty_name-Caf of its last plan is no longer in the grid: left out of the family view (its " \
           "folder stays)" in out
    assert list(Manifest(RunDir(root)).read()["members"]) == ["pretty_name-Stra-e", "pretty_name-Wien",
                                                              "pretty_name-日本語"]
    # a value taken out and put back finds its folder again (the last plan lacks it; its folder does not)
    assert main([*command, "pretty_name=Straße,Café", "--check"]) == 0
    assert "members: pretty_name-Stra-e: complete with the same parameters, not run again" in capsys.readouterr().out
    assert [m.name for m in fam.plan_family(values, default_name="demo", out=str(root)).members] == [
        "pretty_name-Stra-e", "pretty_name-Caf"]
    # the folder of its name, where there is one (made since), is the member's; so is it in another family
    (root / "pretty_name-Café").mkdir()
    assert [m.name for m in fam.plan_family(values, default_name="demo", out=str(root)).members] == [
        "pretty_name-Stra-e", "pretty_name-Café"]
    assert [m.name for m in fam.plan_family(values, default_name="other", out=str(root)).members] == [
        "pretty_name-Straße", "pretty_name-Café"]
    # a family of one member says so (it said "family demo of 1 members")
    assert main([*command, "pretty_name=Straße"]) == 130  # (Straße's complete run held; the view stopped)
    assert f"repro run: family demo of 1 member -> {root}\n" in capsys.readouterr().out


def test_every_member_follows_a_changed_member_name_whatever_its_letters(tmp_path):
    # a family named by this repro ({pretty_name}), then given m_{pretty_name}: the members of letters outside ASCII
    # kept their old names and folders ("complete, not run again"; --member m_数据集 "not a member"), the others not
    root = tmp_path / "f"
    values = {**load_params_file(DEMO), "mini_count": 2,
              "family": {"grid": {"pretty_name": ["数据集", "डेटा", "🚀rocket", "plain"]},
                         "member_name": "{pretty_name}"}}
    family = fam.plan_family(values, default_name="demo", out=str(root))
    assert [m.name for m in family.members] == ["数据集", "डेटा", "rocket", "plain"]
    for member in family.members:
        manifest = _older_member(member.run_dir, member.grid_values, member.index)
        manifest.update(fingerprint=member.fingerprint)
        manifest.finish_run("complete")
    Manifest(RunDir(root)).update(members=family.plan, family_name="demo")
    values["family"]["member_name"] = "m_{pretty_name}"
    family = fam.plan_family(values, default_name="demo", out=str(root))
    assert [m.name for m in family.members] == ["m_数据集", "m_डेटा", "m_rocket", "m_plain"]
    assert family.member("m_数据集").run_dir == root / "m_数据集" and not fam.is_done(family.member("m_数据集"))


def test_a_value_naming_the_folder_of_an_older_named_member_is_refused_before_anything_runs(tmp_path, monkeypatch,
                                                                                             capsys):
    # an older repro ran Straße in pretty_name-Stra-e; a grid of Straße and Stra-e moved Straße to a new folder and
    # refused Stra-e's ("holds a run with other parameters ... or pass --force", which would destroy Straße's run)
    root = tmp_path / "f"
    Manifest(RunDir(root)).update(members={"pretty_name-Stra-e": {"pretty_name": "Straße"}}, family_name="demo")
    _older_member(root / "pretty_name-Stra-e", {"pretty_name": "Straße"}).finish_run("complete")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    command = ["run", str(DEMO), "--set", "mini_count=2", "--out", str(root), "--grid", "pretty_name=Straße,Stra-e"]
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: pytest.fail(f"ran {root}"))
    assert main([*command, "--check"]) == 2 and main(command) == 2
    err = capsys.readouterr().err
    folder = root / "pretty_name-Stra-e"
    assert f"would share one folder, {folder}: it holds the run of {{'pretty_name': 'Straße'}}" in err
    assert "{'pretty_name': 'Stra-e'} is named 'pretty_name-Stra-e'" in err and "family.member_name" in err
    assert "--force" not in err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before  # nothing written
    # another member_name tells them apart (Straße runs again in a folder of its letters)
    values = {**load_params_file(DEMO), "mini_count": 2,
              "family": {"grid": {"pretty_name": ["Straße", "Stra-e"]}, "member_name": "v_{pretty_name}"}}
    assert [m.name for m in fam.plan_family(values, default_name="demo", out=str(root)).members] == [
        "v_Straße", "v_Stra-e"]


def test_members_run_at_once_are_started_as_their_own_repro_run(tmp_path, monkeypatch, capsys):
    import argparse

    parser = argparse.ArgumentParser()
    family_cli.configure(parser)
    args = parser.parse_args([str(DEMO), "--grid", "mini_index=0,1", "--set", "mini_count=2", "--out",
                              str(tmp_path / "f"), "--jobs", "2"])
    family = fam.plan_family(load_params_file(DEMO, args.overrides), default_name="demo",
                             grid_args=fam.parse_grid_args(args.grid), out=args.out)
    started, real_popen = [], subprocess.Popen

    class Member:  # a member's process, ended at once: mini_index-0 done, mini_index-1 failed
        def __init__(self, cmd, stdout=None, stderr=None, **kwargs):
            started.append(cmd)
            stdout.write("a member's output\n")
            self.code = 0 if "mini_index-0" in cmd else 1

        def wait(self):
            return self.code

    def fake_popen(cmd, *args, **kwargs):  # not a member: the family view's (git, the kernel), run as it is
        return (Member if "--member" in cmd else real_popen)(cmd, *args, **kwargs)

    monkeypatch.setattr(family_cli.subprocess, "Popen", fake_popen)
    # the family view's notebook, executed as an empty one
    monkeypatch.setattr(cli.run, "run_interruptible", lambda execute, src, out, **k: Path(out).write_text("{}"))
    assert family_cli.run_family(args, family) == 1  # one member failed: the command says so
    out = capsys.readouterr()
    # the family view's own run does not end the output with "complete", above the family's "1 failed"
    assert "repro run: 05_family done" in out.out and "complete ->" not in out.out
    assert "family demo: 1 run, 0 already complete, 1 failed" in out.out.splitlines()[-1]
    assert "FAILED member: mini_index-1" in out.err
    assert sorted(cmd[cmd.index("--member") + 1] for cmd in started) == ["mini_index-0", "mini_index-1"]
    # each child is the same command for one member: parsed again, it plans the same member
    child = parser.parse_args(started[0][4:])
    assert child.member in ("mini_index-0", "mini_index-1") and child.grid == args.grid and child.out == args.out
    assert (tmp_path / "f" / "logs" / "mini_index-1.log").read_text() == "a member's output\n"
    # run again: the last run's log is kept above the new one's (it was overwritten: why it stopped was lost)
    family_cli.run_family(args, family)
    log = (tmp_path / "f" / "logs" / "mini_index-1.log").read_text()
    again = r"--- repro run again, [-\d]+T[:\d]+\+00:00 ---"  # (UTC: read on a machine in another zone)
    assert re.fullmatch(rf"a member's output\n\n{again}\na member's output\n", log), log


def _member(root: Path, name: str, index: int, margins: list[float], parameters: dict, cache: dict,
            scorer: dict | None = None, generation: dict | None = None, counts: dict | None = None,
            grid: dict | None = None) -> None:
    run = RunDir(root / name)
    run.data.mkdir(parents=True)
    chosen = np.linspace(0.5, 1.0, len(margins))
    pd.DataFrame({"score_chosen": chosen, "score_rejected": chosen - np.array(margins)}).to_parquet(
        run.data / "train_prefs-00000-of-00001.parquet")
    Manifest(run).write({"status": "complete", "parameters": parameters,
                         "counts": {"scored": len(margins), **(counts or {})},
                         "stages": {"score": {"cache": cache}}, **({"scorer": scorer} if scorer else {}),
                         **({"generation": generation} if generation else {}),
                         "family": {"name": "fam", "member": name, "index": index,
                                    "grid": {"seed": index} if grid is None else grid}})


def test_the_family_view_of_a_missing_folder_or_of_a_member_says_which_folder_to_give(tmp_path):
    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0, "source": "demo"}, {"rows_computed": 2, "rows_from_cache": 0})
    # both said "holds no member of a family"
    with pytest.raises(DataError, match=r"fma does not exist\. Did you mean '\S*/fam'\?"):
        family_view(FamilyViewParams(run_dir=str(tmp_path / "fma")))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(DataError, match=r"notes.txt is a file\. Give run_dir = the family's folder"):
        family_view(FamilyViewParams(run_dir=str(tmp_path / "notes.txt")))
    with pytest.raises(DataError, match=rf"{root}/a is member a of family fam: give run_dir = {root}, the family's"):
        family_view(FamilyViewParams(run_dir=str(root / "a")))


def test_the_family_view_of_a_folder_that_holds_no_family_names_the_families_beside_it(tmp_path, monkeypatch):
    # Run All of 05_family in JupyterLab with its defaults (runs/demo: the demo's run): "holds no member of a family
    # ... give run_dir = the family's folder", naming none of the families the project holds
    monkeypatch.setenv("REPRO_HOME", str(tmp_path))
    runs = tmp_path / "runs"
    Manifest(RunDir(runs / "demo")).write({"status": "complete", "parameters": {}})
    for family in ("demo_family", "sweep b"):
        _member(runs / family, "a", 0, [0.1, 0.3], {"seed": 0}, {"rows_computed": 2, "rows_from_cache": 0})
    beside = "Families beside it: 'runs/demo_family', 'runs/sweep b' (give one of them as run_dir)."
    with pytest.raises(DataError, match=r"runs/demo holds no member of a family .*" + re.escape(beside)):
        family_view(FamilyViewParams())
    with pytest.raises(DataError, match=r"runs/demo-family does not exist\. .*" + re.escape(beside)):
        family_view(FamilyViewParams(run_dir="runs/demo-family"))
    (runs / "sweep b").rename(tmp_path / "elsewhere")  # (none beside: no sentence)
    with pytest.raises(DataError) as refused:
        family_view(FamilyViewParams(run_dir=str(tmp_path / "runs" / "demo")))
    assert str(refused.value).endswith(" A family beside it: 'runs/demo_family' (give it as run_dir).")
    (runs / "demo_family").rename(tmp_path / "elsewhere2")
    with pytest.raises(DataError) as refused:
        family_view(FamilyViewParams())
    assert "beside it" not in str(refused.value)


@pytest.mark.parametrize("damaged, why", [('{"status": "compl', r"is not JSON \(.*\)"),
                                           ("[1, 2]", "holds a list where a mapping belongs"),
                                           ('{"status": "complete", "family": "x"}',
                                            'holds "x" as its family where a mapping belongs'),
                                           ('{"family": [1]}', "holds a list as its family where a mapping belongs"),
                                           ('{"family": {"name": "fam"}}', 'holds no "member" in its family'),
                                           ('{"family": {"member": "b", "name": 3}}',
                                            r'holds 3 as its family\["name"\] where text belongs')])
def test_the_family_view_of_a_damaged_members_record_names_that_file_and_says_to_restore_it(tmp_path, damaged, why):
    # a truncated member record raised a bare JSONDecodeError, a non-dict one (or one whose family is no mapping) an
    # AttributeError, from 05_family's code
    root = tmp_path / "fam"
    for index, name in enumerate("ab"):
        _member(root, name, index, [0.1, 0.3], {"seed": index}, {"rows_computed": 2, "rows_from_cache": 0})
    Manifest(RunDir(root)).update(members=["a", "b"], family_name="fam")  # (b was not shown as "not started")
    (root / "b" / "manifest.json").write_text(damaged)
    with pytest.raises(DataError, match=re.escape(f"{root / 'b' / 'manifest.json'} ") + why + re.escape(
            ", not a run's record: restore it (a copy, version control), or give the run another folder; nothing "
            "was written.")):
        family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert not (root / "family.json").exists()


@pytest.mark.parametrize("name, damaged, said", [
    ("metrics.json", {"agreement": "x"},
     'holds "x" as its agreement where a mapping belongs, not what 02_analyze writes: run notebooks/02_analyze.ipynb '
     "again on that member, or delete the file (05_family then leaves its scorers' agreement out)."),
    ("compare.json", ["same"], "holds a list where a mapping belongs, not what 04_compare writes: run notebooks/"
     "04_compare.ipynb again on that member, or delete the file (05_family then leaves its verdict out).")])
def test_the_family_view_of_a_members_damaged_metrics_or_comparison_names_that_file(tmp_path, name, damaged, said):
    # 05_family read a member's metrics.json and compare.json as they were: an AttributeError ('str' object has no
    # attribute 'get', 'list' object ...); then its error said what to do in the card's words ("a card then leaves
    # the statistics out"); deleting the file, as said, leaves that out of the view
    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0}, {"rows_computed": 2, "rows_from_cache": 0})
    (root / "a" / name).write_text(json.dumps(damaged))
    with pytest.raises(DataError) as refused:
        family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert str(refused.value) == f"{root / 'a' / name} {said}"
    assert not (root / "family.json").exists()
    (root / "a" / name).unlink()
    a, = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100)).summary["members"]
    assert (a["agreement_same_chosen"], a["verdict"]) == ({}, None)


def test_the_family_view_leaves_out_a_pair_of_scorers_its_member_does_not_name(tmp_path):
    # a member's metrics.json whose pair of scorers lacked `scorers` stopped 05_family with KeyError: 'scorers'
    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0}, {"rows_computed": 2, "rows_from_cache": 0})
    (root / "a" / "metrics.json").write_text(json.dumps({"agreement": {"primary": "primary", "pairs": [
        {"same_chosen": {"count": 1, "fraction": 0.5}},
        {"scorers": ["primary", "rm"], "same_chosen": {"count": 2, "fraction": 1.0}}]}}))
    a, = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100)).summary["members"]
    assert a["agreement_same_chosen"] == {"rm": 1.0}


def test_the_family_view_reads_a_last_view_naming_its_members_otherwise_as_none(tmp_path):
    # a family.json whose member names were no text stopped 05_family with a TypeError (PosixPath / int)
    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0}, {"rows_computed": 2, "rows_from_cache": 0})
    (root / "family.json").write_text(json.dumps({"members": [{"member": 5, "status": "complete"}]}))
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert [m["member"] for m in view.summary["members"]] == ["a"]


def test_the_family_view_tables_members_and_writes_family_json(tmp_path):
    root = tmp_path / "fam"
    _member(root, "b", 1, [0.0, 0.2, 0.4], {"seed": 1, "source": "demo", "run_dir": "x"},
            {"rows_computed": 0, "rows_from_cache": 3})
    _member(root, "a", 0, [0.1, 0.3, 0.0, 0.5], {"seed": 0, "source": "demo", "run_dir": "y"},
            {"rows_computed": 4, "rows_from_cache": 0}, {"model": "builtin:tiny-pairrm", "stand_in": True})
    (root / "b" / "compare.json").write_text(json.dumps({"verdict": "3 of 3 reference rows aligned"}))
    (root / "a" / "metrics.json").write_text(json.dumps({"agreement": {"primary": "primary", "pairs": [
        {"scorers": ["primary", "llama_rm"], "same_chosen": {"count": 3, "fraction": 0.75}}]}}))
    params = FamilyViewParams(run_dir=str(root), bootstrap_resamples=200, bootstrap_seed=3)
    view = family_view(params)
    assert list(view.table["member"]) == ["a", "b"]  # the family's order, not the folders'
    assert list(view.table["margin mean"]) == [0.225, 0.2]  # to its interval's 4 significant digits (it had 6)
    a, b = view.summary["members"]
    assert (a["rows"], a["ties"], b["ties"]) == (4, 1, 1)
    assert a["margin_mean"] == pytest.approx(0.225) and b["margin_mean"] == pytest.approx(0.2)
    assert a["margin_mean_ci95"][0] <= 0.225 <= a["margin_mean_ci95"][1]
    # the percentile bootstrap of the mean (not the median) of a's margins, with the view's seed and resamples
    chosen = np.linspace(0.5, 1.0, 4)
    values, counts = np.unique(chosen - (chosen - np.array([0.1, 0.3, 0.0, 0.5])), return_counts=True)
    drawn = np.random.default_rng(3).multinomial(4, counts / 4, size=200)  # 4 distinct margins: drawn as counts
    assert a["margin_mean_ci95"] == pytest.approx(list(np.quantile(drawn @ values / 4, [0.025, 0.975])))
    assert view.summary["rows_scored"] == {"computed": 4, "from_cache": 3, "from_work": 0}
    assert view.summary["parameters_that_differ"] == ["seed"]
    assert a["agreement_same_chosen"] == {"llama_rm": 0.75} and b["agreement_same_chosen"] == {}
    assert (a["verdict"], b["verdict"]) == (None, "3 of 3 reference rows aligned")
    assert list(view.table["same chosen as llama_rm"])[0] == 0.75
    # a stand-in's scores are said to be noise, in the table and in family.json (before, 05_family never said so)
    assert list(view.table["scorer"]) == ["builtin:tiny-pairrm (STAND-IN: noise)", ""]
    assert view.summary["stand_in_members"] == ["a"] and a["scorer"] == {"model": "builtin:tiny-pairrm", "stand_in": True}
    # what the notebook shows of where rows came from: a table, not family.json's dict (the raw dict before)
    shown = origins(view)
    # (no member generated: no row for generation, rather than "0 generated")
    assert shown.data.to_dict("index") == {"rows scored": {"computed in the members' runs": 4, "from the row cache": 3,
                                                           "from their own earlier runs (work/)": 0}}
    assert "Parameters that differ between the members: seed" in shown.to_html()
    written = json.loads((root / "family.json").read_text())
    assert written == json.loads(json.dumps(view.summary))
    assert (root / "figures" / "family_margins.png").stat().st_size > 0
    assert written["figures"]["family_margins"]["svg"] == "figures/family_margins.svg"
    # members that generated: their rows as generation records them (the view read an empty `stages.generate`)
    for name, computed in (("a", 4), ("b", 0)):
        data = json.loads((root / name / "manifest.json").read_text())
        data["generation"] = {"prompts": 4, "prompts_resumed": 0, "cache": {"rows_computed": computed,
                                                                             "rows_from_cache": 4 - computed}}
        (root / name / "manifest.json").write_text(json.dumps(data))
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=200))
    assert view.summary["rows_generated"] == {"computed": 4, "from_cache": 4, "from_work": 0}
    assert origins(view).data.loc["rows generated", "from the row cache"] == 4
    # the grid changed since: a member's folder of the old grid stays, but is no member of the family as it stands
    Manifest(RunDir(root)).update(members=["b"])  # as `repro run` records the members it planned
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=200))
    assert [m["member"] for m in view.summary["members"]] == ["b"] and view.summary["rows_scored"]["from_cache"] == 3


def test_a_grid_key_named_as_a_column_of_the_table_keeps_its_values(tmp_path):
    # a family over `ties: [keep, drop]`: the table's tie count overwrote the grid's value, so the two members looked
    # the same (ties 0 and 0); a bundle key of one's own named as another column (`rows`) was lost the same way
    root = tmp_path / "fam"
    for index, (ties, margins) in enumerate((("keep", [0.1, 0.0, 0.3]), ("drop", [0.1, 0.3]))):
        _member(root, f"ties-{ties}", index, margins, {"ties": ties}, {"rows_computed": len(margins)},
                grid={"ties": ties, "rows": {"name": f"r{index}", "limit": 8 + index}})
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    table = view.table
    assert list(table["ties"]) == ["keep", "drop"] and list(table["tied pairs"]) == [1, 0]
    assert list(table["rows (grid)"]) == ["r0", "r1"] and list(table["rows"]) == [3, 2]
    assert table["tied pairs"].dtype == "Int64"
    # family.json keeps the grid apart, as it did
    a, b = json.loads((root / "family.json").read_text())["members"]
    assert (a["grid"]["ties"], a["ties"], b["grid"]["ties"], b["ties"]) == ("keep", 1, "drop", 0)


def test_the_family_view_says_which_members_intervals_are_too_narrow(tmp_path, monkeypatch):
    # members of 4 and 8 rows: 02_analyze and the card say their 95% bootstrap intervals are too narrow, the family
    # view (family.json, the notebook's table, the figure) showed the same intervals without a word
    import IPython.display

    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3, 0.0, 0.5], {"seed": 0}, {"rows_computed": 4})
    _member(root, "b", 1, list(np.linspace(-0.5, 1.0, 25)), {"seed": 1}, {"rows_computed": 25})
    _member(root, "c", 2, [0.2, 0.1] * 4, {"seed": 2}, {"rows_computed": 8})
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert [m["few_rows"] for m in view.summary["members"]] == [True, False, True]
    assert [m["few_rows"] for m in json.loads((root / "family.json").read_text())["members"]] == [True, False, True]
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_members(view)
    table, caveat = shown
    # all of it, its rows #k as the figure names them (a bare DataFrame's cells were cut at 50 characters)
    assert list(table.data.index) == ["#0", "#1", "#2"] and table.data.reset_index(drop=True).equals(view.table)
    assert caveat.data == ("With fewer than 20 rows (`a`: 4 rows, `c`: 8 rows), these members' percentile-bootstrap "
                           "95% intervals are too narrow: on normal data they cover the mean about 75% of the time at "
                           "3 rows, 84% at 5 and 90% at 10; read them as rough.")
    (ax,) = family_view_module.margins_figure(view.margins, view.summary["members"]).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mean, 95% CI: too narrow (< 20 rows)",
                                                                   "mean, 95% CI"]
    # every member of 20 rows or more: the table alone, and the legend as before
    (root / "a").rename(tmp_path / "a")
    (root / "c").rename(tmp_path / "c")
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shown.clear()
    family_view_module.show_members(view)
    (table,) = shown
    assert table.data.reset_index(drop=True).equals(view.table)
    (ax,) = family_view_module.margins_figure(view.margins, view.summary["members"]).axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mean, 95% CI"]


def test_a_member_of_one_row_is_shown_with_its_mean_and_no_interval(tmp_path, monkeypatch):
    # `--set mini_count=40 --grid mini_index=0,1`: a member kept one row, and 05_family stopped ("member mini_index-0
    # has 1 row with finite scores (of 1); the analysis needs at least 2"): no family.json, `repro run` failed
    import IPython.display

    root = tmp_path / "fam"
    _member(root, "a", 0, [0.4], {"seed": 0}, {"rows_computed": 1})
    _member(root, "b", 1, [0.1, 0.3, 0.0], {"seed": 1}, {"rows_computed": 3})
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    a, b = json.loads((root / "family.json").read_text())["members"]
    assert (a["rows"], a["margin_mean"], a["margin_mean_ci95"], a["ties"]) == (1, pytest.approx(0.4), None, 0)
    assert b["rows"] == 3 and b["margin_mean_ci95"] is not None
    assert list(view.table["rows"]) == [1, 3] and list(view.table["95% CI"])[0] == ""
    assert view.margins["a"].tolist() == pytest.approx([0.4])
    # its interval is not said to be too narrow: it has none
    assert (a["few_rows"], b["few_rows"]) == (None, True)
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_members(view)
    assert "`a`" not in shown[1].data and "`b`: 3 rows" in shown[1].data
    assert (root / "figures" / "family_margins.png").stat().st_size > 0


def test_the_family_figure_counts_each_members_rows_not_their_sum(tmp_path):
    # four members of the same 16 prompts: "Margins of 4 members (n = 64 rows)", as if 64 rows had been drawn
    same = [0.1, -0.2, 0.3, 0.0] * 4
    title = family_view_module.margins_figure({f"m{k}": np.array(same) for k in range(4)}).axes[0].get_title()
    assert title == "Margins of 4 members (n = 16 rows each)"
    title = family_view_module.margins_figure({"a": np.array(same), "b": np.array(same[:13]),
                                              "c": np.array([], dtype=float)}).axes[0].get_title()
    assert title == "Margins of 2 of 3 members (n = 13 to 16 rows each)"


def test_the_family_notebook_shows_its_figure_under_its_title_as_02_analyze_does(tmp_path, monkeypatch):
    # 05_family showed the bare image (its own copy of report.show_figures, without the title line)
    import IPython.display

    root = tmp_path / "fam"
    for index, name in enumerate("ab"):
        _member(root, name, index, [0.1, 0.3, -0.2], {"seed": index}, {"rows_computed": 3, "rows_from_cache": 0})
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_figures(view)
    title, image = shown
    assert title.data == "**Margins of 2 members (n = 3 rows each)** — `family_margins`"
    assert image.data == (root / "figures" / "family_margins.png").read_bytes()
    # family.json lists the figure's files as before
    assert json.loads((root / "family.json").read_text())["figures"] == {
        "family_margins": {"png": "figures/family_margins.png", "svg": "figures/family_margins.svg"}}


def test_a_planned_member_that_never_started_is_shown_not_started_with_its_rows_unknown(tmp_path):
    # an interrupted family: the plan recorded, one member run, the others never started; the view left them out
    root = tmp_path / "fam"
    _member(root, "b", 1, [0.1, 0.3], {"seed": 1, "source": "demo"}, {"rows_computed": 2, "rows_from_cache": 0},
            counts={"sliced": 4, "dropped_too_few_candidates": 1, "dropped_duplicate_prompt_id": 1,
                    "dropped_below_min_margin": 0})
    Manifest(RunDir(root)).update(members=["a", "b", "c"], family_name="fam")  # as `repro run` records its plan
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert [m["member"] for m in view.summary["members"]] == ["a", "b", "c"]  # in the plan's order
    a, b, c = view.summary["members"]
    assert (a["status"], b["status"], c["status"]) == ("not started", "complete", "not started")
    assert (a["rows"], b["rows"], c["rows"]) == (None, 2, None) and a["margin_mean"] is None
    assert list(view.table["status"]) == ["not started", "complete", "not started"]
    assert view.summary["complete"] == 1 and view.summary["parameters_that_differ"] == []  # (none to compare with)
    assert view.summary["rows_scored"] == {"computed": 2, "from_cache": 0, "from_work": 0}
    # a plan recording each member's grid values: a member not started shows its own; counts stay whole numbers,
    # unknown where unknown, in the table and its CSV (a not-started member turned every count column float: 10.0, NaN)
    Manifest(RunDir(root)).update(members={name: {"seed": i} for i, name in enumerate("abc")})
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert [m["grid"] for m in view.summary["members"]] == [{"seed": 0}, {"seed": 1}, {"seed": 2}]
    assert list(view.table["seed"]) == [0, 1, 2]
    for column in ("seed", "rows in", "rows", "tied pairs", "scored here", "scored from cache", "scored before (work/)"):
        assert view.table[column].dtype == "Int64", column
    assert view.table["rows"].isna().tolist() == [True, False, True] and view.table["rows"][1] == 2
    csv = view.table.to_csv(index=False)
    # the rows in, and those dropped on the way by rule (a sweep over a dropping rule is read here; it was not shown)
    assert "\nb,1,,complete,4,\"1 too few candidates, 1 duplicate prompt id\",2,0.2," in csv
    assert '",0,2,0,,\nc,2,,not started,,,,,,,,,,\n' in csv
    assert '"rows": 2,' in (root / "family.json").read_text()
    # the caption compares the members that started (a member not started records no parameters); a bundle by name
    assert origins(view).caption == "Parameters that differ between the members that started: none"
    Manifest(RunDir(root)).update(members={"a": {"part": {"name": "lo", "part_start": 0}}, "b": {}, "c": {}})
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert view.table["part"][0] == "lo"  # (it showed the bundle's JSON)
    # none started yet: the plan alone, every member not started (it said "holds no member of a family")
    (root / "b" / "manifest.json").unlink()
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert view.summary["family"] == "fam" and {m["status"] for m in view.summary["members"]} == {"not started"}


def test_a_recipe_members_margins_are_read_from_its_own_split_and_columns(tmp_path):
    # an RLHFlow (or SPPO, Snorkel) family: every member complete, yet the table said 0 rows and no margins, as it
    # read `train_prefs` shards and the seed's score columns only
    import datasets

    from repro.dataset_io import write_split
    from repro.exporters import FORMATS

    rewards = [[0.5, -0.25, 0.0], [1.0, 0.75, -0.5], [0.25, 0.25, -1.0]]
    rows = [{"prompt": [{"content": f"q{i}", "role": "user"}], "responses": ["a", "b", "c"], "rewards": r,
             "chosen": "abc"[int(np.argmax(r))], "rejected": "abc"[int(np.argmin(r))], "margin": max(r) - min(r)}
            for i, r in enumerate(rewards)]
    root = tmp_path / "fam"
    for index, name in enumerate(("t07", "t10")):
        run = RunDir(root / name)
        write_split(datasets.Dataset.from_list(rows, features=FORMATS["rlhflow"].columns), run.dataset, "train")
        Manifest(run).write({"status": "complete", "parameters": {"temperature": index}, "dataset": {"split": "train"},
                             "stages": {"score": {"prompts": 3, "prompts_computed": 1, "chunks_resumed": 1,
                                                  "cache": {"rows_computed": 1, "rows_from_cache": 0}}},
                             "family": {"name": "fam", "member": name, "index": index, "grid": {}}})
    Manifest(RunDir(root / "t10")).update(status="interrupted")
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=200))
    done, stopped = view.summary["members"]
    assert done["rows"] == 3 and done["margin_mean"] == pytest.approx(np.mean([0.75, 1.5, 1.25]))
    assert stopped["rows"] is None and stopped["margin_mean"] is None  # not 0 rows: unknown until it is complete
    assert family_view_module.margins_figure(view.margins).axes[0].get_title() == "Margins of 1 of 2 members (n = 3 rows)"
    one = family_view_module.margins_figure({"t07": np.array([0.5])}).axes[0].get_title()
    assert one == "Margins of 1 member (n = 1 row)"  # (it said "1 members (n = 1 rows)")
    # rows taken back from the member's own work/ chunks count too (they were counted nowhere)
    assert done["scored_rows"] == {"computed": 1, "from_cache": 0, "from_work": 2}
    # `cache: false`: no cache record; the stages' own numbers count (0 rows scored and an empty table before)
    for name in ("t07", "t10"):
        with Manifest(RunDir(root / name)).edit() as data:
            del data["stages"]["score"]["cache"]
            data["generation"] = {"prompts": 3, "prompts_generated": 3, "prompts_resumed": 1}
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=200))
    assert view.summary["members"][0]["scored_rows"] == {"computed": 1, "from_cache": None, "from_work": 2}
    assert view.summary["rows_generated"] == {"computed": 4, "from_cache": 0, "from_work": 2}
    assert origins(view).data.loc["rows scored"].to_dict() == {
        "computed in the members' runs": 2, "from the row cache": 0, "from their own earlier runs (work/)": 4}


def test_the_verdicts_say_in_a_sentence_that_no_member_compared(tmp_path, monkeypatch):
    import IPython.display

    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0, "run_dir": "y"}, {"rows_computed": 2, "rows_from_cache": 0})
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    show_verdicts(family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100)))
    (sentence,) = shown  # an empty table with two headers says nothing
    assert "No member ran 04_compare" in sentence.data and "`reference`" in sentence.data


# a two-scorer family compared with another run's dataset, its members named by default; its verdicts as 04_compare
# writes them (compare.json)
SCORERS = ["builtin:tiny-pairrm", "builtin:tiny-reward-deberta"]
NAMES = [f"generation_seed-0__scorer_model-{s.replace(':', '-')}" for s in SCORERS]
VERDICTS = [
    "**Reproduced within 0.001: all 10 reference rows (split `train_prefs`) agree**.\n\n10 of 10 reference rows "
    "aligned (10 by prompt_id); 100.0 % same pairs, 0.0 % swapped; `reference_response` equal in 10 of 10; 0 rows only "
    "in the reference, 0 only in the candidate.\n\n**Stand-in scores.** The candidate's scores come from a stand-in "
    "scorer (random weights): their agreement with the reference's says nothing of a real scorer's.",
    "**Not reproduced within 0.001: 0 of 10 reference rows (split `train_prefs`) agree**; 10 differ "
    "(tables/compare_disagreements.csv).\n\n10 of 10 reference rows aligned (10 by prompt_id); 0.0 % same pairs, "
    "10.0 % swapped; 0 rows only in the reference, 0 only in the candidate. 10 aligned rows disagree (same "
    "candidates, ranked differently: 9, unexplained: 10).\n\n**Stand-in scores.** The reference's scores come from a "
    "stand-in scorer (random weights): their agreement with the candidate's says nothing of a real scorer's."]
HEADLINES = ["Reproduced within 0.001: all 10 reference rows (split train_prefs) agree.",
             "Not reproduced within 0.001: 0 of 10 reference rows (split train_prefs) agree; 10 differ "
             "(tables/compare_disagreements.csv)."]


def _compared_family(root: Path, rows: int = 25) -> None:
    for index, (name, scorer, verdict) in enumerate(zip(NAMES, SCORERS, VERDICTS)):
        _member(root, name, index, list(np.linspace(-0.5, 1.0, rows)), {"scorer_model": scorer},
                {"rows_computed": rows}, {"model": scorer, "stand_in": True},
                grid={"generation_seed": 0, "scorer_model": scorer})
        (root / name / "compare.json").write_text(json.dumps({"verdict": verdict}))


def test_each_members_name_and_verdict_are_shown_whole_its_headline_in_the_tables_and_all_of_it_below(tmp_path,
                                                                                                      monkeypatch):
    # the tables cut every cell at 50 characters ("**Reproduced within 0.001: all 10 reference ro…",
    # "generation_seed-0__scorer_model-builtin-tiny-p…") and showed 04_compare's markdown marks as typed; the members
    # table squeezed the whole verdict, paragraphs and all, into a column of its own
    import IPython.display

    root = tmp_path / "fam"
    _compared_family(root)
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert list(view.table["verdict"]) == HEADLINES
    assert [m["verdict"] for m in json.loads((root / "family.json").read_text())["members"]] == VERDICTS  # all of it
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_members(view)
    show_verdicts(view)
    members, verdict_table, full = shown
    assert verdict_table.data.to_dict("records") == [{"member": n, "verdict": h} for n, h in zip(NAMES, HEADLINES)]
    for table in (members, verdict_table):
        html = table.to_html()
        cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
        assert set(NAMES + HEADLINES) <= set(cells), cells
        assert not [c for c in cells if "**" in c or "…" in c or "..." in c], cells
    assert full.data == "\n\n".join(f"#### `{n}`\n\n{v}" for n, v in zip(NAMES, VERDICTS))


def test_names_from_a_familys_records_never_become_html_in_05_family(tmp_path, monkeypatch):
    """A family folder someone sent: a member folder named "m` <img src=x onerror=...> `", a grid key and a parameter
    named "<img ...>" in the members' manifests. 05_family put the member's name between backticks it closed (the
    few-rows caveat, each verdict's heading), and the members' table header and the caption of where rows came from
    held the key and the parameter as HTML; JupyterLab ran the <img>s. Now they show as text."""
    import IPython.display

    root, name, key, parameter = tmp_path / "fam", "m` <img src=x onerror=f(1)> `", "<img src=x onerror=f(2)>", "<b>"
    for index, member in enumerate((name, "other")):
        _member(root, member, index, [0.1, 0.3, 0.0, 0.5], {parameter: index}, {"rows_computed": 4},
                grid={key: index})
        (root / member / "compare.json").write_text(json.dumps({"verdict": "**Reproduced**: 4 of 4 rows agree."}))
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_members(view)
    show_verdicts(view)
    members, caveat, _, verdicts = shown
    for html in (members.to_html(), origins(view).to_html()):
        assert not re.search(r"<(img|b)\b", html)
    assert f">{key.replace('<', '&lt;').replace('>', '&gt;')}</th>" in members.to_html()
    assert "between the members: &lt;b&gt;</caption>" in origins(view).to_html()
    for markdown in (caveat.data, verdicts.data):
        assert html_elements(markdown) == [] and name in shown_text(markdown)


def test_a_members_stored_verdict_and_records_never_become_html_or_links_in_05_family(tmp_path, monkeypatch):
    """A member folder someone sent: its compare.json's verdict (Markdown 04_compare wrote, shown by 05_family as it
    was stored) held `<img src=x onerror=...>`, live in JupyterLab, and `[x](javascript:...)` links; its manifest's
    scorer and counts and its metrics.json's scorer names hold the same. Now the verdict's bold and code spans show,
    its HTML and links as text, and the tables show every record's text as text."""
    import IPython.display

    evil = "<img src=x onerror=alert(1)> ` [x](javascript:alert(1))"
    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3, 0.0, 0.5], {"seed": 0}, {"rows_computed": 4}, {"model": evil},
            counts={f"dropped_{evil}": 1})
    (root / "a" / "metrics.json").write_text(json.dumps({"agreement": {"primary": "p", "pairs": [
        {"scorers": ["p", evil], "same_chosen": {"fraction": 0.5}}]}}))
    verdict = (f"**Reproduced**: `` {evil} `` and {evil}\n\n\\`{evil}`\n\n[r]: javascript:alert(2)\n\n"  # (\`: no span)
               f"> [q]: javascript:alert(3)\n\n[r] [q] <javascript:alert(4)> ![i](javascript:alert(5))")
    (root / "a" / "compare.json").write_text(json.dumps({"verdict": verdict, "notes": [evil], "slice": {
        "sentence": evil}, "reference": {"specs": [evil], "split": evil}, "candidate": {"specs": [evil]}}))
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_members(view)
    show_verdicts(view)
    members, *_, headlines, verdicts = shown  # (and the caveat of its few rows)
    markdown = MarkdownIt().enable("table")
    markdown.validateLink = lambda url: True  # (markdown-it drops javascript: links itself; JupyterLab's marked not)
    tokens = [t for token in markdown.parse(verdicts.data) for t in [token, *(token.children or [])]]
    assert html_elements(verdicts.data) == [] and not [t for t in tokens if t.type in ("link_open", "image")]
    assert not re.search(r"<img|javascript:alert\(\d\)\"", markdown.render(verdicts.data))
    assert evil in [t.content for t in tokens if t.type == "code_inline"] and "strong_open" in {t.type for t in tokens}
    assert "<img src=x onerror=alert(1)> ` [x](javascript:alert(1))" in shown_text(verdicts.data)  # (as text)
    for table in (members, headlines, origins(view)):
        assert not re.search(r"<img|href", table.to_html())


def test_names_holding_markdowns_marks_show_as_written_in_05_familys_tables(tmp_path, monkeypatch):
    """A member `_run $5 <a> x\\$y_` whose verdict (04_compare's Markdown) names it, a parameter `_$p<q>_` the members
    differ in: the tables' verdict headlines and the caption of where rows came from showed Markdown's escapes as
    typed (`\\$`, `\\_`, `&lt;`), for pandas' HTML is no Markdown. Now they hold the text, HTML-escaped once."""
    import IPython.display

    root, name, parameter = tmp_path / "fam", "_run $5 <a> x\\$y_", "_$p<q>_"
    for index, member in enumerate((name, "other")):
        _member(root, member, index, [0.1, 0.3, 0.0, 0.5], {parameter: index}, {"rows_computed": 4})
        verdict = (f"**Reproduced: 4 of 4 rows of {one_line(member)} ({code_span(member)}) agree**; "
                   "a \\`b &amp; c\n\nmore")
        (root / member / "compare.json").write_text(json.dumps({"verdict": verdict}))
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs: shown.extend(objs))
    family_view_module.show_members(view)
    show_verdicts(view)
    members, *_, headlines, _ = shown

    def texts(table, element: str) -> list[str]:  # (the text of each such element of the table's HTML)
        found = re.findall(rf"<{element}\b[^>]*>(.*?)</{element}>", table.to_html(), re.S)
        assert not [c for c in found if "<" in c], found
        return [html.unescape(c) for c in found]

    said = [f"Reproduced: 4 of 4 rows of {m} ({m}) agree; a `b & c" for m in (name, "other")]
    assert texts(headlines, "td") == [name, said[0], "other", said[1]]
    assert name in texts(members, "td") and set(said) <= set(texts(members, "td"))
    assert texts(origins(view), "caption") == [f"Parameters that differ between the members: {parameter}"]


def test_the_family_margins_figure_keeps_long_member_names_and_its_labels_inside_it(tmp_path):
    # at 30 degrees, names as generation_seed-0__scorer_model-builtin-tiny-pairrm took half the figure's width and
    # pushed the axis label out at the right ("... its scores are noise" lost its closing parenthesis)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from repro.analysis import plots

    for names in (NAMES, NAMES + [f"{NAMES[0]}-2"], [f"{k}_{NAMES[1]}" for k in range(8)], ["a", "b"]):
        margins = {name: np.linspace(-1, k, 12) for k, name in enumerate(names)}
        members = [{"member": name, "margin_mean": k / 2, "margin_mean_ci95": [k / 2 - 0.3, k / 2 + 0.3],
                    "few_rows": True, "scorer": {"stand_in": True}} for k, name in enumerate(names)]
        fig = family_view_module.margins_figure(margins, members)
        plots.save(fig, tmp_path / "m")
        (canvas := FigureCanvasAgg(fig)).draw()  # as saved (the labels are placed when drawn)
        renderer, (ax,) = canvas.get_renderer(), fig.axes
        labels = ax.get_yticklabels()
        assert [t.get_text() for t in labels] == [f"{name}*" for name in names]  # whole, across
        assert ax.get_xlabel() == "margin = score_chosen − score_rejected\n* a stand-in scorer: its scores are noise"
        # all that is drawn (the ticks in view among them), and each label by name
        drawn = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)
        assert fig.bbox.x0 <= drawn.x0 and drawn.x1 <= fig.bbox.x1 and fig.bbox.y0 <= drawn.y0 and \
            drawn.y1 <= fig.bbox.y1, (drawn, fig.bbox)
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label, ax.get_legend(), *labels):
            box = text.get_window_extent(renderer)
            assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and \
                box.y1 <= fig.bbox.y1, (text, box, fig.bbox)
        boxes = [t.get_window_extent(renderer) for t in labels]
        assert not [(a, b) for a, b in zip(boxes, boxes[1:]) if a.overlaps(b)]  # one name a line


def test_a_dollar_sign_in_a_members_name_is_drawn_as_written(tmp_path):
    # a member named a$\frac$b (matplotlib's mathtext between two $) stopped 05_family's margins figure with
    # ParseSyntaxException; "$5 and $6" was drawn "5 and " in math italics, its dollars gone
    from repro.analysis import plots

    names = ["a$\\frac$b", "$5 and $6"]
    members = [{"member": name, "margin_mean": 0.1, "margin_mean_ci95": [0.0, 0.2], "few_rows": True,
                "scorer": {"stand_in": name == names[0]}} for name in names]
    plots.save(family_view_module.margins_figure({name: np.linspace(-1, 1, 12) for name in names}, members),
               tmp_path / "m")
    svg = (tmp_path / "m.svg").read_text()  # (each text drawn, as a comment before its glyphs)
    assert "<!-- a$\\frac$b* -->" in svg and "<!-- $5 and $6 -->" in svg and "Oblique" not in svg


def test_a_complete_member_whose_folder_is_gone_is_said_missing_not_not_started(tmp_path):
    # a member's folder deleted by hand after the family completed: 05_family alone showed it "not started", as if
    # the family had never run it
    root = tmp_path / "fam"
    for index, name in enumerate("ab"):
        _member(root, name, index, [0.1, 0.3], {"seed": index}, {"rows_computed": 2})
    Manifest(RunDir(root)).update(members=["a", "b", "c"], family_name="fam")  # c: planned, never started
    family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shutil.rmtree(root / "b")
    for _ in range(2):  # and so again: the family.json it writes says so
        view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
        assert list(view.table["status"]) == ["complete", "missing (its folder is gone)", "not started"]
        b = view.summary["members"][1]
        assert (b["rows"], b["margin_mean"]) == (None, None) and view.summary["complete"] == 1
    # its folder made again but empty, as an interrupted start leaves it: not started
    (root / "b").mkdir()
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert list(view.table["status"]) == ["complete", "not started", "not started"]


def test_differing_parameters_ignore_where_members_live():
    assert differing_parameters([{"parameters": {"a": 1, "b": [1], "run_dir": "x"}},
                                 {"parameters": {"a": 1, "b": [2], "run_dir": "y"}}]) == ["b"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_demo_family_params_cut_the_40_demo_rows_into_four_disjoint_minis():
    from repro.parameters import ConstructParams
    from repro.slicing import plan_slice

    family = fam.plan_family(load_params_file(DEMO_FAMILY), default_name="x")
    assert [m.name for m in family.members] == [f"mini_{i}" for i in range(4)]
    v = family.members[0].values
    minis = [set(plan_slice(40, ConstructParams(part_start=0, part_stop=None, drop_rows=0, drop_from="end", limit=None,
                                                mini_index=m.values["mini_index"], mini_count=v["mini_count"])).indices)
             for m in family.members]
    assert [len(x) for x in minis] == [10] * 4 and set().union(*minis) == set(range(40))
    own = {"mini_index", "run_name", "run_dir"}  # the rest is the same for every member
    assert {k: val for k, val in v.items() if k not in own} == \
        {k: val for k, val in family.members[3].values.items() if k not in own}


def test_a_demo_family_scores_every_row_once_and_each_member_equals_its_run_alone(tmp_path, repro_run):
    """params/demo_family.yaml with two of its four members (--grid narrows the grid): what holds for two holds
    for four, at half the time."""
    def _repro(*args):  # every run in its own process with the same environment (threads: the same rounding)
        return repro_run(*args, timeout=1200)

    out = tmp_path / "demo_family"
    family = (str(DEMO_FAMILY), "--grid", "mini_index=1,2", "--out", str(out))
    first = _repro(*family)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    members = [out / "mini_1", out / "mini_2"]
    manifests = [json.loads((m / "manifest.json").read_text()) for m in members]
    assert all(m["status"] == "complete" for m in manifests)
    assert not (out / "mini_0").exists() and not (out / "mini_3").exists()
    # every row of the two minis scored once across the family, none taken from the cache (the minis are disjoint)
    scored = [m["stages"]["score"]["cache"] for m in manifests]
    assert [s["rows_computed"] for s in scored] == [10, 10] and sum(s["rows_from_cache"] for s in scored) == 0
    assert [m["family"]["member"] for m in manifests] == ["mini_1", "mini_2"]
    summary = json.loads((out / "family.json").read_text())
    assert summary["complete"] == 2 and summary["rows_scored"] == {"computed": 20, "from_cache": 0, "from_work": 0}
    assert summary["parameters_that_differ"] == ["mini_index"]
    assert (out / "notebooks" / "05_family.ipynb").exists()
    files = {p: _sha(p) for p in sorted(out.rglob("*.parquet")) + [out / "family.json"]}

    # each member equals the same run made alone, without the cache: its rows are computed in the same batches
    alone = _repro(str(DEMO), "--out", str(tmp_path / "alone"), "--set", "mini_count=4", "--set", "mini_index=2",
                   "--set", "cache=false", "--set", "notebooks=[01_construct]")
    assert alone.returncode == 0, alone.stdout[-3000:] + alone.stderr[-3000:]
    shard = "dataset/data/train_prefs-00000-of-00001.parquet"
    assert _sha(tmp_path / "alone" / shard) == _sha(out / "mini_2" / shard)

    # a second run of the family computes nothing and gives byte-identical files
    again = _repro(*family)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "nothing to do: every member and the family view are complete" in again.stdout  # 05_family not run again
    assert {p: _sha(p) for p in files} == files

    # a member of the whole family started alone into another folder (one Slurm array task) takes every row from
    # the cache: exactly the bytes the family wrote
    member = _repro(str(DEMO_FAMILY), "--out", str(tmp_path / "elsewhere"), "--member", "mini_1",
                    "--set", "notebooks=[01_construct]")
    assert member.returncode == 0, member.stdout[-3000:] + member.stderr[-3000:]
    cache = json.loads((tmp_path / "elsewhere" / "mini_1" / "manifest.json").read_text())["stages"]["score"]["cache"]
    assert (cache["rows_computed"], cache["rows_from_cache"]) == (0, 10)
    assert _sha(tmp_path / "elsewhere" / "mini_1" / shard) == _sha(out / "mini_1" / shard)
    assert not (tmp_path / "elsewhere" / "family.json").exists()  # one member is not the family


def test_the_seed_family_params_give_the_published_sizes_and_counterparts():
    from repro.parameters import ConstructParams
    from repro.slicing import plan_slice

    part2 = fam.plan_family(load_params_file(ROOT / "params" / "part2.yaml"), default_name="x")
    siblings = fam.plan_family(load_params_file(ROOT / "params" / "siblings.yaml"), default_name="x")
    assert [m.name for m in part2.members] == [f"part2_mini_{i}" for i in range(4)]
    assert [m.name for m in siblings.members] == [f"part{p}_mini_{i}" for p in range(3) for i in range(4)]

    def rows(member) -> int:
        v = member.values
        return len(plan_slice(61135, ConstructParams(
            part_start=v["part_start"], part_stop=v["part_stop"], drop_rows=v["drop_rows"], drop_from=v["drop_from"],
            mini_index=v["mini_index"], mini_count=v["mini_count"], limit=None)).indices)

    # the published sizes (domain notes): part0/part1 minis 19600 // 4 = 4900; part2 20735 // 4 = 5183, mini_3 5186
    assert [rows(m) for m in siblings.members] == [4900] * 8 + [5183, 5183, 5183, 5186]
    assert [rows(m) for m in part2.members] == [5183, 5183, 5183, 5186]
    for m in siblings.members:
        assert m.values["reference"] == f"YYYYYYibo/ultrafeedback_binarized_dataset_offline_pairrm_{m.name}"
    # part2's members are the siblings' part2 members, parameter for parameter
    assert [m.fingerprint for m in part2.members] == [m.fingerprint for m in siblings.members[8:]]


def test_a_members_refusal_names_how_the_familys_folder_was_given(tmp_path, capsys, monkeypatch):
    # the params file's run_dir made the folder (no --out): the refusal said "Give another --out"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, params = tmp_path / "fam", tmp_path / "fam.yaml"
    params.write_text(f"include: {DEMO_FAMILY}\nrun_dir: {root}\n")
    member = RunDir(root / "mini_1")
    Manifest(member).start_run({**load_params_file(DEMO), "run_dir": str(member.root)}, ["01_construct"])
    member.data.mkdir(parents=True)
    (member.data / "train_prefs-00000-of-00001.parquet").write_bytes(b"rows")
    (root / "mini_2").write_text("x")
    assert cli.main(["run", str(params), "--check"]) == 1
    out = capsys.readouterr().out
    assert "REFUSED  run directory (member mini_1)" in out and "--out" not in out
    assert "Give another run_dir (the family's folder) for this run" in out
    assert "Move what is in the way, or give the family another run_dir (its members go into its folder" in out
    assert cli.main(["run", str(params), "--out", str(root), "--check"]) == 1
    out = capsys.readouterr().out
    assert "Give another --out (the family's folder) for this run" in out and "run_dir" not in out
    assert "Move what is in the way, or give the family another --out (its members go into its folder" in out
    # that member alone: a traceback (NotADirectoryError) where a folder's writer was looked for
    assert cli.main(["run", str(params), "--member", "mini_2"]) == 2
    assert "mini_2 is an existing file, not a folder: a member's run goes into its own" in capsys.readouterr().err


def test_check_on_a_family_lists_what_every_member_needs_and_runs_nothing(tmp_path, capsys, monkeypatch):
    # `repro run FAMILY --check` ran the whole family (no preflight, no run-directory check for members)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = tmp_path / "fam"
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root), "--check"]) == 0
    out = capsys.readouterr().out
    assert "everything the run needs is here" in out
    assert "run directory (member mini_0)" in out and "run directory (member mini_3)" in out
    assert "disk space (every member)" in out
    assert not root.exists()  # nothing written, nothing run
    # a member folder holding a run of other parameters is refused, as `repro run` refuses it
    member = RunDir(root / "mini_1")
    values = load_params_file(ROOT / "params" / "demo.yaml", ["chunk_size=4"])
    Manifest(member).start_run({**values, "run_dir": str(member.root)}, ["01_construct", "02_analyze"])
    member.data.mkdir(parents=True)
    (member.data / "train_prefs-00000-of-00001.parquet").write_bytes(b"rows")
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root), "--check"]) == 1
    out = capsys.readouterr().out
    assert "REFUSED  run directory (member mini_1)" in out and "mini_index (0 there, 1 now)" in out
    assert "chunk_size" not in out  # how the work runs is no reason to refuse: it does not change the data
    before = sorted(p for p in root.rglob("*"))
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root)]) == 2
    assert "nothing was downloaded or run" in capsys.readouterr().err
    assert sorted(p for p in root.rglob("*")) == before
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root), "--check", "--force"]) == 0
    assert "--force: its outputs are removed first" in capsys.readouterr().out
    # --force: the member's previous run goes before the family runs (papermill stubbed)
    from repro.cli import run as runner
    monkeypatch.setattr(runner, "ensure_kernel", lambda name=runner.KERNEL_NAME: name)
    monkeypatch.setattr("papermill.execute_notebook", lambda src, out, **kw: Path(out).write_text("{}"))
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root), "--force"]) == 0
    out = capsys.readouterr().out  # what went, then why (it said only what went)
    assert (f"--force: removed the previous run's dataset, manifest.json from {member.root}\n  run directory (member "
            f"mini_1): {member.root} holds a run with other parameters (mini_count (1 there, 4 now), mini_index (0 "
            f"there, 1 now)); --force: its outputs are removed first") in out
    assert not member.shards() and Manifest(member).read()["parameters"]["chunk_size"] == 16
    # every member and the view complete: nothing to do; a member run again alone (--member, as the Slurm recipe
    # does) since the view was made: the view runs again (it said "nothing to do" over the old numbers)
    family = ["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root)]
    assert cli.main(family) == 0 and "nothing to do: every member and the family view" in capsys.readouterr().out
    # 05_family run by hand since, with other values (as JupyterLab leaves it): --check said everything was here and
    # the run made the view again over it; now both refuse, naming the values, as for a run's notebook run again
    (root / "family.json").write_text("{}")  # (what the stubs did not make)
    Manifest(root).add_outputs(root / "family.json")
    with Manifest(root).edit() as data:
        data["parameters"]["bootstrap_resamples"] = 7
        data.pop("fingerprint", None)
    view = {p: p.read_bytes() for p in root.glob("*.json")}
    refusal = (f"REFUSED  family folder: {root} holds a family view of other parameters: bootstrap_resamples (7 "
               f"there, 200 now). Give another --out for this run, or pass --force: 05_family makes the family view "
               f"again with the new values (the members stay as they are)")
    assert cli.main([*family, "--check"]) == 1
    out = capsys.readouterr().out
    assert refusal in out and "members: mini_0, mini_1, mini_2, mini_3: complete with the same parameters" in out
    assert cli.main(family) == 2 and refusal in capsys.readouterr().err
    assert {p: p.read_bytes() for p in root.glob("*.json")} == view
    assert cli.main([*family, "--force"]) == 0
    out = capsys.readouterr().out
    assert (f"family folder: {root} holds a family view of other parameters (bootstrap_resamples (7 there, 200 now)); "
            f"--force: 05_family makes the family view again") in out and "not run again" in out
    assert Manifest(root).read()["parameters"]["bootstrap_resamples"] == 200
    assert cli.main([*family, "--check"]) == 0 and "nothing to do" in capsys.readouterr().out
    redone = Manifest(member)
    (member.notebooks / "02_analyze.ipynb").write_text('{"rerun": true}')
    redone.add_outputs(member.notebooks / "02_analyze.ipynb")  # as its run again records it
    assert cli.main(family) == 0
    out = capsys.readouterr().out
    assert "nothing to do" not in out and "mini_1 is complete with the same parameters" in out
    # a complete member that will run again: --check says why, as for a run (it said only "same parameters")
    (member.notebooks / "02_analyze.ipynb").write_text('{"edited": true}')
    assert cli.main(["run", str(ROOT / "params" / "demo_family.yaml"), "--out", str(root), "--check"]) == 0
    assert ("it completed, but its output notebooks/02_analyze.ipynb is gone or was changed: 01_construct, "
            "02_analyze run again" in capsys.readouterr().out)


@pytest.mark.parametrize("length", [2, 12, 31, 48])
def test_the_family_margins_figure_makes_room_for_long_member_names(tmp_path, length):
    # the figure's height was fixed: names as t1.0_builtin-tiny-reward-deberta squeezed the axes, clipping the y label
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from repro.analysis import plots

    margins = {f"{k}_" + "t1.0_builtin-tiny-reward-deberta__limit-300__seed-7"[:length - 2]: np.linspace(-1, 1, 5)
               for k in range(4)}
    fig = family_view_module.margins_figure(margins)
    plots.save(fig, tmp_path / "m")
    (canvas := FigureCanvasAgg(fig)).draw()  # as saved (the labels are placed when drawn)
    renderer, (ax,) = canvas.get_renderer(), fig.axes
    for text in (ax.yaxis.label, ax.title, ax.xaxis.label, *ax.get_yticklabels()):
        box = text.get_window_extent(renderer)
        assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0 and box.y1 <= fig.bbox.y1, \
            (text.get_text(), box, fig.bbox)


def test_the_family_margins_figure_is_byte_stable_and_leaves_numpys_random_state_alone(tmp_path):
    """seaborn's strip plot jitters the dots with numpy's global random state: two drawings of the same margins gave
    two different family_margins.png (every other figure is byte-stable), and a notebook's own draws moved it."""
    from repro.analysis import plots
    from repro.analysis.family_view import margins_figure

    margins = {name: np.random.default_rng(k).normal(size=30) for k, name in enumerate(("a", "b", "c"))}
    np.random.seed(7)
    expected_next = np.random.random()
    np.random.seed(7)
    first = plots.save(margins_figure(margins), tmp_path / "one")
    assert np.random.random() == expected_next
    second = plots.save(margins_figure(margins), tmp_path / "two")
    for kind in ("png", "svg"):
        assert first[kind].read_bytes() == second[kind].read_bytes(), kind


def test_the_family_notebooks_parameters_cell_says_which_folder_to_set():
    # it read "default: runs/<run_name>, or the run of the dataset given" (05_family reads no dataset), and Run All
    # with its defaults stopped at "runs/demo does not exist" (runs/demo is the demo's run, not a family)
    nb = json.loads((ROOT / "notebooks" / "05_family.ipynb").read_text())
    cell = "".join(next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))["source"])
    assert "dataset" not in cell
    assert re.search(r"# run_dir: the family's folder.*set it.*'runs/demo_family'", cell), cell


def test_the_family_margins_figure_shows_each_members_mean_with_its_interval_and_marks_a_stand_in():
    # the figure showed the distributions alone: the mean and interval the table gives, and whether a member's scores
    # were a stand-in's noise, were not in it
    margins = {"a": np.array([0.5, 1.0, 1.5]), "b": np.array([], dtype=float), "c": np.array([-1.0, 0.0, 4.0])}
    members = [{"member": "a", "margin_mean": 1.0, "margin_mean_ci95": [0.5, 1.5], "scorer": {"stand_in": False}},
               {"member": "b", "margin_mean": None, "margin_mean_ci95": None, "scorer": {"stand_in": True}},
               {"member": "c", "margin_mean": 1.0, "margin_mean_ci95": [-1.0, 4.0], "scorer": {"stand_in": True}}]
    (ax,) = family_view_module.margins_figure(margins, members).axes
    bars = [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer"]
    assert [tuple(np.ravel(bar.lines[0].get_data())) for bar in bars] == [(1.0, 0.0), (1.0, 1.0)]  # a and c
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["mean, 95% CI"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "c*"]
    assert ax.get_xlabel() == "margin = score_chosen − score_rejected\n* a stand-in scorer: its scores are noise"
    table = family_view_module.table_of([{**m, "grid": {}, "status": "complete", "rows": 3, "ties": 0,
                                          "scorer": {"model": "x", **m["scorer"]}, "verdict": None,
                                          "scored_rows": {"computed": 3, "from_cache": 0, "from_work": 0},
                                          "agreement_same_chosen": {}} for m in members])
    assert list(table["95% CI"]) == ["[0.5000, 1.500]", "", "[-1.000, 4.000]"]  # four digits each


def _hold(folder: Path) -> subprocess.Popen:
    """Another process writing to `folder` (another `repro run`), holding it once it has printed "held"."""
    return subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.cli.rerun import writing; "
                             "from repro.paths import RunDir; cm = writing(RunDir(sys.argv[1])); cm.__enter__(); "
                             "print('held', flush=True); time.sleep(60)", str(folder)],
                            stdout=subprocess.PIPE, text=True)


def test_a_family_another_repro_run_is_running_in_its_folder_is_refused(tmp_path, monkeypatch, capsys):
    # two `repro run` of one family at once each ran its members and 05_family into the same folder, unrefused
    root = tmp_path / "f"
    holder = _hold(root)
    ran = []
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append(root) or 0)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(grid) == family_cli.EXIT_BUSY and ran == []  # (it was 2, a usage error's)
        assert f"BUSY     family folder: `repro run` (pid {holder.pid}, since " in capsys.readouterr().err
        assert main([*grid, "--check"]) == 1 and "BUSY     family folder" in capsys.readouterr().out
        assert main([*grid, "--member", "0"]) == 0 and ran == [root / "mini_index-0"]  # a member alone runs beside
    finally:
        holder.kill()
        holder.wait()
    assert main(grid) == 0 and ran[1:] == [root / "mini_index-0", root / "mini_index-1", root]  # (stubs complete none)


def test_a_recorded_member_name_and_a_lock_s_text_reach_the_terminal_escaped(tmp_path, monkeypatch, capsys):
    # a name in the family's record (a member of its last plan) and the text of a member's lock, written by another
    # process, reached the terminal raw: their control characters ("\x1b[2K": erase the line) acted on it
    root, evil = tmp_path / "f", "old\x1b[2KEVIL"
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: 0)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    assert main(grid) == 0
    record = json.loads((root / "manifest.json").read_text())
    (root / "manifest.json").write_text(json.dumps({**record, "members": {**record["members"], evil: {}}}))
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.paths import RunDir; "
                               "RunDir(sys.argv[1]).hold(sys.argv[2]); print('held', flush=True); time.sleep(60)",
                               str(root / "mini_index-1"), evil], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        capsys.readouterr()
        assert main(grid) == family_cli.EXIT_BUSY
    finally:
        holder.kill()
        holder.wait()
    out, err = capsys.readouterr()
    assert "family demo: old\\x1b[2KEVIL of its last plan is no longer in the grid" in out
    assert f"mini_index-1 is being run elsewhere: old\\x1b[2KEVIL (pid {holder.pid}, since " in out
    assert "\x1b" not in out + err


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_member_another_command_runs_meanwhile_is_busy_not_failed(tmp_path, monkeypatch, capsys, jobs):
    # `repro run --member 1` started after the family's checks: one after another, the family stopped at that member
    # with an error (exit 2, the other members and the view not run); with --jobs it was "FAILED" ("their executed
    # notebooks say why"), exit 1
    root, holders, prepare, member_command = tmp_path / "f", [], family_cli.prepare, family_cli._member_command

    def checked_then_held(*args):  # the member alone starts once the family has checked its members
        code = prepare(*args)
        holders.append(holder := _hold(root / "mini_index-1"))
        assert holder.stdout.readline().strip() == "held"
        return code

    monkeypatch.setattr(family_cli, "prepare", checked_then_held)
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: 0)  # (the other member, the view)
    monkeypatch.setattr(family_cli, "_member_command", lambda args, member: member_command(args, member)
                        if member.name == "mini_index-1" else [sys.executable, "-c", "pass"])
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    try:
        assert main([*grid, *jobs]) == family_cli.EXIT_BUSY
        out, err = capsys.readouterr()
        assert "family demo: 1 run, 0 already complete, 0 failed, 1 being run by another command" in out
        assert "FAILED" not in out + err and "error" not in err
        assert ("repro run: BUSY member: mini_index-1: another command is running it; once it ends, the same "
                "command again adds it to the family view") in err
        said = (root / "logs" / "mini_index-1.log").read_text() if jobs else out
        assert f"mini_index-1 is being run elsewhere: `repro run` (pid {holders[0].pid}, since " in said
        assert not (root / "mini_index-1" / "manifest.json").exists()  # not touched
        monkeypatch.setattr(family_cli, "prepare", prepare)  # the member alone, its folder held: the same status
        assert main([*grid, "--member", "1"]) == family_cli.EXIT_BUSY
        out, err = capsys.readouterr()  # (its one line was on stdout, stderr empty)
        assert "mini_index-1 is being run elsewhere" in err and "elsewhere" not in out
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_member_another_command_runs_at_the_checks_is_busy_the_others_and_the_view_go_on(tmp_path, monkeypatch,
                                                                                          capsys, jobs):
    # a member's folder held when the family's checks ran refused the whole family ("BUSY run directory (member
    # mini_index-1): ... or give another --out (the family's folder)", exit 2), though one held at its turn is busy
    root, ran = tmp_path / "f", []
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append(root) or 0)
    monkeypatch.setattr(family_cli, "_member_command", lambda args, member: [sys.executable, "-c", "pass"])
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    holder = _hold(root / "mini_index-1")
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*grid, "--check"]) == 0
        out = capsys.readouterr().out
        # (it said "not run here ...; wait for it to finish, then run the same command again": it runs at its turn if
        # free by then)
        assert (f"ok       members: mini_index-1: busy, not checked: `repro run` (pid {holder.pid}, since ") in out
        assert (f"is writing to {root / 'mini_index-1'} now; if that has ended by its turn, it is checked and run "
                f"then; else it is not run here (not failed): wait for it to finish, then run the same command again"
                ) in out
        assert "BUSY" not in out and "(member mini_index-1)" not in out  # (its other checks: not made)
        assert main([*grid, *jobs]) == family_cli.EXIT_BUSY
        out, err = capsys.readouterr()
        assert "family demo: 1 run, 0 already complete, 0 failed, 1 being run by another command" in out
        assert f"mini_index-1 is being run elsewhere: `repro run` (pid {holder.pid}, since " in out
        assert "repro run: BUSY member: mini_index-1: another command is running it" in err and "error" not in err
        assert ran == [root] if jobs else ran == [root / "mini_index-0", root]  # the other member and the view
        assert main([*grid, "--member", "1", "--check"]) == 0  # a member alone, its folder held, exits 75 at once
        assert (f"mini_index-1: busy, not run here (not failed): `repro run` (pid {holder.pid}, since "
                in (out := capsys.readouterr().out)) and "now; wait for it to finish, then run the same command" in out
    finally:
        holder.kill()
        holder.wait()
    assert main(grid) == 0 and ran[-3:] == [root / "mini_index-0", root / "mini_index-1", root]  # once it ended


def test_a_member_alone_looks_once_at_who_writes_in_its_folder(tmp_path, monkeypatch):
    # `repro run --member 1` asked who writes in its folder three times (main, the checks, its turn): once now (at
    # the checks; rerun_check's own look, a single run's as well, not counted)
    root, looked, writer = tmp_path / "f", [], RunDir.writer

    def spy(self):
        if sys._getframe(1).f_globals["__name__"] == "repro.cli.family":
            looked.append(self.root.name)
        return writer(self)

    monkeypatch.setattr(RunDir, "writer", spy)
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: 0)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    assert main([*grid, "--member", "1"]) == 0 and looked.count("mini_index-1") == 1


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_member_busy_at_the_checks_and_free_at_its_turn_is_run(tmp_path, monkeypatch, capsys, jobs):
    # a member whose folder another command held at the family's checks stayed "busy", not run, though that command
    # had ended by its turn (exit 75: the same command again was needed); at its turn it is looked at again, and run
    root, ran, prepare = tmp_path / "f", [], family_cli.prepare
    holder = _hold(root / "mini_index-1")

    def checked_then_released(*args):  # the other command ends once the family has checked its members
        code = prepare(*args)
        holder.kill()
        holder.wait()
        return code

    monkeypatch.setattr(family_cli, "prepare", checked_then_released)
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append(root) or 0)
    monkeypatch.setattr(family_cli, "_member_command", lambda args, member: [sys.executable, "-c", "pass"])
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*grid, *jobs]) == 0
    finally:
        holder.kill()
        holder.wait()
    out = capsys.readouterr().out
    assert "being run elsewhere" not in out and "family demo: 2 run, 0 already complete, 0 failed" in out
    assert ran == [root] if jobs else ran == [root / "mini_index-0", root / "mini_index-1", root]
    assert ("mini_index-1 started" in out) == bool(jobs)


def _other_run(folder: Path) -> Path:
    """A run of other parameters (limit: 5) that made a dataset in `folder`; the dataset's file."""
    run = RunDir(folder)
    Manifest(run).start_run({**load_params_file(DEMO), "run_dir": str(folder), "limit": 5}, ["01_construct"])
    run.data.mkdir(parents=True)
    (made := run.data / "train_prefs-00000-of-00001.parquet").write_bytes(b"rows")
    return made


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_force_and_log_output_reach_a_member_busy_at_the_checks_run_at_its_turn(tmp_path, monkeypatch, capsys, jobs):
    # with --jobs, a member another command held at the family's checks, free at its turn, was refused in its own
    # process ("holds a run with other parameters: ... or pass --force"), --force given: its command left it out,
    # and --log-output too (the notebooks' output missing from its log)
    root, ran, prepare, member_command = tmp_path / "f", [], family_cli.prepare, family_cli._member_command
    made = _other_run(root / "mini_index-1")
    holder = _hold(root / "mini_index-1")

    def checked_then_released(*args):  # the other command ends once the family has checked its members
        code = prepare(*args)
        holder.kill()
        holder.wait()
        return code

    def member_alone(args, member):  # its own process, as the family starts it, but with its notebooks stubbed
        if member.name != "mini_index-1":
            return [sys.executable, "-c", "pass"]
        return [sys.executable, "-c", "import sys; from repro.cli import family, main; family.run_notebooks = lambda "
                "values, root, **kw: print('log_output', kw['log_output']) or 0; sys.exit(main(sys.argv[1:]))",
                *member_command(args, member)[3:]]

    monkeypatch.setattr(family_cli, "prepare", checked_then_released)
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.append(root) or 0)
    monkeypatch.setattr(family_cli, "_member_command", member_alone)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*grid, *jobs, "--force", "--log-output"]) == 0
    finally:
        holder.kill()
        holder.wait()
    out, err = capsys.readouterr()
    said = (root / "logs" / "mini_index-1.log").read_text() if jobs else out
    assert "family demo: 2 run, 0 already complete, 0 failed" in out and "FAILED" not in err, err + said
    assert not made.exists() and "--force: removed the previous run" in said, said
    assert "log_output True" in said if jobs else ran == [root / "mini_index-0", root / "mini_index-1", root]


@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_a_member_refused_at_its_turn_is_named_apart_from_the_failed_with_what_to_do(tmp_path, monkeypatch, capsys,
                                                                                    jobs):
    # the FAILED line named a member refused at its turn with the failed ones ("their executed notebooks (one refused
    # at its turn: its line above) say why ... the same command again continues them"), said also when none was
    # refused: the same command refuses it again, and with --jobs its refusal is in its log
    root, prepare, member_command = tmp_path / "f", family_cli.prepare, family_cli._member_command
    made = _other_run(root / "mini_index-1")
    holder = _hold(root / "mini_index-1")

    def checked_then_released(*args):  # the other command ends once the family has checked its members
        code = prepare(*args)
        holder.kill()
        holder.wait()
        return code

    def member_alone(args, member):  # mini_index-0's notebooks fail; mini_index-1 in its own process, as started
        if member.name != "mini_index-1":
            return [sys.executable, "-c", "raise SystemExit(1)"]
        return [sys.executable, "-c", "import sys; from repro.cli import family, main; family.run_notebooks = lambda "
                "values, root, **kw: 0; sys.exit(main(sys.argv[1:]))", *member_command(args, member)[3:]]

    monkeypatch.setattr(family_cli, "prepare", checked_then_released)
    def run_notebooks(values, root, short_of=None, **kw):  # the view's run: done, the family recorded as it says
        if root.name == "mini_index-0":
            return 1
        Manifest(RunDir(root)).finish_run(*(("failed", short_of) if short_of else ("complete",)))
        return 0

    monkeypatch.setattr(family_cli, "run_notebooks", run_notebooks)
    monkeypatch.setattr(family_cli, "_member_command", member_alone)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main([*grid, *jobs]) == 1
    finally:
        holder.kill()
        holder.wait()
    out, err = capsys.readouterr()
    said = (root / "logs" / "mini_index-1.log").read_text() if jobs else err
    assert made.exists() and "holds a run with other parameters: limit (5 there, null now)" in said
    assert "family demo: 0 run, 0 already complete, 1 failed, 1 refused at its turn, in " in out
    assert ("repro run: FAILED member: mini_index-0; its executed notebooks say why and what to change. Then the "
            "same command again continues it (finished chunks and cached rows are kept).") in err
    where = f"{root / 'logs' / 'mini_index-1.log'} says why" if jobs else "its line above says why"
    assert (f"repro run: REFUSED member: mini_index-1: another command held its folder at the family's checks, and "
            f"at its turn its own checks refused it ({where}). The same command again refuses it again: pass --force "
            f"to replace a run of other parameters there, or give the family another --out.") in err
    record = Manifest(RunDir(root)).read()
    assert (record["status"], record["error"]) == (
        "failed", "not every member is complete: mini_index-0 failed; mini_index-1 refused at its turn")


def test_check_on_a_family_citing_a_self_check_of_other_scoring_code_says_so_once(tmp_path, capsys, monkeypatch):
    # `repro run --check` says where the card will cite a self-check of other scoring code than the run's; a family's
    # --check (and --member's) said nothing of it, its members' cards all saying so
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    check = tmp_path / "check" / "selfcheck.json"
    check.parent.mkdir()
    check.write_text(json.dumps({"tool": "repro selfcheck", "when": "2026-12-01T00:00:00+00:00", "verdict": "PASS",
                                 "environment": {"scoring_code": "0123456789abcdef"}}))
    family = ["run", str(DEMO_FAMILY), "--out", str(tmp_path / "fam"), "--set", f"selfcheck={check}", "--set",
              "notebooks=[01_construct,02_analyze,03_card]", "--check"]
    said = f"selfcheck{{}}: {check} ran other scoring code than this run (the card says so)"
    assert cli.main(family) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if "NOTE" in line] == [
        "  NOTE     " + said.format(" (every member)")]
    assert cli.main([*family, "--member", "mini_1"]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if "NOTE" in line] == [
        "  NOTE     " + said.format(" (member mini_1)")]


def test_a_member_whose_only_change_is_a_new_self_check_makes_only_its_card_again(tmp_path, monkeypatch, capsys):
    # `repro selfcheck --report` into a complete member: --check said "03_card runs again", and the family ran its
    # 01_construct, 02_analyze and 03_card (a run alone made only the card: rerun.executed)
    from repro.manifest import OTHER_SELFCHECK

    root, ran = tmp_path / "f", {}
    monkeypatch.setattr(family_cli, "why_run_again",
                        lambda member: OTHER_SELFCHECK if member.name == "mini_index-1" else "")
    monkeypatch.setattr(family_cli, "run_notebooks", lambda values, root, **kw: ran.update({root: kw.get("only")}) or 0)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    assert main(grid) == 0, capsys.readouterr().err
    assert ran == {root / "mini_index-1": ["03_card"], root: None}
    ran.clear()
    assert main([*grid, "--force"]) == 0 and ran[root / "mini_index-1"] == ["01_construct", "02_analyze", "03_card"]


@pytest.mark.parametrize("jobs", [1, 2])
def test_the_failed_refused_and_busy_lines_speak_of_one_member_in_the_singular_of_several_in_the_plural(
        tmp_path, capsys, jobs):
    # "BUSY members: mini_index-1: another command is running them" of one member (FAILED and REFUSED alike)
    values = {**load_params_file(DEMO), "mini_count": 4, "family": {"grid": {"mini_index": [0, 1, 2, 3]}}}
    family, logs = _plan(values, tmp_path), tmp_path / "f" / "logs"
    family_cli.say_left(family, ["mini_index-0"], ["mini_index-1"], ["mini_index-2"], jobs)
    one = capsys.readouterr().err.splitlines()
    family_cli.say_left(family, ["mini_index-0", "mini_index-3"], ["mini_index-1", "mini_index-3"],
                        ["mini_index-2", "mini_index-3"], jobs)
    several = capsys.readouterr().err.splitlines()
    assert one[0] == ("repro run: FAILED member: mini_index-0; its executed notebooks say why and what to change. "
                      "Then the same command again continues it (finished chunks and cached rows are kept).")
    assert several[0] == ("repro run: FAILED members: mini_index-0, mini_index-3; their executed notebooks say why and "
                          "what to change. Then the same command again continues them (finished chunks and cached rows "
                          "are kept).")
    where = f"{logs / 'mini_index-1.log'} says" if jobs > 1 else "its line above says"
    assert one[1] == (f"repro run: REFUSED member: mini_index-1: another command held its folder at the family's "
                      f"checks, and at its turn its own checks refused it ({where} why). The same command again "
                      f"refuses it again: pass --force to replace a run of other parameters there, or give the family "
                      f"another --out.")
    where = f"their logs in {logs} say" if jobs > 1 else "their lines above say"
    assert several[1] == (f"repro run: REFUSED members: mini_index-1, mini_index-3: another command held their "
                          f"folders at the family's checks, and at their turn their own checks refused them ({where} "
                          f"why). The same command again refuses them again: pass --force to replace a run of other "
                          f"parameters there, or give the family another --out.")
    assert one[2] == ("repro run: BUSY member: mini_index-2: another command is running it; once it ends, the same "
                      "command again adds it to the family view.")
    assert several[2] == ("repro run: BUSY members: mini_index-2, mini_index-3: other commands are running them; once "
                          "they end, the same command again adds them to the family view.")


def test_the_family_margins_figure_draws_no_members_name_as_boxes(tmp_path):
    # members named in CJK (a grid over a source 数据.jsonl): matplotlib warned "Glyph 25968 missing from font(s)
    # DejaVu Sans" and drew boxes for their names; a name is now drawn in installed fonts that have its letters,
    # else as its row of the table (#2), said once in the axis's label
    import warnings

    from matplotlib import font_manager, ft2font
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from repro.analysis import plots

    def installed(text: str) -> bool:  # whether installed fonts (not matplotlib's boxes) have every letter of text
        fonts = [f.fname for f in font_manager.fontManager.ttflist if not f.name.startswith("Last Resort")]
        return set(map(ord, text)) <= set().union(*(ft2font.FT2Font(f).get_charmap() for f in fonts))

    names = ["mini-ᴕ", "数据", "𐘀-a", "plain"]  # ᴕ: DejaVu Serif has it, DejaVu Sans not; Linear A: no font here
    assert not installed("𐘀") and installed("ᴕ")
    margins = {name: np.linspace(-1, k, 5) for k, name in enumerate(names)}
    members = [{"member": name, "margin_mean": None, "margin_mean_ci95": None,
                "scorer": {"stand_in": name == "𐘀-a"}} for name in names]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = family_view_module.margins_figure(margins, members)
        files = plots.save(fig, tmp_path / "m")
    assert not [str(w.message) for w in caught if "missing from font" in str(w.message)]
    (ax,) = fig.axes
    labels = ax.get_yticklabels()
    assert [t.get_text() for t in labels] == ["mini-ᴕ", "数据" if installed("数据") else "#1", "#2*", "plain"]
    assert labels[0].get_fontfamily() == ["DejaVu Sans", "DejaVu Serif"]  # its ᴕ from the font that has it
    assert labels[3].get_fontfamily() == ax.title.get_fontfamily()  # as before: the figures' (plots.theme's)
    assert ax.get_xlabel() == ("margin = score_chosen − score_rejected\n* a stand-in scorer: its scores are noise\n"
                               "#k: row k of the table (names no installed font can draw)")
    (canvas := FigureCanvasAgg(fig)).draw()  # as saved: all of the label in the figure
    box = ax.xaxis.label.get_window_extent(canvas.get_renderer())
    assert fig.bbox.x0 <= box.x0 and box.x1 <= fig.bbox.x1 and fig.bbox.y0 <= box.y0, box
    assert files["png"].stat().st_size and files["svg"].stat().st_size



def completes(ran: list[str]):
    """A stand-in for run_notebooks: a run that completes, recorded as repro run records one (its folder's name put in
    `ran`)."""
    def complete(values, root, **kw):
        ran.append(Path(root).name)
        manifest = Manifest(RunDir(root))
        manifest.start_run({}, values["notebooks"], merge=True)
        manifest.update(**kw["record"], fingerprint=kw["fingerprint"])
        manifest.finish_run("complete")
        return 0
    return complete


def test_a_copied_project_whose_family_is_complete_has_nothing_to_do(tmp_path, monkeypatch, capsys):
    # a grid over local files, given by their absolute paths: the copy's family names the copy's files; the family
    # folder's record of the members (the old project's paths) is planned anew before it is compared
    import shutil

    ran = []
    monkeypatch.setattr(family_cli, "ensure_kernel", lambda name=None: name)
    monkeypatch.setattr(family_cli, "run_notebooks", completes(ran))
    monkeypatch.delenv("REPRO_HOME", raising=False)
    old, copy = tmp_path / "old", tmp_path / "copy"
    (old / "data").mkdir(parents=True)
    (old / ".repro-project").write_text("a project")
    rows = (ROOT / "src" / "repro" / "data" / "demo_prompts.jsonl").read_text().splitlines(keepends=True)
    (old / "data" / "a.jsonl").write_text("".join(rows[:20]))
    (old / "data" / "b.jsonl").write_text("".join(rows[20:]))

    def run(project: Path) -> str:
        monkeypatch.chdir(project)
        paths = ",".join(str(project / "data" / name) for name in ("a.jsonl", "b.jsonl"))
        assert main(["run", str(DEMO), "--grid", f"source={paths}", "--out", "runs/f"]) == 0
        return capsys.readouterr().out

    run(old)
    assert ran == ["source-a.jsonl", "source-b.jsonl", "f"]
    shutil.copytree(old, copy, symlinks=True)
    # (its line names the local inputs its members read, as a run's does)
    assert ("family demo: nothing to do: every member and the family view are complete, of these parameters, local "
            "inputs, code and packages") in run(copy) and len(ran) == 3
    (copy / "data" / "b.jsonl").write_text("".join(rows[20:30]))  # a file changed after the copy: changed data
    run(copy)
    assert ran[3:] == ["source-b.jsonl", "f"]
    planned = Manifest(copy / "runs" / "f").read()["members"]  # (nothing to do wrote nothing; this run plans anew)
    assert planned["source-a.jsonl"] == {"source": str(copy / "data" / "a.jsonl")}


def cannot_write(monkeypatch, root) -> dict[Path, int]:
    """`root` and all below it read as not writable (as a colleague's folder: root writes everywhere); when each was
    last written (`last_written`), as now."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p).is_relative_to(root) and
                        mode == os.W_OK else real_access(p, mode, **kw))
    return last_written(root)


def last_written(root: Path) -> dict[Path, int]:
    """When `root` and each file and folder below it was last written."""
    return {p: p.stat().st_mtime_ns for p in [root, *root.rglob("*")]}


@pytest.fixture
def finished_family(tmp_path, monkeypatch, capsys) -> tuple[list[str], Path, list[str]]:
    """A family of two members run to the end, its notebooks stubbed (`completes`), what it said read: (the runs made,
    the family's folder, the `repro run` words of it before the grid's values)."""
    ran = []
    monkeypatch.setattr(family_cli, "ensure_kernel", lambda name=None: name)
    monkeypatch.setattr(family_cli, "run_notebooks", completes(ran))
    root = tmp_path / "f"
    grid = ["run", str(DEMO), "--set", "mini_count=4", "--out", str(root), "--grid"]
    assert main([*grid, "mini_index=0,1"]) == 0 and ran == ["mini_index-0", "mini_index-1", "f"]
    capsys.readouterr()
    return ran, root, grid


def test_a_complete_family_in_a_folder_one_cannot_write_has_nothing_to_do_and_work_left_there_is_refused(
        finished_family, monkeypatch, capsys):
    # a colleague checks that a shared, finished family is current: `repro run --grid ...` (--check or not) was
    # refused ("--out ... cannot be written", exit 2) before it knew there was nothing to do, as `repro run` says
    ran, root, grid = finished_family
    # (another family's complete view there is no view of this one: refused, as before)
    assert main([*grid, "mini_index=0,1", "--set", "family={name: other}", "--check"]) == 1
    assert f"{root} holds family demo's record, not other's" in capsys.readouterr().out
    before = cannot_write(monkeypatch, root)
    for check in (["--check"], []):  # nothing runs, nothing is written
        assert main([*grid, "mini_index=0,1", *check]) == 0 and len(ran) == 3
        assert (f"family demo: nothing to do: every member and the family view are complete, of these parameters, "
                f"code and packages -> {root}") in capsys.readouterr().out
    assert last_written(root) == before
    # a member left to run there could not be: refused, saying why
    assert main([*grid, "mini_index=0,1,2", "--check"]) == 2 and len(ran) == 3
    assert f"--out {root} cannot be written ({root} is read-only, or not yours)" in capsys.readouterr().err


def test_a_complete_member_alone_in_a_folder_one_cannot_write_has_nothing_to_do_and_one_left_is_refused(
        finished_family, monkeypatch, capsys):
    # a Slurm array task run again over a shared, finished family (`--member 1`): refused ("--out ... cannot be
    # written", exit 2) before it looked at the member, though the whole family there had nothing to do
    ran, root, grid = finished_family
    before = cannot_write(monkeypatch, root)
    # (a grid grown since: the member is complete all the same; --force runs no complete member again either)
    for given in (["mini_index=0,1", "--check"], ["mini_index=0,1"], ["mini_index=0,1", "--force"],
                  ["mini_index=0,1,2"]):
        assert main([*grid, *given, "--member", "mini_index-1"]) == 0 and len(ran) == 3
        assert (f"family demo: nothing to do: mini_index-1 is complete, of these parameters, code and packages -> "
                f"{root / 'mini_index-1'}") in capsys.readouterr().out
    assert last_written(root) == before
    # a member left to run there could not be: refused, saying why, run or --check
    for check in (["--check"], []):
        assert main([*grid, "mini_index=0,1,2", "--member", "mini_index-2", *check]) == 2 and len(ran) == 3
        assert f"--out {root} cannot be written ({root} is read-only, or not yours)" in capsys.readouterr().err
    assert last_written(root) == before


def test_a_familys_checks_ask_git_about_the_checkout_once(tmp_path, monkeypatch, capsys):
    # each member's checks ran `git rev-parse HEAD` for whether git refuses the checkout (one process a member: 12 for
    # params/siblings.yaml), to say one line for every member
    real_run, asked = subprocess.run, []

    def run(command, *args, **kwargs):  # git refusing the checkout, as for a checkout another user owns
        if command[:2] != ["git", "rev-parse"]:
            return real_run(command, *args, **kwargs)
        asked.append(command)
        return subprocess.CompletedProcess(command, 128, "", "fatal: detected dubious ownership in repository at "
                                           f"'{ROOT}'\n\tgit config --global --add safe.directory {ROOT}\n")

    monkeypatch.setattr(subprocess, "run", run)
    grid = ["run", str(DEMO), "--set", "mini_count=3", "--out", str(tmp_path / "f"), "--grid", "mini_index=0,1,2"]
    assert main([*grid, "--check"]) == 0 and len(asked) == 1
    assert [line for line in capsys.readouterr().out.splitlines() if "checkout" in line] == [
        f"  NOTE     checkout (every member): git refuses the checkout at {ROOT} as owned by another user, so the run "
        f"records no commit (its card says commit unknown): `git config --global --add safe.directory {ROOT}` lets it"]


def test_rows_the_row_cache_gave_an_interrupted_call_count_as_from_the_cache_in_the_family_table():
    # a member resumed after an interruption: the card counts the rows the row cache gave the interrupted call as
    # from the cache; the family table counted them as taken back from the member's own work/
    score = {"prompts": 16, "prompts_computed": 0, "chunks_resumed": 4,
             "cache": {"rows_computed": 0, "rows_from_cache": 0, "resumed_from_cache": 8}}
    assert family_view_module._row_counts(score) == {"computed": 0, "from_cache": 8, "from_work": 8}
    generation = {"prompts": 16, "prompts_generated": 16, "prompts_resumed": 16,
                  "cache": {"rows_computed": 0, "rows_from_cache": 0, "resumed_from_cache": 6}}
    assert family_view_module._row_counts(generation) == {"computed": 0, "from_cache": 6, "from_work": 10}


def test_05_family_alone_refuses_a_family_folder_a_repro_run_is_writing(tmp_path):
    # papermill 05_family on a family while its `repro run` ran: it wrote family.json into the held folder and
    # marked the family's record `complete` with its members still running
    root = tmp_path / "fam"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0}, {"rows_computed": 2})
    Manifest(RunDir(root)).update(members=["a"], family_name="fam", status="running")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from repro.paths import RunDir; "
                               "assert RunDir(sys.argv[1]).hold('`repro run`') is None; print('held', flush=True); "
                               "time.sleep(60)", str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ParameterError, match=r"is being written by `repro run` \(pid \d+.*nothing was written"):
            family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
        assert not (root / "family.json").exists() and Manifest(RunDir(root)).read()["status"] == "running"
    finally:
        holder.kill()
        holder.wait()
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))  # once it has stopped: written
    assert (root / "family.json").exists() and list(view.table["status"]) == ["complete"]


def test_a_member_recorded_running_is_running_while_a_process_holds_its_folder_and_stopped_once_none_does(tmp_path):
    # a member's `repro run` killed by SIGKILL (the OOM killer, a lost Slurm node) left its record `running`, and
    # 05_family showed it `running` for ever; a run alone in that case is "stopped without finishing (killed?)"
    root, killed = tmp_path / "fam", "stopped without finishing (killed?)"
    _member(root, "a", 0, [0.1, 0.3], {"seed": 0}, {"rows_computed": 2})
    Manifest(RunDir(root / "b")).write({"status": "running", "parameters": {"seed": 1},
                                        "family": {"name": "fam", "member": "b", "index": 1, "grid": {"seed": 1}}})
    Manifest(RunDir(root)).update(members={"a": {"seed": 0}, "b": {"seed": 1}}, family_name="fam")
    holder = _hold(root / "b")  # its `repro run --member b`, alive
    try:
        assert holder.stdout.readline().strip() == "held"
        view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
        assert list(view.table["status"]) == ["complete", "running"]
    finally:
        holder.kill()  # (SIGKILL: its lock goes with it, its record stays `running`)
        holder.wait()
    assert Manifest(RunDir(root / "b")).read()["status"] == "running"
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert list(view.table["status"]) == ["complete", killed] and view.summary["complete"] == 1
    assert [m["status"] for m in json.loads((root / "family.json").read_text())["members"]] == ["complete", killed]


def test_a_family_killed_while_a_member_builds_is_said_stopped_and_the_same_command_continues_it(tmp_path, repro_run,
                                                                                                 monkeypatch, capsys):
    # `repro run` of a family killed by SIGKILL while a member built: the family's record said `running` for ever,
    # --check said nothing of the family, and 05_family showed the member `running`
    monkeypatch.setenv("REPRO_ROW_CACHE", str(tmp_path / "rows"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, killed = tmp_path / "f", "stopped without finishing (killed?)"
    grid = [str(DEMO), "--set", "mini_count=2", "--set", "chunk_size=4", "--set", "notebooks=[01_construct]",
            "--grid", "mini_index=0,1", "--out", str(root)]
    proc = subprocess.Popen([sys.executable, "-m", "repro.cli", "run", *grid], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not list((root / "mini_index-0" / "work" / "scoring").glob("chunk-*.json")):  # (5 chunks: 4 to go)
        assert proc.poll() is None and time.monotonic() < deadline, "the first member scored no chunk"
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert Manifest(RunDir(root)).read()["status"] == Manifest(RunDir(root / "mini_index-0")).read()["status"] == \
        "running"
    assert main(["run", *grid, "--check"]) == 0
    out = capsys.readouterr().out
    assert (f"ok       family folder: {root} (continues the family there; its last run {killed}: the same command "
            f"without --check continues it)") in out
    assert f"(member mini_index-0): {root / 'mini_index-0'} (continues the run there, same parameters; " \
           f"the last run {killed}" in out
    # 05_family alone there (of other values than the family's): it marked the family complete, and its values
    # made the same command refuse the folder unless --force
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert list(view.table["status"]) == [killed, "not started"] and Manifest(RunDir(root)).last_run() == killed
    again = repro_run(*grid)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    members = [Manifest(RunDir(root / f"mini_index-{i}")).read() for i in (0, 1)]
    assert [m["status"] for m in members] == ["complete", "complete"] and members[0]["scorer"]["chunks_resumed"] >= 1
    assert Manifest(RunDir(root)).read()["status"] == "complete"
    assert [m["status"] for m in json.loads((root / "family.json").read_text())["members"]] == ["complete"] * 2
    assert main(["run", *grid, "--check"]) == 0 and "family folder" not in capsys.readouterr().out


@pytest.mark.parametrize("stop, last", [("running", "stopped without finishing (killed?)"),
                                        ("interrupted", "was interrupted")])
def test_05_family_alone_on_a_stopped_family_is_done_and_the_family_command_continues_it(
        tmp_path, monkeypatch, capsys, stubbed_notebooks, stop, last):
    # a family's `repro run` killed (SIGKILL) while a member built left its record `running`, driver `repro run`:
    # 05_family alone (papermill -p run_dir) took itself for that run's and left its record `running` for good; after
    # a SIGTERM it marked the family `complete`, members unfinished, and its own values made the family's command
    # refuse the folder ("a family view of other parameters") unless --force. Its `started` was the view's.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(family_cli, "now", lambda: "2000-01-01T00:00:00+00:00")  # (the family's start)
    root = tmp_path / "f"
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    assert main(grid) == 0
    record = Manifest(RunDir(root))
    assert record.read()["started"] == "2000-01-01T00:00:00+00:00"  # (it was the view's, from run_notebooks)
    # stopped while mini_index-1 builds: as a killed (or SIGTERM-interrupted) `repro run` leaves the records
    Manifest(RunDir(root / "mini_index-1")).update(status="running")
    if stop == "running":
        record.update(status="running", finished=None)
    else:
        record.finish_run("interrupted", "interrupted in member mini_index-1; the family view was not written")
    before = record.read()
    view = family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))  # (the family's: 1000)
    assert list(view.table["status"]) == ["complete", Manifest(RunDir(root / "mini_index-1")).last_run()]
    after = record.read()
    assert after["notebooks"]["05_family"]["status"] == "done" and not RunDir(root).held()  # (the folder given back)
    # the family is as its run left it, its members unfinished: not complete
    assert {k: after.get(k) for k in ("status", "started", "finished", "error")} == {
        k: before.get(k) for k in ("status", "started", "finished", "error")} and record.last_run() == last
    assert main([*grid, "--check"]) == 0  # continued without --force, its view made again with the family's values
    assert f"(continues the family there; its last run {last}: the same command without --check continues it)" in \
           capsys.readouterr().out
    assert main(grid) == 0 and record.read()["status"] == "complete"
    assert record.read()["parameters"]["bootstrap_resamples"] == 1000
    assert Manifest(RunDir(root / "mini_index-1")).read()["status"] == "complete"


def test_a_family_whose_view_fails_too_records_both_failures(tmp_path, monkeypatch, capsys, stubbed_notebooks):
    # a member failed and so did the view: the family's record said only the view's failure
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root = tmp_path / "f"

    def execute(src, out, **kw):
        if Path(out).parents[1].name in ("mini_index-0", "f"):
            raise RuntimeError(f"a cell of {Path(out).parents[1].name} failed")
        Path(out).write_text("{}")

    monkeypatch.setattr("papermill.execute_notebook", execute)
    assert main(["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]) == 1
    record = Manifest(RunDir(root)).read()
    assert record["status"] == "failed" and "a cell of f failed" in record["error"]
    assert record["error"].endswith("(not every member is complete: mini_index-0 failed)")


@pytest.mark.parametrize("left, code", [("failed", 1), ("busy", family_cli.EXIT_BUSY)])
def test_a_family_whose_members_do_not_all_complete_is_not_recorded_complete_and_the_same_command_continues_it(
        tmp_path, monkeypatch, capsys, stubbed_notebooks, left, code):
    # a member failed (or another command ran it): the command exited 1 (75), its FAILED (BUSY) line on stderr, but
    # the view's run completed the family's record: its manifest said `complete`, --check said nothing of the family
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    root, ran = tmp_path / "f", []

    def execute(src, out, **kw):  # (mini_index-0's notebooks fail while `left` is "failed")
        ran.append(Path(out).parents[1].name)
        if left == "failed" and Path(out).parents[1].name == "mini_index-0":
            raise RuntimeError("a member's cell failed")
        Path(out).write_text("{}")

    monkeypatch.setattr("papermill.execute_notebook", execute)
    finish_run, ends = Manifest.finish_run, []

    def finishing(self, status, error=None):  # what the family's record said at each end (never `complete` first)
        if self.run.root == root:
            ends.append(status)
        finish_run(self, status, error)

    monkeypatch.setattr(Manifest, "finish_run", finishing)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    holder = _hold(root / "mini_index-0") if left == "busy" else None
    try:
        assert holder is None or holder.stdout.readline().strip() == "held"
        assert main(grid) == code
    finally:
        if holder:
            holder.kill()
            holder.wait()
    assert ran[-1] == "f" and "mini_index-1" in ran  # the other member and the view ran
    said = {"failed": "mini_index-0 failed", "busy": "mini_index-0 being run by another command"}[left]
    record = Manifest(RunDir(root)).read()
    assert (record["status"], record["error"]) == ("failed", f"not every member is complete: {said}")
    assert ends == ["failed"]  # (the view's run had recorded it `complete` first, an instant before)
    assert record["notebooks"]["05_family"]["status"] == "done"  # (its view is made, of the members as they are)
    capsys.readouterr()
    assert main([*grid, "--check"]) == 0
    assert (f"ok       family folder: {root} (continues the family there; its last run failed: the same command "
            f"without --check continues it)") in capsys.readouterr().out
    left, ran[:] = "", []  # (mini_index-0 free, or its notebooks mended): the same command continues the family
    assert main(grid) == 0 and set(ran) == {"mini_index-0", "f"}  # (mini_index-1, complete, not run again)
    record = Manifest(RunDir(root)).read()
    assert (record["status"], record["error"]) == ("complete", None)


@pytest.mark.parametrize("stop", ["killed", "failed", "interrupted"])
def test_05_family_alone_over_a_failed_family_never_records_it_complete(tmp_path, monkeypatch, capsys,
                                                                        stubbed_notebooks, stop):
    # a family with a failed member, then 05_family alone (papermill) killed mid-cell: its record stayed `running`,
    # driver papermill, and 05_family alone again recorded the family `complete` (1 of 2 members complete), --check
    # said nothing of it, and a view of other values made the family command refuse the folder. A view alone that
    # failed or was interrupted wrote its own error, driver and `started` over the family's.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(family_cli, "now", lambda: "2000-01-01T00:00:00+00:00")  # (the family's start)
    root, mended = tmp_path / "f", []

    def execute(src, out, **kw):
        if Path(out).parents[1].name == "mini_index-0" and not mended:
            raise RuntimeError("a member's cell failed")
        Path(out).write_text("{}")

    monkeypatch.setattr("papermill.execute_notebook", execute)
    grid = ["run", str(DEMO), "--set", "mini_count=2", "--grid", "mini_index=0,1", "--out", str(root)]
    assert main(grid) == 1
    record, params = Manifest(RunDir(root)), FamilyViewParams(run_dir=str(root), bootstrap_resamples=100)
    family, short = record.read(), "not every member is complete: mini_index-0 failed"
    assert (family["status"], family["error"], family["started"]) == ("failed", short, "2000-01-01T00:00:00+00:00")
    fields = ("status", "driver", "started", "finished", "error")
    if stop == "killed":  # its kernel killed mid-cell (kill -9, an OOM kill, a restart): its record as it leaves it
        record.ensure_started(params.model_dump(), "05_family")
        assert (record.read()["status"], record.read()["driver"], record.last_run()) == \
            ("running", "papermill", "stopped without finishing (killed?)")
    else:
        with monkeypatch.context() as patched:
            why = {"failed": RuntimeError("a cell failed"), "interrupted": KeyboardInterrupt()}[stop]
            patched.setattr(family_view_module, "member_summary", lambda *a: (_ for _ in ()).throw(why))
            with pytest.raises(type(why)):
                family_view(params)
        after = record.read()  # its own end recorded as its notebook's; the family's record is the family's
        assert {k: after.get(k) for k in fields} == {k: family.get(k) for k in fields}
        assert after["notebooks"]["05_family"]["status"] == stop and not RunDir(root).held()
    seen, summary = [], family_view_module.member_summary

    def summarize(*args):  # what the family's record says while the view is made (a kill then leaves it so)
        seen.append(record.read())
        return summary(*args)

    monkeypatch.setattr(family_view_module, "member_summary", summarize)
    view = family_view(params)
    assert view.summary["complete"] == 1 and record.read()["notebooks"]["05_family"]["status"] == "done"
    after = record.read()  # failed, naming the member, while the view ran (a kill then leaves it so) and after
    assert [(r["status"], r["error"]) for r in (seen[0], after)] == [("failed", short)] * 2
    assert record.last_run() == "failed"
    if stop != "killed":  # (a killed view's record had lost them) the family's own start and driver
        assert {k: after.get(k) for k in fields} == {k: seen[0].get(k) for k in fields} == {k: family.get(k)
                                                                                             for k in fields}
    family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=200))  # alone, of other values
    assert (record.read()["status"], record.read()["error"]) == ("failed", short)
    capsys.readouterr()
    assert main([*grid, "--check"]) == 0  # continued without --force
    assert (f"ok       family folder: {root} (continues the family there; its last run failed: the same command "
            f"without --check continues it)") in capsys.readouterr().out
    mended.append(True)
    assert main(grid) == 0 and record.read()["status"] == "complete"
    assert record.read()["parameters"]["bootstrap_resamples"] == 1000


def test_05_family_alone_that_fails_reading_a_member_records_it_and_gives_the_folder_back(tmp_path):
    # a member's parquet damaged: 05_family alone raised, its record said nothing of the failure (`running`, or the
    # last view's `done`) and its kernel kept the family folder ("being written by a notebook's kernel (pid ...)")
    root = tmp_path / "fam"
    for index, name in enumerate("ab"):
        _member(root, name, index, [0.1, 0.3], {"seed": index}, {"rows_computed": 2})
    Manifest(RunDir(root)).update(members={"a": {"seed": 0}, "b": {"seed": 1}}, family_name="fam")
    family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    shard = RunDir(root / "b").data / "train_prefs-00000-of-00001.parquet"
    whole = shard.read_bytes()
    shard.write_bytes(whole[:40])  # truncated
    with pytest.raises(DataError, match="could not be read") as failed:
        family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    record = Manifest(RunDir(root)).read()
    assert record["notebooks"]["05_family"]["status"] == record["status"] == "failed"
    assert record["notebooks"]["05_family"]["error"] == record["error"] == f"DataError: {failed.value}"
    assert not RunDir(root).held()  # the folder given back: 05_family again (or `repro run`) is not refused
    shard.write_bytes(whole)  # restored: the view is made again there
    family_view(FamilyViewParams(run_dir=str(root), bootstrap_resamples=100))
    assert Manifest(RunDir(root)).read()["status"] == "complete"
