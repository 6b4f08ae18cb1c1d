"""`repro selfcheck` offline on tiny checkpoints: the steps it can run, the ones it cannot and why, a checkpoint
that disagrees, and what a run and its card cite of it. No timing is asserted."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from markdown_it import MarkdownIt
from conftest import MAIN, PINNED, html_elements, shown_text

from repro import card as repro_card
from repro import cli
from repro.errors import DataError, ModelLoadError, ParameterError, ReproError
from repro.parameters import CardParams
from repro.manifest import Manifest, find_selfcheck, selfcheck_summary
from repro.paths import RunDir, default_run_dir
from repro.cli.rerun import scoring_code
from repro.cli.selfcheck import compare_choices, compare_scores, hub_status, run_selfcheck, weights_location
from repro.sources import demo_path
from repro.scorers.tiny import build_tiny_pairrm

pytestmark = pytest.mark.usefixtures("one_torch_thread")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def two_rows(tmp_path_factory) -> Path:
    """The embedded demo's first two prompts with two candidates each: real text, few passes."""
    rows = [json.loads(line) for line in demo_path().read_text(encoding="utf-8").splitlines()[:2]]
    path = tmp_path_factory.mktemp("rows") / "rows.jsonl"
    path.write_text("".join(json.dumps({"prompt": r["prompt"], "candidates": [r["resp0"], r["resp1"]]}) + "\n"
                            for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def offline_report(tmp_path_factory, two_rows):
    """`repro selfcheck` on the stand-in, CPU, no hub: exit status, stdout, the JSON and the markdown."""
    import contextlib
    import io

    folder = tmp_path_factory.mktemp("report")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["selfcheck", "--model", "builtin:tiny-pairrm", "--device", "cpu", "--input", str(two_rows),
                       "--report", str(folder)])
    return SimpleNamespace(rc=rc, stdout=out.getvalue(), folder=folder,
                           record=json.loads((folder / "selfcheck.json").read_text()),
                           md=(folder / "selfcheck.md").read_text())


def _checks(record: dict) -> dict[str, dict]:
    return {c["name"]: c for c in record["checks"]}


def test_offline_stand_in_runs_what_it_can_and_says_why_not_the_rest(offline_report):
    r, checks = offline_report.record, _checks(offline_report.record)
    assert offline_report.rc == 0 and r["verdict"] == "INCOMPLETE"
    assert offline_report.stdout.strip().splitlines()[-1].startswith("repro selfcheck: INCOMPLETE")
    assert r["environment"]["hub"]["offline"] is True and r["environment"]["llm_blender_importable"] is True
    assert r["environment"]["cuda_available"] is False
    assert checks["load_model"]["status"] == "pass" and "stand-in: True" in checks["load_model"]["detail"]
    # the engine and llm-blender's own Blender.rank(batch_size=1) agree on the two rows, ranks included
    eq = checks["engine_vs_llm_blender_fp32"]
    assert eq["status"] == "pass" and eq["data"]["rows"] == 2 and eq["data"]["max_abs_diff"] < 1e-4
    assert eq["data"]["rows_beyond_tolerance"] == [] and eq["data"]["rank_agreement"] == 1.0
    # what cannot run here, and why; only the stand-in's card example leaves the check incomplete
    assert checks["card_example"]["status"] == "not run" and "stand-in" in checks["card_example"]["detail"]
    assert checks["card_example"]["gap"] is True
    for name in ("engine_vs_llm_blender_run_dtype", "run_dtype_vs_fp32_choices", "gpu_throughput"):
        assert checks[name]["status"] == "not run" and checks[name]["gap"] is False, name
    # timed on the same rows: the engine and llm-blender at batch sizes 1 and 8, with a part2_mini_1 projection
    timing = r["timing"]
    assert set(timing["contenders"]) == {"repro (batch_tokens=2048)", "llm-blender (batch_size=1)",
                                         "llm-blender (batch_size=8)"}
    assert timing["passes"] == 4 and all(c["projected_part2_mini_1_seconds"] > 0 for c in timing["contenders"].values())
    assert "stand-in" in timing["projection_note"]
    # the markdown: a pasteable table, every not-run step with its reason, no home folder
    md = offline_report.md
    assert "| check | result | detail |" in md and "| contender | prompts/s |" in md
    assert "`card_example`: not run: stand-in" in md and "`gpu_throughput`: not run: no CUDA" in md
    assert str(Path.home()) + "/" not in md


def test_both_layouts_of_one_checkpoint_agree(tmp_path, two_rows, tiny_pairrm_dir):
    hf_layout = build_tiny_pairrm(tmp_path / "hf", layout="transformers")  # the same weights, PairRM-hf's layout
    report = run_selfcheck(str(tiny_pairrm_dir), str(hf_layout), device="cpu", input=two_rows, report_dir=None,
                           timing=False, log=lambda line: None)
    checks = {c.name: c for c in report.checks}
    assert checks["load_reference"].status == "pass" and "transformers layout" in checks["load_reference"].detail
    assert checks["layouts_fp32"].status == "pass" and checks["layouts_fp32"].data["max_abs_diff"] < 1e-4
    # llm-blender ran on the reference (the transformers layout, through its own classes)
    assert checks["engine_vs_llm_blender_fp32"].status == "pass"
    assert report.models["reference llm-blender fp32"]["layout"] == "transformers"
    assert report.exit_code == 0 and report.verdict == "INCOMPLETE"  # stand-in: no card example
    # timing switched off is the user's choice, not something missing: only the card example is named
    assert checks["speed"].status == "not run" and [c.name for c in report.gaps] == ["card_example"]


def test_the_gpu_run_dtype_path_compares_choices_and_says_why_llm_blender_was_not_timed(two_rows, monkeypatch):
    # the CUDA path (run dtype fp16) on this CPU: bf16 as the run dtype, which llm-blender refuses off CUDA; the
    # engine's choices are checked against fp32, and the refusal is the reason given, not "not loaded"
    import repro.cli.selfcheck as selfcheck

    resolve = selfcheck.resolve_dtype
    monkeypatch.setattr(selfcheck, "resolve_dtype", lambda d, device, **k: "bf16" if d == "auto" else
                        resolve(d, device, **k))
    report = run_selfcheck("builtin:tiny-pairrm", None, device="cpu", input=two_rows, report_dir=None,
                           log=lambda line: None)
    checks = {c.name: c for c in report.checks}
    assert report.settings["run_dtype"] == "bf16" and checks["engine_vs_llm_blender_fp32"].status == "pass"
    assert checks["run_dtype_vs_fp32_choices"].status == "pass"
    assert checks["run_dtype_vs_fp32_choices"].data["rows"] == 2
    refused = "builtin:tiny-pairrm in bf16: ParameterError: dtype='bf16' on cpu: llm-blender runs fp16 on CUDA/MPS"
    assert checks["engine_vs_llm_blender_run_dtype"].status == "not run"
    assert checks["engine_vs_llm_blender_run_dtype"].detail.startswith(refused)
    speed = checks["speed"].detail
    assert speed.startswith("engine ") and "; ;" not in speed and f"llm-blender not timed: {refused}" in speed


def test_timing_on_a_busy_machine_says_its_figures_are_not_a_measurement(two_rows, monkeypatch):
    # a verifier's selfcheck beside other jobs: 0.89 prompts/s against 19.9 quiet, and nothing said so
    monkeypatch.setattr(os, "getloadavg", lambda: (3.0 * os.cpu_count(), 1.0, 1.0))
    report = run_selfcheck("builtin:tiny-pairrm", None, device="cpu", input=two_rows, report_dir=None,
                           log=lambda line: None)
    speed = next(c for c in report.checks if c.name == "speed")
    assert speed.data["load_average"] == [3.0 * os.cpu_count()] * 2
    assert (f"the machine was busy (load {3.0 * os.cpu_count():.1f} on {os.cpu_count()} cores): these times are not "
            f"a measurement; run again on a quiet machine") in speed.detail
    # the check's own threads alone (a quiet machine) are no other work
    monkeypatch.setattr(os, "getloadavg", lambda: (float(os.cpu_count()) + 0.5, 1.0, 1.0))
    report = run_selfcheck("builtin:tiny-pairrm", None, device="cpu", input=two_rows, report_dir=None,
                           log=lambda line: None)
    assert "busy" not in next(c for c in report.checks if c.name == "speed").detail


def test_a_reference_with_other_weights_fails_and_names_the_rows(tmp_path, two_rows, tiny_pairrm_dir, capsys):
    other = build_tiny_pairrm(tmp_path / "other", seed=1, layout="transformers")
    rc = cli.main(["selfcheck", "--model", str(tiny_pairrm_dir), "--reference-model", str(other), "--device", "cpu",
                   "--input", str(two_rows), "--report", str(tmp_path / "report"), "--no-timing"])
    out = capsys.readouterr().out
    assert rc == 1
    record = json.loads((tmp_path / "report" / "selfcheck.json").read_text())
    checks = _checks(record)
    assert record["verdict"] == "FAIL"
    for name in ("layouts_fp32", "engine_vs_llm_blender_fp32"):
        assert checks[name]["status"] == "fail" and checks[name]["data"]["rows_beyond_tolerance"] == [0, 1], name
        # the rows as --input's lines, as repro score's messages name them (the record keeps their indices)
        assert f"FAILED {name}: 2 rows beyond tolerance: line 1 (" in out and ", line 2 (" in out
    assert out.strip().splitlines()[-1].startswith("repro selfcheck: FAIL")
    assert checks["speed"]["status"] == "not run" and "--no-timing" in checks["speed"]["detail"]


def test_failed_rows_are_named_as_repro_score_names_them(tmp_path, two_rows, tiny_pairrm_dir, capsys):
    # a blank line first and one between: the rows are the file's lines 2 and 4, as `repro score` calls them
    lines = two_rows.read_text(encoding="utf-8").splitlines()
    blank = tmp_path / "blank.jsonl"
    blank.write_text("\n" + lines[0] + "\n\n" + lines[1] + "\n", encoding="utf-8")
    other = build_tiny_pairrm(tmp_path / "other", seed=1, layout="transformers")
    rc = cli.main(["selfcheck", "--model", str(tiny_pairrm_dir), "--reference-model", str(other), "--device", "cpu",
                   "--input", str(blank), "--report", str(tmp_path / "report"), "--no-timing"])
    streams = capsys.readouterr()
    assert rc == 1
    record = json.loads((tmp_path / "report" / "selfcheck.json").read_text())
    detail = _checks(record)["layouts_fp32"]["detail"]
    assert detail.startswith("2 rows beyond tolerance: line 2 (") and ", line 4 (" in detail
    md = (tmp_path / "report" / "selfcheck.md").read_text()
    assert "line 2 (" in md and "row 1 (" not in md and "row 2 (" not in md
    assert "beyond tolerance: line 2 (" in streams.out + streams.err and "row 1 (" not in streams.out + streams.err
    # a parquet file's rows are its rows, from 1, as `repro score` numbers them
    import pyarrow as pa
    import pyarrow.parquet as pq
    from repro.cli.selfcheck import selfcheck_rows

    pq.write_table(pa.Table.from_pylist([json.loads(line) for line in lines]), tmp_path / "rows.parquet")
    assert selfcheck_rows(tmp_path / "rows.parquet", 2)[3] == ["row 1", "row 2"]
    assert selfcheck_rows(blank, 2)[3] == ["line 2", "line 4"]


def test_names_and_rows_from_the_input_never_become_html_in_the_report(tmp_path, two_rows, tiny_pairrm_dir,
                                                                       monkeypatch):
    """--input rows someone sent, in a file named "rows` <img src=x onerror=...> `.jsonl", with a prompt that starts
    with an <img>, and a reference model in a folder named alike: the report (its notebook view and selfcheck.md)
    put the command and the model between backticks the names closed, and the failed rows' prompts in a cell as they
    were; JupyterLab ran the <img>s. Now they show as text."""
    rows = [json.loads(line) for line in two_rows.read_text(encoding="utf-8").splitlines()]
    prompt = "<img src=x onerror=f(2)> " + rows[0]["prompt"]
    rows[0]["prompt"] = prompt
    (path := tmp_path / "rows` <img src=x onerror=f(1)> `.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    other = build_tiny_pairrm(tmp_path / "ref` <img src=x onerror=f(3)> `", seed=1, layout="transformers")
    argv = ["selfcheck", "--model", str(tiny_pairrm_dir), "--reference-model", str(other), "--device", "cpu",
            "--input", str(path), "--no-timing", "--report", str(tmp_path / "report")]
    monkeypatch.setattr(sys, "argv", ["repro", *argv])  # (the command the report shows, as typed)
    report = run_selfcheck(*argv[2:5:2], device="cpu", input=path, timing=False, report_dir=tmp_path / "report",
                           log=lambda *_: None)
    assert report.verdict == "FAIL"
    shown = report._repr_markdown_()
    assert html_elements(shown) == [] and shown == (tmp_path / "report" / "selfcheck.md").read_text()
    for said in (f"--reference-model '{other.name}' ", f"reference local folder {other.name};",
                 f"2 rows from {path.name};", f"weights of local folder {other.name}",
                 f"2 rows beyond tolerance: line 1 ({prompt[:40] + '…'!r})"):
        assert said in shown_text(shown), said


def test_a_model_path_or_stand_in_that_is_not_there_is_refused_before_anything_runs(tmp_path, two_rows, capsys):
    """`--reference-model /x/nothere` ran 210 s, then reported "load_reference: not run: ... nothing is at /x/nothere",
    INCOMPLETE, exit 0; `--model builtin:tiny-pairm` (a typo) exited 2 after writing a report. Both are refused at
    once, as `repro score` refuses its --model, naming the option; no report is written."""
    report = tmp_path / "report"
    for option, value, words in (("--reference-model", str(tmp_path / "nothere"), "nothing is at"),
                                 ("--model", "builtin:tiny-pairm", "Unknown built-in model")):
        args = ["--model", "builtin:tiny-pairrm", option, value] if option != "--model" else [option, value]
        assert cli.main(["selfcheck", *args, "--device", "cpu", "--input", str(two_rows), "--no-timing",
                         "--report", str(report)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"repro selfcheck: error: {option} {value}: ") and words in err
        assert not report.exists()
    with pytest.raises(ModelLoadError, match="^--model .*absent: .*is not a directory"):
        run_selfcheck(str(tmp_path / "absent"), None, device="cpu", input=two_rows, report_dir=tmp_path / "r",
                      log=lambda line: None)
    assert not (tmp_path / "r").exists()


def test_bad_rows_are_an_error_before_any_model_loads(tmp_path, capsys):
    # --rows and --device are read by the schema's rule as argparse reads them; run_selfcheck's `rows` by the same
    with pytest.raises(ParameterError, match=r"^rows: must be >= 1 \(got 0\)\.$"):
        run_selfcheck("builtin:tiny-pairrm", device="cpu", rows=0, report_dir=None)
    for option, value, words in (("--rows", "0", "must be >= 1"), ("--rows", "two", "Input should be a valid integer"),
                                 ("--device", "gpu", "must be one of auto, cpu, cuda, cuda:N or mps")):
        with pytest.raises(SystemExit):
            cli.main(["selfcheck", option, value, "--report", str(tmp_path / "r")])
        assert re.search(rf"repro selfcheck: error: argument {option}: {re.escape(words)}.* \(got {value!r}\)\.\n",
                         capsys.readouterr().err)
    assert cli.main(["selfcheck", "--input", str(tmp_path / "nope.jsonl"), "--report", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_comparisons_name_rows_beyond_tolerance_and_tell_near_ties_from_flips():
    reference = [[1.0, -1.0], [0.5, -0.5], [0.2, 0.19, -0.39]]
    scores = [[1.0 + 5e-5, -1.0], [0.5, -0.5 + 1e-2], [0.19, 0.2, -0.39]]
    found = compare_scores(scores, reference, "fp32")
    assert found["rows_beyond_tolerance"] == [1, 2] and found["rows_with_other_ranks"] == [2]
    assert found["max_abs_diff"] == pytest.approx(1e-2)
    # fp16 vs fp32: row 2 swaps two candidates fp32 puts 0.01 apart (a near-tie), row 1 swaps a clear winner
    fp16 = [[1.0, -1.0], [-0.5, 0.5], [0.195, 0.2, -0.39]]
    choices = compare_choices(fp16, reference, "fp16")
    assert choices["rows_with_other_choices"] == [1, 2] and choices["decisive_rows"] == [1]
    assert choices["agreement"] == pytest.approx(1 / 3)


def test_hub_answer_is_awaited_briefly_and_offline_is_respected(monkeypatch):
    from huggingface_hub import constants

    assert hub_status()["offline"] is True  # tests run with HF_HUB_OFFLINE=1: the hub is not asked
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens on the discard port
    start = time.perf_counter()
    found = hub_status(timeout=2)
    assert found["reachable"] is False and "127.0.0.1:9" in found["detail"]
    assert time.perf_counter() - start < 10


def test_weights_location_finds_llm_blenders_download_folder(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert weights_location("llm-blender/PairRM")["cached"] is False
    folder = tmp_path / "llm-blender" / "PairRM"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "pytorch_model.bin").write_bytes(b"0" * 1024)
    found = weights_location("llm-blender/PairRM")
    assert found["cached"] is True and found["path"] == str(folder) and found["weights"] == "pytorch_model.bin"


def test_a_run_records_the_self_check_and_its_card_states_it(tmp_path, offline_report, stubbed_notebooks):
    run_dir = tmp_path / "run"
    (run_dir / "dataset").mkdir(parents=True)  # as 01_construct left it: 03_card alone reads it
    # `repro run` with `selfcheck` given: recorded before the notebooks run (papermill replaced by a stub here)
    assert cli.main(["run", str(ROOT / "params" / "demo.yaml"), "--out", str(run_dir), "--set", "notebooks=[03_card]",
                     "--set", f"selfcheck={offline_report.folder}"]) == 0
    assert stubbed_notebooks == ["03_card"]
    manifest = Manifest(run_dir).read()
    check = manifest["selfcheck"]
    assert check["verdict"] == "INCOMPLETE" and check["device"] == "cpu" and check["model"] == "builtin:tiny-pairrm"
    assert check["versions"]["torch"] == offline_report.record["environment"]["packages"]["torch"]
    assert check["same_versions_as_run"] is True and "card_example" in check["not_run"]
    assert "selfcheck" not in manifest["parameters"]  # a path of this machine: kept out of the card's parameters
    # the card's "How it was built" states it, in English and Chinese
    facts = repro_card.CardFacts(run=RunDir(run_dir), title="t", features=None, splits=[], built_here=True,
                                 license="mit", language=["en"], selfcheck=check)
    en, zh = (repro_card.render_section(facts, "selfcheck", lang).split("\n\n") for lang in ("en", "zh"))
    assert en[0] == "### Self-check" and "**INCOMPLETE** on `cpu`" in en[1] and "`card_example`" in en[1]
    assert zh[0] == "### 自检" and "**不完整**" in zh[1] and f"torch {check['versions']['torch']}" in zh[1]
    facts.built_here = False
    assert repro_card.render_section(facts, "selfcheck", "en") == ""


def test_a_self_check_of_another_model_is_cited_as_of_another_model(tmp_path, two_rows, stubbed_notebooks):
    """`repro selfcheck --model "~/my models/pairrm x" --report runs/t1`, then `repro run demo --out runs/t1` (scorer
    builtin:tiny-pairrm): the card cited the folder's verdict as the run's, without a word that it checked another
    model. Scored by that folder (a copy of it: the same files), the run cites it as before."""
    folder = build_tiny_pairrm(tmp_path / "my models" / "pairrm x")
    run_selfcheck(str(folder), None, device="cpu", input=two_rows, report_dir=tmp_path / "t1", timing=False)
    copy = build_tiny_pairrm(tmp_path / "copy")
    runs = {"t1": [], "t2": ["--set", f"scorer_model={copy}", "--set", f"selfcheck={tmp_path / 't1'}"]}
    for name, sets in runs.items():
        (tmp_path / name / "dataset").mkdir(parents=True, exist_ok=True)
        assert cli.main(["run", str(ROOT / "params" / "demo.yaml"), "--out", str(tmp_path / name), "--set",
                         "notebooks=[03_card]", *sets]) == 0
    other, same = (Manifest(tmp_path / name).read()["selfcheck"] for name in runs)
    assert other["same_model_as_run"] is False and same["same_model_as_run"] is True
    for check, says in ((other, True), (same, False)):
        facts = repro_card.CardFacts(run=RunDir(tmp_path), title="t", features=None, splits=[], built_here=True,
                                     license="mit", language=["en"], selfcheck=check)
        en, zh = (repro_card.render_section(facts, "selfcheck", lang).split("\n\n")[1] for lang in ("en", "zh"))
        assert ("of another model than this run's scorer, so it says nothing of these scores: INCOMPLETE on `cpu`"
                in en) is says and ("**INCOMPLETE**" in en) is not says, en
        assert ("检查的是另一个模型，而非本次运行的评分模型，与这些分数无关；其结论为 不完整：设备" in zh) is says
        assert ("结论为 **不完整**" in zh) is not says and "model `local folder pairrm x`" in en, zh
    # a reviewer: the same files named otherwise (the hub id of a snapshot folder), or a copy of a large file (its
    # date, all that names it), were "another model": not known, so not said
    report = tmp_path / "t1" / "selfcheck.json"
    assert selfcheck_summary(report, {"hub_id": "me/tiny-pairrm", "commit": "0123"})["same_model_as_run"] is None
    old = tmp_path / "old.json"  # a report from before identities were kept: a built-in is named by its name
    old.write_text(json.dumps(json.loads(report.read_text()) | {"models": {"model": {"spec": "builtin:tiny-llama"}}}))
    assert selfcheck_summary(old, {"name": "builtin:tiny-pairrm"})["same_model_as_run"] is False
    record = json.loads(report.read_text())
    (checked := next(iter(record["models"].values()))["identity"]["files"])["model.safetensors"] = "size=9 mtime=1"
    report.write_text(json.dumps(record))
    for big, same in (("size=9 mtime=2", None), ("size=8 mtime=1", False), ("size=9 mtime=1", True)):
        assert selfcheck_summary(report, {"files": checked | {"model.safetensors": big}})["same_model_as_run"] is same
    # its folder (maybe the run's hub id's snapshot) beside another hub id checked: not known, not "another model"
    record["models"]["reference"] = {"spec": "other/rm", "identity": {"hub_id": "other/rm", "commit": "1"}}
    report.write_text(json.dumps(record))
    assert selfcheck_summary(report, {"hub_id": "me/rm", "commit": "1"})["same_model_as_run"] is None


def test_a_self_check_of_a_hub_ids_main_is_not_a_run_pinned_to_another_commit(tmp_path, offline_report,
                                                                              two_template_hub, stubbed_notebooks):
    """`repro selfcheck --model fakeorg/policy` (main), then `repro run` with scorer_revision pinned to another commit:
    the run's scorer was identified by main's commit, so the card cited the self-check as of the run's scorer."""
    record = json.loads((offline_report.folder / "selfcheck.json").read_text())
    for model in record["models"].values():
        model.update(spec="fakeorg/policy", identity={"hub_id": "fakeorg/policy", "commit": MAIN})
    (tmp_path / "check").mkdir()
    (tmp_path / "check" / "selfcheck.json").write_text(json.dumps(record))
    said = {}
    for revision in (PINNED, MAIN):
        out = tmp_path / revision[:4]
        (out / "dataset").mkdir(parents=True)
        assert cli.main(["run", str(ROOT / "params" / "demo.yaml"), "--out", str(out), "--set", "notebooks=[03_card]",
                         "--set", "scorer_model=fakeorg/policy", "--set", f"scorer_revision={revision}",
                         "--set", f"selfcheck={tmp_path / 'check'}"]) == 0
        said[revision] = Manifest(out).read()["selfcheck"]["same_model_as_run"]
    assert said == {PINNED: False, MAIN: True}


def test_a_card_alone_compares_the_self_check_with_the_scorer_that_scored_the_rows(tmp_path, offline_report,
                                                                                   stubbed_notebooks):
    """`repro run demo` (scorer builtin:tiny-pairrm, checked by the self-check), then only 03_card again with another
    scorer_model set: the self-check was compared with that one, so the card called it "of another model" though the
    rows were scored by the model it checked."""
    run = ["run", str(ROOT / "params" / "demo.yaml"), "--out", str(tmp_path), "--set",
           f"selfcheck={offline_report.folder}"]
    assert cli.main([*run, "--set", "notebooks=[01_construct]"]) == 0
    assert Manifest(tmp_path).read()["selfcheck"]["same_model_as_run"] is True
    (tmp_path / "dataset").mkdir()  # as 01_construct left it
    assert cli.main([*run, "--set", "notebooks=[03_card]", "--set", "scorer_model=builtin:tiny-reward-llama"]) == 0
    assert stubbed_notebooks == ["01_construct", "03_card"]
    manifest = Manifest(tmp_path).read()
    assert manifest["parameters"]["scorer_model"] == "builtin:tiny-pairrm"
    assert manifest["selfcheck"]["same_model_as_run"] is True


def test_a_self_check_of_other_scoring_code_is_cited_as_such(tmp_path, sample_dir, offline_report, stubbed_notebooks,
                                                             capsys):
    """An upgrader: a self-check made by older scoring code (same repro version string, same model) was recorded
    `same_versions_as_run`, `same_model_as_run` and cited as a plain PASS, though repro set aside that code's scoring
    chunks as "made by other scoring code". The self-check records the code it tested, the score stage the code that
    scored the rows (the scoring fingerprint's `code`), and the card and --check say where they differ."""
    from repro.construct import stages
    from repro.parameters import ConstructParams

    run = tmp_path / "run"  # a real construction of 4 fixture rows (01_construct's stages, no notebook)
    ctx = stages.begin(ConstructParams(run_dir=str(run), source=str(sample_dir / "train_prefs.jsonl"), limit=4,
                                       candidate_columns=[], include_original_pair=True, device="cpu", dtype="fp32",
                                       scorer_model="builtin:tiny-pairrm"))
    ds = stages.slice_rows(ctx, stages.load(ctx))
    cs = stages.candidates(ctx, ds)
    stages.write(ctx, stages.build(ctx, ds, cs, stages.score(ctx, cs)))
    work = json.loads(next((run / "work").rglob("fingerprint.json")).read_text())["fingerprint"]["work"]
    manifest = Manifest(run)
    assert manifest.read()["stages"]["score"]["code"] == work["code"]
    assert offline_report.record["environment"]["scoring_code"] == work["code"]
    report = json.loads((offline_report.folder / "selfcheck.json").read_text())
    card = ["run", str(ROOT / "params" / "demo.yaml"), "--out", str(run), "--set", "notebooks=[03_card]",
            "--set", f"selfcheck={tmp_path / 'check'}"]

    def cited(code: str | None, scored: str | None = work["code"], rescored: str | None = None) -> dict:
        (tmp_path / "check").mkdir(exist_ok=True)
        env = {k: v for k, v in report["environment"].items() if k != "scoring_code"}
        (tmp_path / "check" / "selfcheck.json").write_text(json.dumps(  # (another file each: the card runs again)
            {**report, "environment": env | ({"scoring_code": code} if code else {}), "case": [code, scored]}))
        with manifest.edit() as data:
            data["stages"]["score"]["code"] = scored
        capsys.readouterr()
        assert cli.main([card[0], "--check", *card[1:]]) == 0
        said = [line for line in capsys.readouterr().out.splitlines() if "scoring code" in line]
        assert cli.main(card) == 0
        check = manifest.read()["selfcheck"]
        if rescored:  # 01_construct run again on its own (papermill, JupyterLab) by other code: its record's code
            with manifest.edit() as data:
                data["stages"]["score"]["code"] = rescored
            (tmp_path / "check" / "selfcheck.json").unlink()  # (as recorded: the run's folder may have moved since)
        facts = repro_card.gather_facts(CardParams(run_dir=str(run)))  # the card as 03_card makes it
        en, zh = (repro_card.render_section(facts, "selfcheck", lang) for lang in ("en", "zh"))
        return {"same": check["same_code_as_run"], "said": said, "en": en, "zh": zh}

    other = "It ran other scoring code than this run.", "自检时的评分代码与本次运行不同。"
    unknown = "Whether it ran this run's scoring code is not recorded.", "未记录自检时的评分代码是否与本次运行相同。"
    # a self-check of older code, cited by this run's card; a run scored by older code, its card made again after
    # an upgrade (the code installed then is the self-check's: the run's is the one its manifest records)
    for found in (cited("0123456789abcdef"), cited(work["code"], scored="0123456789abcdef")):
        assert found["same"] is False and other[0] in found["en"] and other[1] in found["zh"]
        assert found["said"] == [f"  NOTE     selfcheck: {tmp_path / 'check' / 'selfcheck.json'} ran other scoring "
                                 f"code than this run (the card says so)"], found["said"]
    # the same code: nothing said, as before
    same = cited(work["code"])
    assert same["same"] is True and same["said"] == []
    assert "scoring code" not in same["en"] and "评分代码" not in same["zh"]
    # a self-check of an older repro (no code recorded), or a run's record without one: not known, said so
    for found in (cited(None), cited(work["code"], scored=None)):
        assert found["same"] is None and unknown[0] in found["en"] and unknown[1] in found["zh"]
        assert found["said"] == [f"  NOTE     selfcheck: {tmp_path / 'check' / 'selfcheck.json'}: whether it ran this "
                                 f"run's scoring code is not recorded (the card says so)"], found["said"]
    # the rows scored again after the run that recorded the self-check, by other code or by the self-check's: the
    # card compares the code that scored them when it is made (it cited the verdict recorded before, either way)
    again = cited(work["code"], rescored="0123456789abcdef")
    assert again["same"] is True and other[0] in again["en"] and other[1] in again["zh"]
    again = cited("0123456789abcdef", rescored="0123456789abcdef")
    assert again["same"] is False and "scoring code" not in again["en"] and "评分代码" not in again["zh"]
    # a run that scores again: its code is the one installed (its record's is the last run's)
    assert scoring_code(RunDir(run), ["01_construct", "03_card"]) == work["code"] != scoring_code(RunDir(run), [])


def test_the_newest_self_check_in_the_run_directory_is_found(tmp_path, offline_report):
    assert find_selfcheck(tmp_path) is None
    old = json.loads((offline_report.folder / "selfcheck.json").read_text())
    for sub, when, verdict in (("a", "2026-01-01T00:00:00+00:00", "FAIL"), ("b", "2026-02-01T00:00:00+00:00", "PASS")):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "selfcheck.json").write_text(json.dumps({**old, "when": when, "verdict": verdict}))
    assert find_selfcheck(tmp_path) == tmp_path / "b" / "selfcheck.json"
    assert Manifest(tmp_path).record_selfcheck()["verdict"] == "PASS"
    with pytest.raises(ParameterError, match="selfcheck='.*nowhere'.*repro selfcheck --report DIR"):
        find_selfcheck(tmp_path, tmp_path / "nowhere")
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(ParameterError, match="not a report of `repro selfcheck`"):
        find_selfcheck(tmp_path, tmp_path / "c.json")


def test_a_damaged_self_check_in_the_run_directory_stops_repro_run_naming_it(tmp_path, offline_report, capsys):
    # a report whose check had no status was passed over without a word: the run said "the self-check it would cite
    # is another: 03_card runs again", and its card had no self-check section
    report = tmp_path / "x" / "sc" / "selfcheck.json"
    report.parent.mkdir(parents=True)
    record = json.loads((offline_report.folder / "selfcheck.json").read_text())
    record["checks"][0]["status"] = None
    report.write_text(json.dumps(record))
    said = (f"{report} holds null as its checks[0][\"status\"] where text belongs, not a report of `repro selfcheck` "
            f"as it writes one, and the run would cite it: run `repro selfcheck --report {report.parent}` again, or "
            f"delete it.")
    with pytest.raises(DataError) as caught:
        find_selfcheck(tmp_path / "x")
    assert str(caught.value) == said
    assert cli.main(["run", str(ROOT / "params" / "demo.yaml"), "--out", str(tmp_path / "x")]) == 2
    assert said in capsys.readouterr().err and sorted(p.name for p in (tmp_path / "x").iterdir()) == ["sc"]


def test_a_missing_self_check_stops_repro_run_before_anything_runs(tmp_path, capsys):
    assert cli.main(["run", str(ROOT / "params" / "demo.yaml"), "--out", str(tmp_path / "x"),
                     "--set", f"selfcheck={tmp_path / 'none'}"]) == 2
    assert "selfcheck=" in capsys.readouterr().err and not (tmp_path / "x").exists()


def test_the_card_example_check_refuses_weights_that_are_not_pairrms(tiny_pairrm_dir):
    from repro.scorers import load_scorer
    from repro.cli.selfcheck import card_example_check

    check = card_example_check({"stand-in": load_scorer(tiny_pairrm_dir, device="cpu")})
    assert check.status == "fail" and "stand-in: logits" in check.detail and "card [1.9003" in check.detail
    assert abs(check.data["stand-in"]["max_abs_diff"]) > 1e-3


def test_the_markdown_reports_gpu_figures_when_a_gpu_measured_them(offline_report):
    from repro.cli.selfcheck import render_markdown

    record = json.loads(json.dumps(offline_report.record))
    record["environment"]["gpus"] = [{"name": "Some GPU", "memory_gb": 80.0}]
    record["timing"].update(device="cuda", dtype="fp16", cuda_resident_mb=2600.0,
                            gpu={"matmul_peak_tflops": 700.0, "engine_useful_tflops": 210.0,
                                 "engine_fraction_of_peak": 0.3})
    md = render_markdown(record)
    assert "| GPU | Some GPU (80.0 GiB) |" in md
    assert "Engine: 210.0 useful TFLOP/s, 30.0 % of a fp16 matmul measured in the same run (700 TFLOP/s)" in md
    assert "held 2600 MB of GPU memory" in md


def test_an_error_in_the_report_template_names_it_and_its_line(offline_report, monkeypatch):
    # a record's value the report's template cannot format (a bug: a figure left as text) reached IPython with the
    # template's frames, which it read as Python: the notebook's cell, and `repro run`, said nothing
    from repro.cli import selfcheck

    template = Path(selfcheck.__file__).parent / "templates" / "selfcheck.md.jinja"
    record = json.loads(json.dumps(offline_report.record))
    record["timing"]["mean_tokens_per_pass"] = "n/a"
    line = next(i for i, text in enumerate(template.read_text().splitlines(), 1) if "mean_tokens_per_pass|f(" in text)
    with pytest.raises(ReproError) as caught:
        selfcheck.render_markdown(record)
    assert str(caught.value).startswith(f"The self-check's template selfcheck.md.jinja, line {line}: ValueError: "
                                        "Unknown format code 'f' for object of type 'str'. This is a bug in repro.cli.selfcheck")
    assert caught.value.__suppress_context__


def test_offline_without_weights_nothing_is_checked_and_the_verdict_says_why(tmp_path, two_rows, capsys):
    rc = cli.main(["selfcheck", "--model", "repro-tests/not-cached", "--reference-model", "none", "--device", "cpu",
                   "--input", str(two_rows), "--report", str(tmp_path), "--no-timing"])
    out = capsys.readouterr().out
    assert rc == 2  # INCOMPLETE with nothing checked is not a success
    last = out.strip().splitlines()[-1]
    assert last.startswith("repro selfcheck: INCOMPLETE: nothing could be checked, because load_model did not run "
                           "(ModelLoadError: PairRM model 'repro-tests/not-cached' could not be loaded")
    assert "0 checks passed, 0 failed" in last
    assert out.count("To provide it: on a machine with internet") == 1  # the long reason, once
    assert out.count("repro selfcheck: INCOMPLETE:") == 1  # the verdict line, once (the heading names the verdict)
    record = json.loads((tmp_path / "selfcheck.json").read_text())
    assert record["verdict"] == "INCOMPLETE" and record["verdict_line"] == last


def test_machine_info_names_the_gpu_the_device_names(monkeypatch):
    import torch

    from repro.cli.measure import machine_info

    names, memory = ["GPU zero", "GPU one"], [80 * 2 ** 30, 141 * 2 ** 30]
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: names[i])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(total_memory=memory[i]))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert (machine_info("cuda:1")["gpu"], machine_info("cuda:1")["gpu_memory_gb"]) == ("GPU one", 141.0)
    assert machine_info("cuda")["gpu"] == "GPU zero"
    assert "gpu" not in machine_info("cpu")


def test_without_input_it_scores_the_embedded_demos_rows():
    """`repro selfcheck` with no --input reads the first --rows rows of the demo the package carries."""
    from repro.cli.selfcheck import selfcheck_rows

    prompts, candidates, source, names = selfcheck_rows(None, 3)
    assert names == ["row 1", "row 2", "row 3"]
    demo = [json.loads(line) for line in demo_path().read_text(encoding="utf-8").splitlines()[:3]]
    assert prompts == [row["prompt"] for row in demo]
    assert candidates == [list(dict.fromkeys(row[c] for c in ("resp0", "resp1", "resp2", "resp3"))) for row in demo]
    assert "embedded demo" in source


def test_paths_from_the_home_folder_as_typed():
    # `--report=~/check` and a quoted '~/rows.jsonl': no shell expands the ~ there (a folder named ~ was made)
    from repro.cli import build_parser

    args = build_parser("selfcheck").parse_args(["selfcheck", "--report=~/check", "--input", "~/rows.jsonl"])
    assert (args.report, args.input) == (Path.home() / "check", Path.home() / "rows.jsonl")


def test_the_report_goes_by_default_where_a_run_named_selfcheck_would(tmp_path, two_rows, monkeypatch):
    # the default folder, runs/selfcheck of the project root, is the runs folder repro.paths keeps for every run
    monkeypatch.setenv("REPRO_HOME", str(tmp_path))
    args = cli.build_parser("selfcheck").parse_args(["selfcheck"])
    run_selfcheck("builtin:tiny-pairrm", device="cpu", input=two_rows, rows=1, report_dir=args.report, timing=False,
                  log=lambda line: None)
    assert sorted(p.name for p in default_run_dir("selfcheck").iterdir()) == ["selfcheck.json", "selfcheck.md"]
    assert default_run_dir("selfcheck") == tmp_path / "runs" / "selfcheck"


def test_selfcheck_json_writes_the_home_folder_as_the_markdown_does(tmp_path, two_rows, monkeypatch):
    # selfcheck.json said "/root/.cache/repro" (the stand-in's folder) where selfcheck.md says ~/.cache/repro
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("REPRO_CACHE", raising=False)
    run_selfcheck("builtin:tiny-pairrm", device="cpu", input=two_rows, rows=1, report_dir=tmp_path / "rep",
                  timing=False, log=lambda line: None)
    text, md = ((tmp_path / "rep" / name).read_text() for name in ("selfcheck.json", "selfcheck.md"))
    assert str(home) not in text and str(home) not in md
    assert '"~/.cache/repro/tiny-pairrm-v1"' in text and "built-in stand-in: ~/.cache/repro |" in md


def test_only_the_home_folder_itself_is_written_as_tilde(tmp_path, two_rows, monkeypatch):
    # with HOME=/home/al, /home/alice/rows.jsonl was written ~ice/rows.jsonl (and /rootfs ~fs): a wrong path
    home = tmp_path / "home" / "al"
    rows = tmp_path / "home" / "alice" / str(home).lstrip("/") / "rows.jsonl"  # home's name inside, not at its start
    rows.parent.mkdir(parents=True)
    rows.write_bytes(two_rows.read_bytes())
    monkeypatch.setenv("HOME", str(home))
    run_selfcheck("builtin:tiny-pairrm", device="cpu", input=rows, rows=1, report_dir=tmp_path / "rep",
                  timing=False, log=lambda line: None)
    record, md = json.loads((tmp_path / "rep" / "selfcheck.json").read_text()), (tmp_path / "rep" / "selfcheck.md")
    assert record["rows"]["source"] == str(rows) and "from rows.jsonl;" in md.read_text()  # (no machine path there)
    assert "~ice" not in md.read_text()


def test_the_markdown_to_paste_into_an_issue_holds_no_path_of_this_machine(tmp_path, two_rows, monkeypatch):
    # `repro selfcheck --no-timing` from a folder without the model: selfcheck.md said "no folder
    # /tmp/v64/old/llm-blender/PairRM-hf" (the home folder alone was written ~)
    monkeypatch.chdir((tmp_path / "old").mkdir() or tmp_path / "old")
    rows = tmp_path / "elsewhere" / "rows.jsonl"
    rows.parent.mkdir()
    rows.write_bytes(two_rows.read_bytes())
    argv = ["selfcheck", "--model", "llm-blender/PairRM-hf", "--reference-model", "none", "--device", "cpu",
            "--input", str(rows), "--report", str(tmp_path / "old" / "rep"), "--no-timing"]
    monkeypatch.setattr(sys, "argv", ["repro", *argv])
    assert cli.main(argv) == 2
    md = (tmp_path / "old" / "rep" / "selfcheck.md").read_text()
    assert str(tmp_path) not in md and "no folder llm-blender/PairRM-hf: a relative path is read from the current " \
                                       "folder" in md
    assert "`repro selfcheck --model llm-blender/PairRM-hf --reference-model none --device cpu --input rows.jsonl " \
           "--report rep --no-timing`" in md and "from rows.jsonl;" in md
    record = json.loads((tmp_path / "old" / "rep" / "selfcheck.json").read_text())  # the record keeps them
    assert record["rows"]["source"] == str(rows) and str(tmp_path / "old" / "llm-blender") in json.dumps(record)


def test_a_relative_report_folder_is_taken_from_the_current_folder_as_the_input_is(tmp_path, two_rows, monkeypatch):
    # `--input rows.jsonl --report rep` from a sub-folder: the input was read there, the report written at the root
    monkeypatch.setenv("REPRO_HOME", str(tmp_path))
    monkeypatch.chdir((tmp_path / "in").mkdir() or tmp_path / "in")
    (tmp_path / "in" / "rows.jsonl").write_bytes(two_rows.read_bytes())
    assert cli.main(["selfcheck", "--model", "builtin:tiny-pairrm", "--device", "cpu", "--rows", "1", "--no-timing",
                     "--input", "rows.jsonl", "--report", "rep"]) == 0
    assert (tmp_path / "in" / "rep" / "selfcheck.md").is_file() and not (tmp_path / "rep").exists()


def test_the_recorded_command_is_quoted_for_a_shell(tmp_path, two_rows, monkeypatch):
    # selfcheck.md said `repro selfcheck ... --report runs/my run é`: pasted, a report in runs/my
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "my run é"
    argv = ["selfcheck", "--model", "builtin:tiny-pairrm", "--device", "cpu", "--rows", "1", "--no-timing",
            "--input", str(two_rows), "--report", str(report)]
    monkeypatch.setattr(sys, "argv", ["repro", *argv])
    assert cli.main(argv) == 0
    command = json.loads((report / "selfcheck.json").read_text())["settings"]["command"]
    assert command == "repro " + shlex.join(argv) and shlex.split(command)[1:] == argv
    # selfcheck.md (no machine path): the report folder from the current one, the input by its name
    assert f"`{command.replace(str(tmp_path) + '/', '').replace(str(two_rows), two_rows.name)}`" in (
        report / "selfcheck.md").read_text()


def test_a_pipe_in_a_name_is_escaped_in_the_tables_only(tmp_path, two_rows, tiny_pairrm_dir, monkeypatch):
    # `--input "q|r.jsonl"`: the command and the model (outside the tables) showed `q\|r.jsonl` in their code spans
    monkeypatch.chdir(tmp_path)
    (tmp_path / "q|r.jsonl").write_bytes(two_rows.read_bytes())
    shutil.copytree(tiny_pairrm_dir, tmp_path / "m|1")
    argv = ["selfcheck", "--model", "m|1", "--device", "cpu", "--rows", "1", "--no-timing", "--input", "q|r.jsonl",
            "--report", "rep"]
    monkeypatch.setattr(sys, "argv", ["repro", *argv])
    assert cli.main(argv) == 0  # (INCOMPLETE: a stand-in)
    md = (tmp_path / "rep" / "selfcheck.md").read_text()
    spans = [c.content for t in MarkdownIt().enable("table").parse(md) if t.type == "inline" for c in t.children
             if c.type == "code_inline"]
    assert spans[:2] == ["repro " + shlex.join(argv), "local folder m|1"], spans  # (the command, the model)
    assert not any("\\" in span for span in spans), spans
    html = MarkdownIt().enable("table").render(md)  # the tables hold: a pipe in a cell is no cell's end
    assert "<tr>\n<td>weights of <code>local folder m|1</code></td>\n<td>local folder</td>\n</tr>" in html, html
    assert re.search(r"<td>llm-blender on <code>local folder m\|1</code>: max \|diff\| [^<]*</td>\n</tr>", html), html


def test_the_recorded_command_with_the_home_folder_as_tilde_runs_as_typed_in_a_shell(tmp_path, two_rows,
                                                                                         monkeypatch):
    # `--report '~/my run'`: the home folder written `~` inside the quotes, where a shell does not expand it (pasted, a
    # report in a folder named ~ under the current one)
    import subprocess

    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    report, rows = home / "my run é", home / "rows (2).jsonl"
    rows.parent.mkdir()
    rows.write_bytes(two_rows.read_bytes())
    argv = ["selfcheck", "--model", "builtin:tiny-pairrm", "--device", "cpu", "--rows", "1", "--no-timing",
            "--input", str(rows), "--report", str(report)]
    monkeypatch.setattr(sys, "argv", ["repro", *argv])
    assert cli.main(argv) == 0
    for text in ((report / "selfcheck.json").read_text(), (report / "selfcheck.md").read_text()):
        assert str(home) not in text
    command = json.loads((report / "selfcheck.json").read_text())["settings"]["command"]
    assert f"`{command}`" in (report / "selfcheck.md").read_text()
    typed = subprocess.run(["bash", "-c", f"printf '%s\\n' {command}"], env={**os.environ, "HOME": str(home)},
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert typed == ["repro", *argv]


def test_one_row_is_said_as_one_row(tmp_path, two_rows, capsys):
    # "1 rows from ...", "on 1 rows", "Speed on these 1 rows"
    assert cli.main(["selfcheck", "--model", "builtin:tiny-pairrm", "--device", "cpu", "--rows", "1", "--input",
                     str(two_rows), "--report", str(tmp_path)]) == 0
    out = capsys.readouterr()
    text = out.out + out.err + (tmp_path / "selfcheck.md").read_text()
    assert "on 1 row;" in text and "1 row from" in text and "Speed on this row (" in text
    assert not re.search(r"\b1 rows\b", text), text


def test_each_check_has_one_title_however_it_ends(tmp_path, two_rows, tiny_pairrm_dir, offline_report, monkeypatch):
    # a check was titled one way when it ran and another when it did not ("speed against llm-blender (batch sizes 1
    # and 8)" measured, "speed against llm-blender" not run; the run dtype's two checks three and four ways)
    import repro.cli.selfcheck as selfcheck
    from repro.scorers import load_scorer

    quiet = dict(device="cpu", input=two_rows, rows=1, report_dir=None, log=lambda line: None)
    other = build_tiny_pairrm(tmp_path / "other", seed=1, layout="transformers")
    reports = [run_selfcheck("repro-tests/not-cached", None, **quiet),  # --model not loaded: the rest not run
               run_selfcheck(str(tiny_pairrm_dir), str(other), timing=False, **quiet),  # other weights: failures
               run_selfcheck(str(tiny_pairrm_dir), "repro-tests/not-cached", **quiet)]  # no reference: no layouts
    resolve = selfcheck.resolve_dtype
    monkeypatch.setattr(selfcheck, "resolve_dtype", lambda d, device, **k: "bf16" if d == "auto" else
                        resolve(d, device, **k))
    reports.append(run_selfcheck("builtin:tiny-pairrm", None, timing=False, **quiet))  # the GPU path's run dtype
    checks = [(c.name, c.title, c.status) for r in reports for c in r.checks]
    checks += [(c["name"], c["title"], c["status"]) for c in offline_report.record["checks"]]
    card = selfcheck.card_example_check({"stand-in": load_scorer(tiny_pairrm_dir, device="cpu")})
    checks.append((card.name, card.title, card.status))
    titles = {name: {t for n, t, _ in checks if n == name} for name, _, _ in checks}
    assert {name: t for name, t in titles.items() if len(t) > 1} == {}
    ended = {name: {s for n, _, s in checks if n == name} for name in titles}  # the paths this test took
    assert {name: s for name, s in ended.items() if len(s) > 1} == {
        "load_model": {"pass", "not run"}, "load_reference": {"pass", "not run"}, "card_example": {"fail", "not run"},
        "layouts_fp32": {"fail", "not run"}, "engine_vs_llm_blender_fp32": {"pass", "fail", "not run"},
        "run_dtype_vs_fp32_choices": {"pass", "not run"}, "speed": {"measured", "not run"}}
    # the report's table, the terminal (which prints it) and selfcheck.json: one title each
    for c in offline_report.record["checks"]:
        assert f"| {c['title']} | " in offline_report.md and f"| {c['title']} | " in offline_report.stdout


def test_a_self_check_made_with_another_tokenizers_is_not_of_the_runs_versions(offline_report, tmp_path):
    # token ids decide the scores: a self-check from before a tokenizers upgrade said nothing of the run's numbers,
    # yet the card cited it as of the same versions (only repro, torch, transformers, llm-blender were compared)
    assert selfcheck_summary(offline_report.folder / "selfcheck.json")["same_versions_as_run"] is True
    record = json.loads(json.dumps(offline_report.record))
    record["environment"]["packages"]["tokenizers"] = "0.0.1"
    (tmp_path / "selfcheck.json").write_text(json.dumps(record))
    summary = selfcheck_summary(tmp_path / "selfcheck.json")
    assert summary["versions"]["tokenizers"] == "0.0.1" and summary["same_versions_as_run"] is False
