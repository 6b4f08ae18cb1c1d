"""Records repro reads back from a run folder (repro.records), written by someone else or damaged by hand: each stops
where it is read, with one error naming its file and the place in it, never a traceback, and nothing is written; the
record text a command prints shows its control characters as escapes."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import datasets
import pytest

from repro.analysis.report import analyze
from repro.card import gather_facts, render_body
from repro.cli import main
from repro.dataset_io import output_features, write_split
from repro.errors import DataError
from repro.manifest import Manifest
from repro.parameters import AnalyzeParams, CardParams, build
from repro.paths import RunDir
from repro.records import FINGERPRINT, checked

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "params" / "demo.yaml"
PARQUET = "dataset/data/train_prefs-00000-of-00001.parquet"
NOT_A_RECORD = ", not a run's record: restore it (a copy, version control), or give the run another folder; nothing"


def edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data) or data))


def contents(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def repro(capsys, *args) -> tuple[int, str, str]:
    code = main(["run", *map(str, args)])
    return code, *capsys.readouterr()


@pytest.mark.parametrize("change, said", [
    (lambda m: m["outputs"].update({PARQUET: "x"}), f'holds "x" as its outputs["{PARQUET}"] where a mapping belongs'),
    (lambda m: m["stages"]["score"].update(batch_tokens_used={"high": 40}),
     'holds "high" as a key of its stages["score"]["batch_tokens_used"] where a number belongs'),
    (lambda m: m["parameters"].update(output_format=5), 'holds 5 as its parameters["output_format"] where text belongs'),
    (lambda m: m.update(subject="demo"), 'holds "demo" as its subject where a mapping belongs'),
    (lambda m: m["scorer"].update(batch_tokens_used={"abc": 5}),
     'holds "abc" as a key of its scorer["batch_tokens_used"] where a number belongs'),
    (lambda m: m.update(scorers=[{"name": "rm", "batch_tokens_used": {"512": "x"}}]),
     'holds "x" as its scorers[0]["batch_tokens_used"]["512"] where a whole number belongs'),
    (lambda m: m["scorer"].update(stand_in="no"), 'holds "no" as its scorer["stand_in"] where true or false belongs'),
    (lambda m: m.update(generation={"policy_model": 3}),
     'holds 3 as its generation["policy_model"] where text belongs'),
    (lambda m: m["scorer"]["cache"].update(damaged=["ab12", 3]),
     'holds 3 as its scorer["cache"]["damaged"][1] where text belongs'),
    (lambda m: m["scorer"]["cache"].update(rows_from_cache=["ab12"]),
     'holds a list as its scorer["cache"]["rows_from_cache"] where a whole number belongs')])
def test_a_damaged_manifest_stops_each_command_with_one_line_naming_it_and_the_place(demo_run_copy, capsys, change,
                                                                                      said):
    # outputs' values as strings: `repro run --check` raised AttributeError ('str' object has no attribute 'get'), a
    # budget that is no number stopped 03_card (int("high")), an unknown output_format --check (a KeyError), a subject
    # as a string both (string indices must be integers); the scorer's budget that is no number 03_card too (int("abc"))
    # and a further scorer's, a stand-in said as text or a policy as a number went into the card as they were; of a
    # union (a cache's figure: a count or the damaged entries' names), the error of the member tried first was said
    # ("holds a list as its scorer["cache"]["damaged"] where a whole number belongs"), not the one that goes furthest in
    # the cache's counts as the damaged entries' names went into the card as none taken from the cache
    manifest = demo_run_copy / "manifest.json"
    edit(manifest, change)
    error = f"repro run: error: {manifest} {said}{NOT_A_RECORD} was written.\n"
    for status in ("complete", "failed"):  # the run as it is, a re-run continuing it, --force
        edit(manifest, lambda m: m.update(status=status) if "status" in m else None)
        before = contents(demo_run_copy.parent)
        for more in ([], ["--force"]):
            assert repro(capsys, DEMO, "--out", demo_run_copy, "--check", *more) == (2, "", error)
        with pytest.raises(DataError) as refused:  # 03_card's code (its cell, as papermill or JupyterLab runs it)
            gather_facts(build(CardParams, {"run_dir": str(demo_run_copy)}))
        assert str(refused.value) == error.removeprefix("repro run: error: ").rstrip()
        assert contents(demo_run_copy.parent) == before


def test_03_card_alone_stops_at_metrics_json_naming_the_place_that_is_no_number(demo_run_copy, papermill_cli):
    # "score_chosen": {"mean": "high"} went into the card as the mean; a p-value as text stopped 03_card with
    # "ValueError: Unknown format code 'g' for object of type 'str'", a length test as a list with a TypeError
    metrics = demo_run_copy / "metrics.json"
    honest = metrics.read_text()
    edit(metrics, lambda m: m["score_chosen"].update(mean="high"))
    said = (f'{metrics} holds "high" as its score_chosen["mean"] where a number belongs, not what 02_analyze writes: '
            f"run notebooks/02_analyze.ipynb again on this run, or delete the file (a card then leaves the statistics "
            f"out).")
    card = demo_run_copy / "dataset" / "README.md"
    before = card.read_bytes()
    proc = papermill_cli("notebooks/03_card.ipynb", demo_run_copy.parent / "out.ipynb", "-k", "repro",
                         "-p", "run_dir", demo_run_copy)
    assert proc.returncode == 1 and f"DataError: {said}" in proc.stderr, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr.partition("DataError")[2] and card.read_bytes() == before
    for (block, name, key), value, held in ((("tests", "wilcoxon", "pvalue"), "high", '"high"'),
                                            (("length", "chosen_longer_test", "chars"), [1], "a list")):
        metrics.write_text(honest)
        edit(metrics, lambda m: m[block][name].update({key: value}))
        with pytest.raises(DataError, match=re.escape(f'{metrics} holds {held} as its {block}["{name}"]["{key}"]')):
            gather_facts(build(CardParams, {"run_dir": str(demo_run_copy)}))


METRICS_FIX = (", not what 02_analyze writes: run notebooks/02_analyze.ipynb again on this run, or delete the file (a "
               "card then leaves the statistics out).")


@pytest.mark.parametrize("place, value, said", [
    (("ties",), "x", 'holds "x" as its ties where a whole number belongs'),
    (("invariants", "inversions"), "x", 'holds "x" as its invariants["inversions"] where a whole number belongs'),
    (("invariants", "candidate_scores", "two_candidate_rows"), "x",
     'holds "x" as its invariants["candidate_scores"]["two_candidate_rows"] where a whole number belongs'),
    (("invariants", "candidate_scores", "sum_to_zero_holds"), 1.5,
     'holds 1.5 as its invariants["candidate_scores"]["sum_to_zero_holds"] where a whole number belongs'),
    (("invariants", "candidate_scores", "candidates_per_row", "min"), "3",
     'holds "3" as its invariants["candidate_scores"]["candidates_per_row"]["min"] where a whole number belongs'),
    (("margin_sign", "counts", "zero"), "x",
     'holds "x" as its margin_sign["counts"]["zero"] where a whole number belongs'),
    (("invariants", "expected_to_hold"), "yes",
     'holds "yes" as its invariants["expected_to_hold"] where true or false belongs'),
    (("invariants", "selection"), 5, 'holds 5 as its invariants["selection"] where text belongs'),
    (("score_chosen", "mean"), [1], 'holds a list as its score_chosen["mean"] where a number belongs'),
    (("margin", "mean_ci95"), ["a", 1], 'holds "a" as its margin["mean_ci95"][0] where a number belongs'),
    (("margin", "mean_ci95"), [1, 2, 3], 'holds 3 items as its margin["mean_ci95"] where at most 2 belong'),
    (("margin", "median_ci95"), [1], 'holds 1 item as its margin["median_ci95"] where at least 2 belong'),
    (("effect_size", "cohens_dz"), "big", 'holds "big" as its effect_size["cohens_dz"] where a number belongs'),
    (("scale", "grid_fraction"), None, 'holds null as its scale["grid_fraction"] where a number belongs'),
    (("length",), {"available": False, "reason": 5}, 'holds 5 as its length["reason"] where text belongs')])
def test_a_metrics_json_holding_another_type_where_the_card_reads_stops_03_card_naming_it(demo_run_copy, place, value,
                                                                                          said):
    # ties as text left the ties row out of the card unsaid (n as text was an error), the invariants' counts and
    # flags as text left their checks out or went into the card as they were, a mean as a list left the means out;
    # an interval's wrong entry was said as "a list" where the list was what belonged, its length in pydantic's words;
    # a scale's grid fraction null (02_analyze writes a number) stopped it with "TypeError: unsupported operand
    # type(s) for *: 'int' and 'NoneType'", a length's reason a number with "UndefinedError: 'int object' has no
    # attribute 'rstrip'"
    metrics = demo_run_copy / "metrics.json"
    edit(metrics, lambda m: forge(m, place, value))
    with pytest.raises(DataError) as refused:
        render_body(gather_facts(build(CardParams, {"run_dir": str(demo_run_copy)})))
    assert str(refused.value) == f"{metrics} {said}{METRICS_FIX}"


def test_a_damaged_digest_is_said_as_text_of_the_form_repro_writes(demo_run_copy):
    # a digest not of hex digits was said to be where "a number belongs"
    path = demo_run_copy / "work" / "scoring" / "fingerprint.json"
    data = {**json.loads(path.read_text()), "digest": "../x"}
    with pytest.raises(DataError) as refused:
        checked(path, data, FINGERPRINT, "set aside")
    assert str(refused.value) == f'{path} holds "../x" as its digest where text of the form repro writes belongs, set aside'


@pytest.fixture(scope="module")
def two_scorers_run(demo_run, tmp_path_factory) -> Path:
    """A run of the demo's rows and a second scorer's candidate scores too (the demo scorer's, each negated), with the
    metrics.json 02_analyze writes of it: the two scorers' agreement too."""
    run = RunDir(tmp_path_factory.mktemp("two-scorers") / "run")
    rows = datasets.load_dataset(str(demo_run / "dataset"), split="train_prefs",
                                 cache_dir=str(run.root.parent / "hf-cache")).to_list()
    features = output_features(keep_all_candidates=True)
    features["candidate_scores_rm"] = features["candidate_scores"]
    write_split(datasets.Dataset.from_list([{**r, "candidate_scores_rm": [-s for s in r["candidate_scores"]]}
                                            for r in rows], features=features), run.dataset)
    Manifest(run).record("scorer", {"model": "builtin:tiny-pairrm", "stand_in": True})
    analyze(build(AnalyzeParams, {"run_dir": str(run.root), "bootstrap_resamples": 100}))
    return run.root


NOT_MEASURED = {"available": False, "reason": "Not measured."}
# the keys the card reads where another says so: a metrics.json that says so (two_scorers_run's does not)
READ_WHERE = {("n",): (("bootstrap", "few_rows"), True),
              ("length", "left_out", "column"): (("length", "left_out"), {"rows": 1, "first_row": 3, "column": "chosen"}),
              ("length", "columns"): (("length",), {**NOT_MEASURED, "cause": "no_column", "columns": ["chosen"]}),
              ("length", "type"): (("length",), {**NOT_MEASURED, "cause": "not_text", "column": "chosen", "type": "int64"})}


@pytest.mark.parametrize("place", [
    ("n",), ("scale", "kind"), ("scale", "grid_step"), ("scale", "grid_fraction"), ("scale", "distinct_values"),
    ("scale", "min"), ("scale", "max"), ("length", "margin_vs_length_difference", "chars", "spearman"),
    ("length", "margin_vs_length_difference", "tokens", "pvalue"), ("length", "chosen_longer_test", "chars", "positive"),
    ("length", "chosen_longer_test", "tokens", "negative"), ("length", "chosen_longer_test", "chars", "pvalue"),
    ("length", "left_out", "column"), ("length", "columns"), ("length", "type"), ("agreement", "pairs", 0, "scorers"),
    ("agreement", "pairs", 0, "rows"), ("agreement", "pairs", 0, "same_chosen"),
    ("agreement", "pairs", 0, "same_rejected", "fraction"), ("agreement", "pairs", 0, "kendall_tau", "undefined"),
    ("agreement", "pairs", 0, "margin_correlation")])
def test_a_metrics_json_lacking_a_key_the_card_reads_stops_03_card_naming_it(two_scorers_run, tmp_path, place):
    # metrics.json's shape left each key out unchecked, and 03_card read it: a record without one stopped it with a
    # KeyError (a length's figures by unit) or jinja2's UndefinedError (n, the scale, a length's cause, the scorers'
    # agreement), each red before records required it. 02_analyze writes each in every record (a length's facts of a
    # cause where that is its cause)
    run = Path(shutil.copytree(two_scorers_run, tmp_path / "run"))
    metrics = run / "metrics.json"
    if place in READ_WHERE:
        edit(metrics, lambda m: forge(m, *READ_WHERE[place]))
    edit(metrics, lambda m: forge(m, place))
    where = "".join(f"[{json.dumps(k)}]" if i else k for i, k in enumerate(place[:-1]))
    said = (f'{metrics} holds no "{place[-1]}"' + f" in its {where}" * bool(where) + ", not what 02_analyze writes: "
            "run notebooks/02_analyze.ipynb again on this run, or delete the file (a card then leaves the statistics "
            "out).")
    with pytest.raises(DataError) as refused:
        render_body(gather_facts(build(CardParams, {"run_dir": str(run)})))
    assert str(refused.value) == said


def forge(data: dict, place: tuple, *value) -> None:
    """`data` with `value` at `place` (its keys and indices), or without the key there where no value is given."""
    for key in place[:-1]:
        data = data[key]
    if value:
        data[place[-1]] = value[0]
    else:
        del data[place[-1]]


@pytest.mark.parametrize("damage", [lambda f: [1, 2], lambda f: f["fingerprint"].update(work="x")])
def test_a_damaged_fingerprint_of_work_sets_its_chunks_aside_and_says_so(demo_run_copy, capsys, damage):
    # a fingerprint whose `work` was no mapping stopped `repro run --check` continuing the run with an AttributeError
    edit(demo_run_copy / "manifest.json", lambda m: m.update(status="failed"))
    edit(demo_run_copy / "work" / "scoring" / "fingerprint.json", damage)
    code, out, err = repro(capsys, DEMO, "--out", demo_run_copy, "--check")
    assert code == 0 and err == "", err
    assert ("3 finished chunks in work/scoring cannot be told to be this run's: its fingerprint.json is damaged (not "
            "what repro writes): they are set aside and computed again") in out


def test_record_text_printed_shows_its_control_characters_as_escapes(demo_run_copy, capsys):
    # a copied manifest naming an output "\x1b[2K\x1b[1A...": --check's line erased itself and the line above it
    evil = "\x1b[2K\x1b[1Aevil\r\x9b"
    edit(demo_run_copy / "manifest.json", lambda m: m["outputs"].update({evil: {"sha256": "0" * 64, "bytes": 3}}))
    code, out, err = repro(capsys, DEMO, "--out", demo_run_copy, "--check")
    assert code == 0 and "its output \\x1b[2K\\x1b[1Aevil\\r\\x9b is gone or was changed" in out
    assert not any(c in out + err for c in "\x1b\r\x9b")


def test_a_damaged_members_record_stops_the_familys_check_naming_it(demo_run_copy, capsys, tmp_path):
    # `repro run --grid ... --check` read each member's record: a complete member's outputs as strings raised
    # AttributeError ('str' object has no attribute 'get')
    member = Path(shutil.copytree(demo_run_copy, tmp_path / "fam" / "mini_index-0"))  # (the grid's one member)
    manifest = member / "manifest.json"
    edit(manifest, lambda m: m.update(family={"name": "fam", "member": "mini_index-0", "index": 0,
                                              "grid": {"mini_index": 0}}))
    family = (DEMO, "--grid", "mini_index=0", "--out", tmp_path / "fam", "--check")
    assert "mini_index-0: complete with the same parameters, not run again" in repro(capsys, *family)[1]
    edit(manifest, lambda m: m.update(outputs={PARQUET: "x"}))
    error = (f'repro run: error: {manifest} holds "x" as its outputs["{PARQUET}"] where a mapping belongs'
             f"{NOT_A_RECORD} was written.\n")
    assert repro(capsys, *family) == (2, "", error)


def test_a_choice_an_older_repro_recorded_since_gone_is_a_parameter_changed_not_a_damaged_record(demo_run_copy, capsys):
    # a strict record refused such a run as "not a run's record" (and --force could not replace it); before that,
    # an unknown output_format stopped --check with a KeyError
    edit(demo_run_copy / "manifest.json", lambda m: m["parameters"].update(output_format="old", selection="older"))
    code, out, err = repro(capsys, DEMO, "--out", demo_run_copy, "--check")
    assert (code, err) == (1, "")
    said = " ".join(out.split())
    assert "holds a run with other parameters: output_format ('old' there, 'seed' now), selection ('older' there, " \
           "'best_worst' now)" in said and "continue that one" not in said
    assert "Its own values cannot continue it: output_format: Input should be 'seed'" in said
    assert repro(capsys, DEMO, "--out", demo_run_copy, "--check", "--force")[0] == 0
