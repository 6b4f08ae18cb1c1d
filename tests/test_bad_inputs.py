"""Bad inputs, one table: each gets one clear paragraph naming the file, key or line and what to do.

Add a row for every bad input found. A row builds its inputs in `tmp_path` and returns either the argv of a
`repro` command (run in this process: a traceback would fail the test) or a call that must raise ReproError.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from repro.cli import main
from repro.errors import ReproError
from repro.analysis.report import analyze
from repro.card import gather_facts
from repro.compare import compare
from repro.parameters import AnalyzeParams, CardParams, CompareParams, ConstructParams, GenerationParams, build
from repro.construct import stages
from repro.construct.scorer_prompt import load_prompt_tokenizer
from repro.slicing import plan_slice
from repro.sources import load_source

ROOT = Path(__file__).resolve().parents[1]
CHAT_TEMPLATED = ["scorer_prompt=chat_template", "scorer_prompt_tokenizer=builtin:tiny-policy"]
DEMO = str(ROOT / "params" / "demo.yaml")
GOOD_ROW = {"prompt": "Name a prime number.", "candidates": ["Seven.", "Eight."]}
SCORED = {"prompt_id": "p0", "prompt": "Name a prime number.", "chosen": "Seven.", "rejected": "Eight.",
          "score_chosen": 1.0, "score_rejected": -1.0}


@dataclass
class Case:
    name: str
    make: Callable[[Path], list[str] | Callable[[], Any]]  # argv for `repro`, or a call that must raise
    match: str  # regex the message must contain
    code: int = 2  # exit status of a command
    after: Callable[[Path], None] | None = None  # what must (not) be on disk afterwards


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def jsonl(path: Path, rows: list) -> Path:
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


def score(tmp: Path, *extra: str, input: Path | None = None, output: Path | None = None) -> list[str]:
    src = input if input is not None else jsonl(tmp / "in.jsonl", [GOOD_ROW])
    return ["score", "--model", "builtin:tiny-pairrm", "--input", str(src),
            "--output", str(output if output is not None else tmp / "out.jsonl"), "--device", "cpu", *extra]


def run(tmp: Path, *extra: str, params: str = DEMO) -> list[str]:
    return ["run", params, "--out", str(tmp / "run"), *extra]


def candidates_of(tmp: Path, rows: list[dict]) -> Any:
    """01_construct's stages up to the candidates, on `rows` as the source."""
    p = ConstructParams(run_dir=str(tmp / "run"), source=str(jsonl(tmp / "src.jsonl", rows)),
                        candidate_columns=["resp0", "resp1"], scorer_model="builtin:tiny-pairrm", device="cpu")
    ctx = stages.begin(p)
    return stages.candidates(ctx, stages.slice_rows(ctx, stages.load(ctx)))


def generated_of(tmp: Path, rows: list[dict], **values: Any) -> Any:
    """01_construct's stages up to the generation (the stand-in policy, on the CPU), on `rows` as the source."""
    values = dict(run_dir=str(tmp / "run"), source=str(jsonl(tmp / "src.jsonl", rows)), generate=True,
                  candidate_columns=["resp0", "resp1"], scorer_model="builtin:tiny-pairrm", device="cpu",
                  policy_model="builtin:tiny-policy", generation_device="cpu", **values)
    p, generation = build(ConstructParams, values), build(GenerationParams, values)
    ctx = stages.begin(p, generation)
    return stages.generate(ctx, stages.slice_rows(ctx, stages.load(ctx)), generation)


def broken_jsonl(tmp: Path) -> Path:
    """A good row, a blank line, then a row cut short (line 3)."""
    return write(tmp / "bad.jsonl", json.dumps(GOOD_ROW) + "\n\n" + '{"prompt": "x", "candidates": ["a",\n')


def truncated_parquet(tmp: Path) -> Path:
    path = tmp / "rows.parquet"
    datasets.Dataset.from_list([{"prompt": f"p{i}" * 50, "resp0": "a", "resp1": "b"} for i in range(200)]).to_parquet(path)
    data = path.read_bytes()
    return write(path, data[: len(data) // 2])


def shards(folder: Path, *tables: list[dict] | bytes) -> Path:
    """A folder in the hub's layout: data/train_prefs-0000i-of-0000n.parquet, one per table (rows, or raw bytes)."""
    for i, table in enumerate(tables):
        path = write(folder / "data" / f"train_prefs-{i:05d}-of-{len(tables):05d}.parquet", b"")
        write(path, table) if isinstance(table, bytes) else pq.write_table(pa.Table.from_pylist(table), path)
    return folder


def nothing_written(tmp: Path) -> None:
    assert not (tmp / "run").exists() and not (tmp / "out.jsonl").exists()


def file_untouched(tmp: Path) -> None:
    assert (tmp / "taken").read_text() == "x"


def no_file_in(folder: str) -> Callable[[Path], None]:
    def check(tmp: Path) -> None:
        assert list((tmp / folder).iterdir()) == []  # neither output nor temp file
    return check


CASES = [
    # repro run: the run directory and the params file
    Case("run --out is a file", lambda t: ["run", DEMO, "--out", str(write(t / "taken", "x"))],
         r"--out \S*taken is an existing file, not a folder\..*give a new or existing folder", after=file_untouched),
    Case("run --out inside a file", lambda t: ["run", DEMO, "--out", str(write(t / "taken", "x") / "sub")],
         r"--out \S*taken/sub lies inside \S*taken, which is a file"),
    Case("params file is a folder", lambda t: run(t, params=str(write(t / "p" / "mine.yaml", "limit: 3\n").parent)),
         r"Params file '\S*p' is a folder, not a file; give a YAML file in it \['mine.yaml'\]", after=nothing_written),
    Case("params file missing", lambda t: run(t, params=str(t / "nope.yaml")),
         r"Params file '\S*nope.yaml' does not exist: looked at \S*nope.yaml. Give the path of a params YAML file", after=nothing_written),
    Case("params file is not YAML", lambda t: run(t, params=str(write(t / "p.yaml", "limit: [3\n"))),
         r"Params file \S*p.yaml is not valid YAML: ", after=nothing_written),
    Case("params file is a list", lambda t: run(t, params=str(write(t / "p.yaml", "- limit\n- 3\n"))),
         r"Params file \S*p.yaml must be a mapping of parameter names to values\.", after=nothing_written),
    Case("notebooks not a list", lambda t: run(t, "--set", "notebooks=01_construct"),
         r"--set notebooks=01_construct: notebooks must be a non-empty list of notebook names, got '01_construct': "
         r"give '--set notebooks=\[01_construct\]'\.", after=nothing_written),
    Case("notebooks not a list in a params file", lambda t: run(t, params=str(write(t / "p.yaml", "notebooks: 02_x\n"))),
         r"'notebooks' in \S*p.yaml must be a non-empty list of notebook names, got '02_x': give notebooks: \[02_x\]\.",
         after=nothing_written),
    Case("a notebook listed twice", lambda t: run(t, "--set", "notebooks=[01_construct, 02_analyze, 01_construct]"),
         r"--set notebooks=\[01_construct, 02_analyze, 01_construct\]: notebooks lists 01_construct twice: list each "
         r"notebook once", after=nothing_written),  # (--check passed; a run made it twice)
    Case("a grid value listed twice", lambda t: run(t, "--grid", "limit=5,5", "--check"),
         r"family.grid.limit in --grid lists 5 twice: give each value once", after=nothing_written),
    # repro run: parameters, all checked before any notebook runs
    Case("unknown key in --set", lambda t: run(t, "--set", "limit=3", "--set", "mini_idx=1"),
         r"Unknown parameter 'mini_idx' in --set mini_idx=1\. Did you mean 'mini_index'\?", after=nothing_written),
    Case("unknown keys in --set, all in one error", lambda t: run(t, "--set", "foo=1", "--set", "mini_idx=1"),
         r"Unknown parameter 'foo' in --set foo=1\. Unknown parameter 'mini_idx' in --set mini_idx=1\. Did you mean "
         r"'mini_index'\? Known parameters .*; remove or rename them\.", after=nothing_written),
    Case("unknown key in the file", lambda t: run(t, params=str(write(t / "p.yaml", "mini_idx: 1\n"))),
         r"Unknown parameter 'mini_idx' in \S*p.yaml\. Did you mean 'mini_index'\?", after=nothing_written),
    Case("unknown keys in a file, its include and --set, all in one error",  # (one source at a time)
         lambda t: write(t / "base.yaml", "foo: 1\n") and run(
             t, "--set", "qux=1", params=str(write(t / "p.yaml", "include: base.yaml\nbaz: 1\n"))),
         r"Unknown parameter 'baz' in \S*p.yaml\. Unknown parameter 'foo' in \S*base.yaml\. Unknown parameter 'qux' "
         r"in --set qux=1\. Known parameters .*; remove or rename them\.", after=nothing_written),
    Case("unknown grid keys, all in one error", lambda t: run(t, "--grid", "foo=1,2", "--grid", "bar=1,2", "--check"),
         r"family.grid.foo in --grid: 'foo' is not a parameter\. family.grid.bar in --grid: 'bar' is not a parameter\. "
         r"A grid key is a parameter, or a name of your own", after=nothing_written),
    Case("an unknown grid key and a bundle's unknown key, in one error",  # (the bundle's alone, no suggestion)
         lambda t: run(t, "--grid", "mini_indx=0,1", "--grid", "foo={part_strt: 0}", "--check"),
         r"family.grid.mini_indx in --grid: 'mini_indx' is not a parameter\. Did you mean 'mini_index'\? "
         r"family.grid.foo in --grid: 'part_strt' in \{'part_strt': 0\} is not a parameter a member can set\. Did you "
         r"mean 'part_start'\?", after=nothing_written),
    Case("a bundle's misspelt name", lambda t: run(t, "--grid", "foo={nme: a, part_start: 0}", "--check"),
         r"family.grid.foo in --grid: 'nme' in \{'nme': 'a', 'part_start': 0\} is not a parameter a member can set\. "
         r"Did you mean 'name'\?", after=nothing_written),
    Case("hub_repo_id not a repository id", lambda t: run(t, "--set", "hub_repo_id=a/b/c"),
         r"  - hub_repo_id \(from --set\): not a hub repository id: give owner/name \(letters, digits, -, _ and \., "
         r"neither starting nor ending with - or \., no -- or \.\., at most 96 characters\) \(got 'a/b/c'\)",
         after=nothing_written),
    # a name alone passed, and the card printed load_dataset("uf-demo", ...), which names nothing for anyone else
    Case("hub_repo_id without its owner", lambda t: run(t, "--set", "hub_repo_id=uf-demo"),
         r"  - hub_repo_id \(from --set\): names no owner: give owner/name \(your hub user or organisation, e\.g\. "
         r"your-name/uf-demo\): the card's load_dataset and the upload need it \(got 'uf-demo'\)",
         after=nothing_written),
    Case("hub_repo_id ending with a dot", lambda t: run(t, "--set", "hub_repo_id=owner/name."),
         r"  - hub_repo_id \(from --set\): not a hub repository id: .*neither starting nor ending with - or \.",
         after=nothing_written),
    Case("chunk_size 0", lambda t: run(t, params=str(write(t / "p.yaml", "chunk_size: 0\n"))),
         r"Invalid construct parameters in \S*p.yaml:\n  - chunk_size: must be >= 1 \(got 0\)\nFix the value",
         after=nothing_written),
    Case("batch_tokens 0 from --set", lambda t: run(t, "--set", "batch_tokens=0"),
         r"  - batch_tokens \(from --set\): must be >= 1 \(got 0\)\n", after=nothing_written),
    Case("limit 0", lambda t: run(t, "--set", "limit=0"), r"  - limit \(from --set\): must be >= 1", after=nothing_written),
    *[Case(f"an empty {key}", lambda t, key=key: run(t, "--set", f"{key}="),
           rf"  - {key} \(from --set\): must not be empty \(got ''\)", after=nothing_written)
      for key in ("source", "scorer_model")],  # before, an empty source read the project root as a dataset
    Case("negative chunk_size", lambda t: run(t, "--set", "chunk_size=-5"),
         r"  - chunk_size \(from --set\): must be >= 1 \(got -5\)\n", after=nothing_written),
    Case("a column named twice", lambda t: run(t, "--set", "candidate_columns=[resp0, resp0]"),
         r"candidate_columns \(from --set\): names \['resp0'\] more than once \(got \['resp0', 'resp0'\]\)"),
    Case("a misspelt notebook", lambda t: run(t, "--set", "notebooks=[01_construct, 02_analyse]"),
         r"Notebook '02_analyse' listed in 'notebooks' does not exist in \S*notebooks; known notebooks: "
         r"\['01_construct', '02_analyze', .*\]\. Did you mean '02_analyze'\?", after=nothing_written),
    Case("a misspelt notebook, --check", lambda t: run(t, "--check", "--set", "notebooks=[02_analyse]"),
         r"Notebook '02_analyse' listed in 'notebooks' does not exist .*Did you mean '02_analyze'\?",
         after=nothing_written),
    # a misspelt built-in stand-in: refused by the schema, not inside a notebook
    Case("scorer_model a misspelt built-in", lambda t: run(t, "--set", "scorer_model=builtin:tiny-pairm"),
         r"  - scorer_model \(from --set\): not a built-in stand-in\. Did you mean 'builtin:tiny-pairrm'\? The "
         r"built-ins are builtin:tiny-pairrm, builtin:tiny-reward-llama, builtin:tiny-reward-deberta \(got ",
         after=nothing_written),
    Case("policy_model a misspelt built-in",
         lambda t: run(t, "--set", "generate=true", "--set", "policy_model=builtin:tiny-polcy"),
         r"  - policy_model \(from --set\): not a built-in stand-in\. Did you mean 'builtin:tiny-policy'\?",
         after=nothing_written),
    Case("scorers[].model a built-in policy",
         lambda t: run(t, params=str(write(t / "p.yaml", "scorers: [{name: extra, model: builtin:tiny-policy}]\n"))),
         r"scorers\.0\.model: not a built-in stand-in\..* The built-ins are builtin:tiny-pairrm", after=nothing_written),
    # repro run: a recipe's parameters (issue 23)
    *[Case(f"recipe: {why}", lambda t, sets=sets: run(t, *[x for s in sets for x in ("--set", s)]), message,
           after=nothing_written) for why, sets, message in [
        ("unknown output_format", ["output_format=trl"],
         r"output_format \(from --set\): Input should be 'seed', 'sppo', 'snorkel', 'rlhflow' or 'selm'"),
        ("unknown selection rule", ["selection=max_min"], r"selection \(from --set\): Input should be 'best_worst', "),
        ("chat_template without a tokenizer", ["scorer_prompt=chat_template"],
         r"scorer_prompt is 'chat_template' but scorer_prompt_tokenizer is not set: name the tokenizer"),
        ("best_random without a seed", ["selection=best_random"],
         r"selection 'best_random' draws candidates at random: set selection_seed"),
        ("min_margin below 0", ["min_margin=-0.5"], r"min_margin \(from --set\): must be >= 0 \(got -0.5\)"),
        ("a format that publishes every candidate without them", ["output_format=sppo", "keep_all_candidates=false"],
         r"output_format 'sppo' publishes every candidate and its score: set keep_all_candidates: true"),
        ("candidate_seeds not one per candidate", ["generate=true", "policy_model=builtin:tiny-policy",
                                                   "candidate_seeds=[1, 2, 3]"],
         r"candidate_seeds has 3 seeds but n_candidates is 2: give one seed per candidate"),
        ("no candidate generated and nothing else ranked", ["generate=true", "policy_model=builtin:tiny-policy",
                                                           "n_candidates=0", "candidate_columns=[]"],
         r"generate is true, but 0 candidates would be ranked \(n_candidates=0; include_reference false, "
         r"include_original_pair false\): a pair needs two\. Set n_candidates: 2"),
        ("generated columns not the candidates", ["generate=true", "policy_model=builtin:tiny-policy",
                                                  "n_candidates=0", "include_original_pair=true"],
         r"the n_candidates=0 generated ones \(none\): set candidate_columns: \[\]"),
        ("test_rows without test_split", ["test_rows=500"],
         r"test_rows / test_seed are set but test_split is not: name the source split of the test prompts"),
        ("a test split of the source split without test_rows", ["test_split=train_prefs"],
         r"test_split 'train_prefs' is the source split, so the test rows are a sample .*set test_rows"),
        ("test_rows 0", ["test_split=test_prefs", "test_rows=0"], r"test_rows \(from --set\): must be >= 1 \(got 0\)"),
        ("the original pair scored only but not included", ["original_pair_position=first_scored_only"],
         r"original_pair_position 'first_scored_only' ranks the source's chosen/rejected .*set "
         r"include_original_pair: true"),
        # a reward model puts the prompt in its own chat template: SPPO's templated prompt would be templated twice
        *[(f"chat_template for a sequence classifier{why}", [*CHAT_TEMPLATED, *sets], message)
          for why, sets, message in [
            ("", ["scorer_model=builtin:tiny-reward-llama", "scorer_kind=sequence_classifier"],
             r"scorer_prompt is 'chat_template', but scorer_model 'builtin:tiny-reward-llama' is a sequence "
             r"classifier, which puts the prompt in its own chat template.*Set scorer_prompt: raw"),
            (" among scorers", ["keep_all_candidates=true", "scorers=[{name: rm, model: builtin:tiny-reward-llama, "
                                                             "kind: sequence_classifier}]"],
             r"scorer_prompt is 'chat_template', but scorers entry 'rm' \('builtin:tiny-reward-llama'\) is a sequence "
             r"classifier.*Set scorer_prompt: raw"),
        ]],
    ]],
    # with scorer_kind auto, the kind read where 01_construct begins (before the run directory is made)
    *[Case(f"chat_template for a sequence classifier of kind auto{why}", lambda t, values=values: lambda: stages.begin(
        ConstructParams(run_dir=str(t / "run"), device="cpu", scorer_prompt="chat_template",
                        scorer_prompt_tokenizer="builtin:tiny-policy", **values)), message, after=nothing_written)
      for why, values, message in [
        ("", {"scorer_model": "builtin:tiny-reward-llama"},
         r"scorer_prompt is 'chat_template', but scorer_model 'builtin:tiny-reward-llama' is a sequence classifier.*"
         r"Set scorer_prompt: raw \(a sequence classifier applies its own chat template"),
        (" among scorers",
         {"keep_all_candidates": True, "scorers": [{"name": "rm", "model": "builtin:tiny-reward-llama"}]},
         r"but scorers entry 'rm' \('builtin:tiny-reward-llama'\) is a sequence classifier.*Set scorer_prompt: raw"),
      ]],
    # RLHFlow's prompt sets hold the conversation (gen_hf.py's `context_messages`), not a `prompt` text
    *[Case(f"a source with {column} but no prompt", lambda t, column=column: lambda: stages.load(stages.begin(
        ConstructParams(run_dir=str(t / "run"), device="cpu", scorer_model="builtin:tiny-pairrm", source=str(jsonl(
            t / "src.jsonl", [{column: [{"role": "user", "content": "Hi?"}], "resp0": "a", "resp1": "b"}]))))),
         rf"lacks column \['prompt'\]; it has \[.*\]\. Write the user turn of its `{column}` to a `prompt` "
         r"column first") for column in ("context_messages", "messages")],
    Case("params: include of a missing file", lambda t: run(t, params=str(write(t / "p.yaml", "include: base.yml\n"))),
         r"'include: base.yml' in \S*p.yaml: \S*base.yml does not exist; give the path of a params file \(a relative "
         r"one is read from /\S*\)\.$", after=nothing_written),
    Case("params: include of a missing file in the home folder",
         lambda t: run(t, params=str(write(t / "p.yaml", "include: ~/repro-tests-absent.yml\n"))),
         r"'include: ~/repro-tests-absent.yml' in \S*p.yaml: /\S*/repro-tests-absent.yml does not exist; give the path "
         r"of a params file\.$", after=nothing_written),
    Case("params: include of a folder", lambda t: run(t, params=str(write(t / "p.yaml", "include: recipes\n"))) if (
        t / "recipes").mkdir() is None else 0,
         r"'include: recipes' in \S*p.yaml: \S*recipes is a folder; give the path of a params file", after=nothing_written),
    Case("params: an include cycle", lambda t: run(t, params=str(write(t / "p.yaml", "include: p.yaml\n"))),
         r"'include: p.yaml' in \S*p.yaml makes a cycle .*remove one of these includes", after=nothing_written),
    # a notebook run on its own (papermill, JupyterLab) on an input that is missing or not one: no run folder made
    *[Case(f"{notebook} on its own, {why}", lambda t, call=call, make=make: lambda: call(t, make(t)), message,
           after=nothing_written) for notebook, call in [
        ("02_analyze", lambda t, spec: analyze(AnalyzeParams(run_dir=str(t / "run"), dataset=spec))),
        ("03_card", lambda t, spec: gather_facts(CardParams(run_dir=str(t / "run"), card_dataset=spec))),
        ("04_compare", lambda t, spec: compare(CompareParams(run_dir=str(t / "run"), reference=spec,
                                                             candidate=str(jsonl(t / "c.jsonl", [SCORED]))))),
      ] for why, make, message in [
        ("a typo'd file", lambda t: str(t / "mnie.jsonl"), r" '\S*mnie.jsonl' is neither an existing file or folder"),
        ("not a preference dataset", lambda t: str(jsonl(t / "other.jsonl", [{"chosen_score": 1.0}])),
         r"lacks columns \['score_chosen', 'score_rejected'\]|neither a prompt_id nor a prompt column"),
      ] if not (notebook == "03_card" and why == "not a preference dataset")],  # (any dataset has a card)
    # scores too large for float64's arithmetic (±1e300, 1e200): every score finite, yet the density curve failed in
    # scipy ("array must not contain infs or NaNs") and the variance overflowed (Cohen's d_z 0.0, the t-test's p 1.0)
    *[Case(f"02_analyze, scores as large as {size:g}", lambda t, size=size: lambda: analyze(AnalyzeParams(
        run_dir=str(t / "run"), dataset=str(jsonl(t / "huge.jsonl", [
            dict(SCORED, prompt_id=f"p{i}", score_chosen=size * i, score_rejected=-2 * size * i) for i in range(5)])))),
        rf"'\S*huge.jsonl': score_rejected holds {-8 * size:g} "
        rf"at row 4 \(from 0; prompt_id p4\)".replace("+", r"\+")
        + r", too large for the statistics: .*Rescale the scores: divide score_chosen and "
        rf"score_rejected by one factor, such as {size:.0e}".replace("+", r"\+")) for size in (1e300, 1e200, 1e80)],
    Case("recipe: a prompt tokenizer folder without a tokenizer", lambda t: lambda: load_prompt_tokenizer(str(t)),
         r"scorer_prompt_tokenizer=\S+ could not be loaded .*Give a local tokenizer folder"),
    # (a tokenizer without a chat template: tests/test_recipes.py builds one)
    Case("recipe: a slice larger than the prompt shard",
         lambda t: lambda: plan_slice(200, ConstructParams(part_start=15283, part_stop=30566)),
         r"The slice part_start=15283, part_stop=30566 lies outside the source, which has 200 rows"),
    Case("recipe: a revision for a local source", lambda t: lambda: load_source("demo", "train_prefs", revision="abc"),
         r"source_revision='abc' pins a hub commit, but source='demo' is not a hub id .* set source_revision: null"),
    # the source loader itself
    Case("jsonl source with a broken line",
         lambda t: lambda: load_source(str(broken_jsonl(t))), r"line 3 of source '\S*bad.jsonl' is not valid JSON"),
    # a file saved as latin-1 / cp1252: datasets took its bytes, and a later cell failed on a bare UnicodeDecodeError
    Case("jsonl source that is not UTF-8", lambda t: lambda: load_source(str(write(
        t / "latin1.jsonl", (json.dumps(GOOD_ROW) + "\n").encode() + '{"prompt": "café"}\n'.encode("latin-1")))),
         r"line 2 of source '\S*latin1.jsonl' is not UTF-8 text \(byte 0xe9 at column 16\): save the file as UTF-8"),
    Case("jsonl source named .gz but not compressed", lambda t: lambda: load_source(str(jsonl(t / "r.jsonl.gz",
                                                                                              [GOOD_ROW]))),
         r"source '\S*r.jsonl.gz' is not gzip-compressed, though its name ends in \.gz: rename it"),
    Case("jsonl source with a line that is not an object", lambda t: lambda: load_source(str(write(
        t / "list.jsonl", json.dumps(GOOD_ROW) + '\n["not", "an", "object"]\n'))),
         r"line 2 of source '\S*list.jsonl' is a JSON list; each line must be one JSON object"),
    Case("truncated parquet source", lambda t: lambda: load_source(str(truncated_parquet(t))),
         r"source '\S*rows.parquet' could not be read as parquet .*truncated or damaged\. Write it again"),
    Case("empty jsonl source", lambda t: lambda: load_source(str(write(t / "e.jsonl", ""))), r"is an empty file"),
    # datasets' "Instruction "train" corresponds to no data!"; and a split named, though a file has none
    Case("jsonl source of blank lines", lambda t: lambda: load_source(str(write(t / "blank.jsonl", "\n  \n\n"))),
         r"^source '\S*blank\.jsonl' holds no rows: give a file that has rows"),
    Case("parquet source with no rows", lambda t: lambda: stages.load(stages.begin(ConstructParams(
        run_dir=str(t / "run"), scorer_model="builtin:tiny-pairrm", device="cpu", candidate_columns=["resp0", "resp1"],
        source=str(pq.write_table(pa.table({c: pa.array([], pa.string()) for c in ("prompt", "resp0", "resp1")}),
                                  t / "zero.parquet") or t / "zero.parquet")))),
         r"^source '\S*zero\.parquet' holds no rows: give a file that has rows"),
    # a hub-layout folder: a bare DatasetGenerationError ("An error occurred while generating the dataset")
    Case("hub-layout shards with different columns", lambda t: lambda: load_source(str(shards(
        t / "hub", [{"prompt": "p", "resp0": "a", "resp1": "b"}], [{"prompt": "q", "resp0": "a", "resp1": "b",
                                                                   "resp2": "c"}]))),
         r"source '\S*hub': the 2 shards of split 'train_prefs' \(data/train_prefs-00000-of-00002\.parquet, "
         r"data/train_prefs-00001-of-00002\.parquet\) could not be read as one dataset \(their columns differ: "
         r"data/train_prefs-00001-of-00002\.parquet has prompt, resp0, resp1, resp2; "
         r"data/train_prefs-00000-of-00002\.parquet has prompt, resp0, resp1\)\. Every shard of a split must have "
         r"the same columns and types, and be whole: write the split again \(e\.g\. Dataset\.to_parquet\), or "
         r"download it again\."),
    Case("hub-layout folder with a damaged shard", lambda t: lambda: load_source(str(shards(
        t / "hub", [{"prompt": "p", "resp0": "a", "resp1": "b"}], b"PAR1 not parquet"))),
         r"source '\S*hub': the 2 shards of split 'train_prefs' \(.*\) could not be read as one dataset "
         r"\(data/train_prefs-00001-of-00002\.parquet: ArrowInvalid: .*\)\. Every shard of a split"),
    # "1.5" beside 2.5: datasets casts every shard to the first one's types, numbers into text or text into numbers
    Case("hub-layout shards with a column of text in one and numbers in another", lambda t: lambda: load_source(str(
        shards(t / "hub", [{"prompt": "p", "score_chosen": 2.5}], [{"prompt": "q", "score_chosen": "1.5"}]))),
         r"source '\S*hub': the 2 shards .* could not be read as one dataset \(column 'score_chosen' holds string in "
         r"data/train_prefs-00001-of-00002\.parquet and double in data/train_prefs-00000-of-00002\.parquet, which "
         r"datasets would cast to double without a word\)\. Every shard of a split must have the same columns"),
    # numbers into text too, in a column the run may never read: "3" is not 3
    Case("hub-layout shards with a column of text in one and integers in another", lambda t: lambda: load_source(str(
        shards(t / "hub", [{"prompt": "p", "category": "math"}], [{"prompt": "q", "category": 3}]))),
         r"could not be read as one dataset \(column 'category' holds int64 in data/train_prefs-00001-of-00002\.parquet "
         r"and string in data/train_prefs-00000-of-00002\.parquet, which datasets would cast to string"),
    # (integers, then fractions: they load as float64, tests/test_sources.py)
    # every row's candidates one text: all dropped, nothing to score (a figure failed with a TypeError on no data)
    Case("no row left with two distinct candidates", lambda t: lambda: candidates_of(t, [
        {"prompt": f"Question {i}?", "resp0": "Same.", "resp1": "Same."} for i in range(3)]),
         r"No row is left to score: 3 of 3 rows have fewer than two distinct candidates in candidate_columns "
         r"\['resp0', 'resp1'\] \(equal texts count once\)\. Check candidate_columns against the source's columns"),
    # a prompt that is no text, in a source without prompt_id (an RLHFlow-format run's conversation list), had no
    # prompt_id: the rows' "None" was a duplicate prompt_id, and keep_first then gave the prompt's own error
    *[Case(f"prompts {kind}, no prompt_id", lambda t, prompt=prompt: lambda: candidates_of(t, [
        {"prompt": prompt, "resp0": "Seven.", "resp1": "Eight."} for _ in range(2)]),
        rf"source row 0 \(from 0\) has {expected}\. Every row needs its prompt, a non-empty text, in the 'prompt' "
        r"column: fix or remove that row in the source\.$")
      for kind, prompt, expected in (("a conversation", [{"content": "Name a prime.", "role": "user"}],
                                      r"a 'prompt' of type list \(\[\{.*\}\]\), not a text"),
                                     ("empty", " ", r"an empty 'prompt' \(' '\)"))],
    # the generation named a bad prompt by its place among the rows it was given (the slice's), "Row 1 (counted from
    # 0 in the rows given to generation)": the source row, as the candidates' check names it
    Case("an empty prompt in a sliced source, generate on", lambda t: lambda: generated_of(t, [
        {"prompt": f"Question {i}?", "prompt_id": f"q{i}"} for i in range(3)] + [{"prompt": "", "prompt_id": "q3"}],
        part_start=2), r"^source row 3 \(from 0; prompt_id q3\) has an empty 'prompt' \(''\)\. Every row needs"),
    # include_reference without generate_reference ranks the source's own reference_response: a source without one
    # lost it silently after the generation, and the card said it was ranked
    Case("include_reference, generate_reference false, a source without reference_response",
         lambda t: lambda: generated_of(t, [{"prompt": "Name a prime number."}], include_reference=True,
                                        generate_reference=False),
         r"source '\S*src.jsonl' lacks column \['reference_response'\]; it has \['prompt'\]\. include_reference "
         r"ranks the source's reference_response when generate_reference is false: set include_reference: false, "
         r"or generate_reference: true, or use a source with reference responses\.",
         after=lambda t: not (t / "run" / "work" / "generation").exists() or pytest.fail("generated")),
    # repro score: output and input checked before the model is loaded
    Case("score --output is a folder", lambda t: score(t, output=(t / "outdir").mkdir() or t / "outdir"),
         r"--output \S*outdir is a folder; give a file path for the scored rows, e.g\. --output \S*outdir/scored.jsonl",
         after=no_file_in("outdir")),
    Case("score --output a new folder/", lambda t: [*score(t)[:6], f"{t / 'newdir'}/", *score(t)[7:]],
         r"--output \S*newdir/ names a folder; give a file path for the scored rows, e.g\. "
         r"--output \S*newdir/scored.jsonl",
         after=lambda t: not (t / "newdir").exists() or pytest.fail("a file named newdir was written")),
    *[Case(f"score --output {suffix}", lambda t, suffix=suffix: score(t, output=t / f"out{suffix}"),
           rf"--output \S*out{re.escape(suffix)} names another format \({re.escape('.' + suffix.split('.')[-1])}\), but "
           r"repro score writes JSON lines: "
           r"name the output \.jsonl, e\.g\. --output \S*out\.jsonl",
           after=lambda t, suffix=suffix: not (t / f"out{suffix}").exists() or pytest.fail("written"))
      for suffix in (".parquet", ".csv", ".arrow", ".Parquet", ".jsonl.gz", ".json", ".txt",
                     ".json.gz")],  # .json: JSON lines in it; .json.gz: out.jsonl (it said out.json.jsonl)
    Case("score --output of two dots", lambda t: score(t, output=t / "out.v1.json"),  # (it said out.jsonl)
         r"name the output \.jsonl, e\.g\. --output \S*/out\.v1\.jsonl\.$"),
    *[Case(f"score --output {name}", lambda t, name=name: score(t, output=t / name),  # (it said out.jsonl, out..jsonl)
           rf"--output \S*/{re.escape(name)} has no \.jsonl suffix, but repro score writes JSON lines: name the output "
           rf"\.jsonl, e\.g\. --output \S*/{re.escape(want)}\.$")
      for name, want in (("out.v1", "out.v1.jsonl"), ("out.", "out.jsonl"), ("out.jsonl.v2", "out.jsonl.v2.jsonl"),
                       ("out.jsonl.", "out.jsonl"))],  # (it said out.jsonl.jsonl)
    # a suggested --output is quoted for a shell: it said "e.g. --output data dir/x ü.jsonl"
    Case("score --output of another format, in a folder with a space",
         lambda t: score(t, output=t / "data dir" / "x ü.parquet"),
         r"name the output \.jsonl, e\.g\. --output '\S*/data dir/x ü\.jsonl'\.$"),
    Case("score --output is a folder with a space", lambda t: score(t, output=(t / "out dir").mkdir() or t / "out dir"),
         r"--output \S*/out dir is a folder; give a file path for the scored rows, e\.g\. --output "
         r"'\S*/out dir/scored\.jsonl'\.$"),
    Case("score --output .jsonl, no name", lambda t: score(t, output=t / ".jsonl"),  # (it said .jsonl.jsonl)
         r"--output \S*/\.jsonl names no file, only a suffix: give the output a name, e\.g\. --output "
         r"\S*/scored\.jsonl\.$"),
    Case("score --output without a suffix", lambda t: score(t, output=t / "out"),
         r"--output \S*out has no \.jsonl suffix, but repro score writes JSON lines: name the output \.jsonl, e\.g\. "
         r"--output \S*out\.jsonl", after=lambda t: not (t / "out").exists() or pytest.fail("written")),
    Case("score --output inside a file", lambda t: score(t, output=write(t / "f", "x") / "out.jsonl"),
         r"--output's folder \S*/f is an existing file, not a folder"),
    Case("score --output is the input", lambda t: score(t, "--force", output=t / "in.jsonl"),
         r"--output \S*in.jsonl is the --input: the scored rows would replace the rows they score",
         after=lambda t: json.loads((t / "in.jsonl").read_text()) == GOOD_ROW or pytest.fail("input changed")),
    Case("score --output exists", lambda t: score(t, output=write(t / "old.jsonl", "kept\n")),
         r"--output \S*old.jsonl exists: give another --output, or pass --force to replace it\.",
         after=lambda t: (t / "old.jsonl").read_text() == "kept\n" or pytest.fail("output replaced")),
    Case("score an empty input", lambda t: score(t, input=write(t / "empty.jsonl", "\n\n")),
         r"--input \S*empty.jsonl holds no rows .*nothing to score\. Give a file \(jsonl, or parquet\)", after=nothing_written),
    Case("score a missing input", lambda t: score(t, input=t / "nope.jsonl"),
         r"--input \S*nope.jsonl does not exist; check the path .*give an existing jsonl file", after=nothing_written),
    Case("score an input that is a folder", lambda t: score(t, input=t),
         r"--input \S+ is a folder \(it holds no data file\); give the path of one jsonl or parquet file", after=nothing_written),
    Case("score a folder of two splits", lambda t: score(t, input=[pq.write_table(pa.Table.from_pylist([GOOD_ROW]), write(
        t / "ds" / "data" / f"{split}-00000-of-00001.parquet", b"")) for split in ("train", "test")] and t / "ds"),
         r"--input \S*ds is a folder \(its data files: data/test-00000-of-00001.parquet, "
         r"data/train-00000-of-00001.parquet\); give the path of one jsonl or parquet file", after=nothing_written),
    Case("score a saved DatasetDict of two splits", lambda t: score(t, input=[  # (its progress bars not in stderr)
        datasets.disable_progress_bars(), datasets.DatasetDict({s: datasets.Dataset.from_list([GOOD_ROW]) for s in (
            "train", "test")}).save_to_disk(t / "dd"), datasets.enable_progress_bars()] and t / "dd"),
         r"--input \S*dd holds splits (train, test|test, train): give one of their folders, e\.g\. --input \S*dd/\w+\.",
         after=nothing_written),
    Case("score a folder of rows.json", lambda t: score(t, input=[write(t / "js" / "rows.json", "{}\n"), write(
        t / "js" / "work" / "scoring" / "chunk-000000.json", "{}"), write(t / "js" / "stray.txt", "")] and t / "js"),
         r"--input \S*js is a folder \(its data files: rows\.json\)", after=nothing_written),
    # it said the folder "does not exist"
    Case("selfcheck --input a folder", lambda t: ["selfcheck", "--model", "builtin:tiny-pairrm", "--input", str(t)],
         r"--input \S+ is a folder \(it holds no data file\); give the path of one jsonl or parquet file"),
    # (--batch-tokens 0, --chunk-size 0: argparse refuses them, test_score_cmd.py's options test)
    Case("score --chat-template missing", lambda t: score(t, "--chat-template", str(t / "nope.jinja")),
         r"--chat-template \S*nope.jinja does not exist \(a Jinja template file\)\.", after=nothing_written),
    Case("score --chat-template empty", lambda t: score(t, "--chat-template", str(write(t / "e.jinja", " \n"))),
         r"--chat-template \S*e.jinja is empty: .*Jinja template", after=nothing_written),
    Case("score --chat-template a folder", lambda t: score(t, "--chat-template", str(t)),
         r"--chat-template \S+ is a folder; give the path of the Jinja template file", after=nothing_written),
    Case("score a PairRM stand-in as a sequence classifier", lambda t: score(t, "--kind", "sequence_classifier"),
         r"kind='sequence_classifier' \(scorer_kind, or --kind on the command line\) does not match 'builtin:tiny-pairrm': it "
         r"is a PairRM stand-in\. Set the kind to 'auto' or 'pairrm'\.", after=nothing_written),
    Case("score PairRM limits for a sequence classifier",
         lambda t: score(t, "--source-maxlength", "64")[:2] + ["builtin:tiny-reward-llama"]
         + score(t, "--source-maxlength", "64")[3:],
         r"--source-maxlength / --candidate-maxlength are PairRM's limits; a sequence classifier takes its own "
         r"\(--max-length\)", after=nothing_written),
    Case("score --max-length for PairRM", lambda t: score(t, "--max-length", "64"),
         r"--max-length is a sequence classifier's limit; PairRM takes --source-maxlength / --candidate-maxlength",
         after=nothing_written),
    # repro score: bad lines, each named by its line number
    *[Case(f"score line: {why}", lambda t, line=line: score(t, input=write(t / "in.jsonl", json.dumps(GOOD_ROW) + "\n" + line + "\n")),
           message, after=nothing_written) for why, line, message in [
        ("one candidate", '{"prompt": "p", "candidates": ["only one"]}', r"line 2 of .*at least two strings"),
        ("no prompt", '{"candidates": ["a", "b"]}', r"line 2 of .*'prompt' is missing; expected a string"),
        ("a null prompt", '{"prompt": null, "candidates": ["a", "b"]}', r"line 2 of .*'prompt' is null; expected a"),
        ("a null candidate", '{"prompt": "p", "candidates": ["a", null]}', r"line 2 of .*at least two strings"),
        ("a list, not an object", '["p", ["a", "b"]]', r"line 2 of .*JSON list; expected an object"),
        ("chosen without rejected", '{"prompt": "p", "chosen": "a"}',
         r"line 2 of \S*: 'rejected' is missing; an H4 row gives both 'chosen' and 'rejected'"),
        ("broken JSON", '{"prompt": "p", "candidates": ', r"line 2 of \S*in.jsonl is not valid JSON .*fix or remove that line"),
    ]],
    Case("score a parquet row without a prompt", lambda t: score(t, input=pq.write_table(pa.Table.from_pylist(
        [GOOD_ROW, {"prompt": None, "candidates": ["a", "b"]}]), t / "in.parquet") or t / "in.parquet"),
         r"row 2 of \S*in.parquet: 'prompt' is null; expected a string\.", after=nothing_written),
    # they said what was wrong, not what repro score reads
    Case("score a csv input", lambda t: score(t, input=write(t / "rows.csv", "prompt,candidates\na,\"['x', 'y']\"\n")),
         r"--input \S*rows.csv is a \.csv file; rows are read from jsonl \(one JSON object per line\) or parquet",
         after=nothing_written),
    Case("score a JSON array file", lambda t: score(t, input=write(t / "rows.json", json.dumps([GOOD_ROW, GOOD_ROW]))),
         r"line 1 of \S*rows.json is a JSON list; expected an object with 'prompt' and 'candidates'\. jsonl is one "
         r"JSON object per line \(not a JSON array of them\); rows are read from jsonl or parquet",
         after=nothing_written),
    Case("score a parquet without candidates", lambda t: score(t, input=pq.write_table(pa.Table.from_pylist(
        [{"prompt": "p", "cands": ["a", "b"]}]), t / "in.parquet") or t / "in.parquet"),
         r"row 1 of \S*in.parquet: 'candidates' is missing \(the row's fields: 'prompt', 'cands'\); give "
         r"'candidates'", after=nothing_written),
    Case("score a damaged parquet input", lambda t: score(t, input=write(t / "in.parquet", b"PAR1 not parquet")),
         r"--input \S*in.parquet could not be read as parquet .*truncated or damaged", after=nothing_written),
    Case("score an input that is not UTF-8", lambda t: score(t, input=write(t / "in.jsonl", b'{"prompt": "\xff"}\n')),
         r"line 1 of \S*in.jsonl is not UTF-8 text \(byte 0xff at column 13\)", after=nothing_written),
    # families (repro.family) and the row cache (repro.cache): refused before any member runs
    Case("family grid over an unknown parameter", lambda t: run(t, "--grid", "mini_idx=0,1"),
         # the key came from --grid, not from the params file: the message says so
         r"family\.grid\.mini_idx in --grid: 'mini_idx' is not a parameter\. Did you mean 'mini_index'\?",
         after=nothing_written),
    Case("family grid with an empty list",
         lambda t: run(t, params=str(write(t / "f.yaml", "family: {grid: {mini_index: []}}\n"))),
         r"family\.grid\.mini_index in \S*f\.yaml must be a non-empty list", after=nothing_written),
    Case("family grid values not a YAML list", lambda t: run(t, "--grid", "mini_index=0,[1"),
         r"--grid mini_index=0,\[1: the values are not a YAML list", after=nothing_written),
    Case("family not a mapping", lambda t: run(t, params=str(write(t / "f.yaml", "family: [0, 1]\n"))),
         r"family in \S*f\.yaml must be a mapping with \[", after=nothing_written),
    Case("family with an unknown key", lambda t: run(t, params=str(write(t / "f.yaml", "family: {gird: {}}\n"))),
         r"family in \S*f\.yaml has unknown key \['gird'\]; it takes \[", after=nothing_written),
    # a member named ".." ran into the folder above the family's; "." into the family's own folder
    Case("member_name ..", lambda t: run(t, params=str(write(t / "f.yaml", "mini_count: 2\nfamily: {grid: {mini_index: "
                                                                           "[0]}, member_name: '..'}\n"))),
         r"family\.member_name '\.\.' in \S*f\.yaml names a member '\.\.' \(\{'mini_index': 0\}\): a member's run goes "
         r"into a folder of its own in the family's folder, not into that folder or the one above it\. Give it another "
         r"name\.", after=nothing_written),
    Case("member_name figures", lambda t: run(t, "--grid", "foo={name: figures, mini_index: 0}", "--set",
                                              "mini_count=2", "--check"),
         r"a bundle's name in \S+ names a member 'figures' .*and figures is a name a run directory keeps for its own "
         r"files \(the family's folder is one, 05_family's\)\. Give it another name\.", after=nothing_written),
    Case("family grid not a mapping", lambda t: run(t, params=str(write(t / "f.yaml", "family: {grid: [0, 1]}\n"))),
         r"family\.grid in \S*f\.yaml must map parameters to lists of values", after=nothing_written),
    Case("family jobs 0", lambda t: run(t, params=str(write(t / "f.yaml", "mini_count: 2\n"
                                                               "family: {grid: {mini_index: [0, 1]}, jobs: 0}\n"))),
         r"family\.jobs in \S*f\.yaml must be a whole number >= 1, got 0\.", after=nothing_written),
    Case("family name with a slash", lambda t: run(t, params=str(write(t / "f.yaml", "mini_count: 2\n"
                                                                       "family: {grid: {mini_index: [0, 1]}, "
                                                                       "name: a/b}\n"))),
         r"family\.name 'a/b' in \S*f\.yaml names a folder: use letters, digits", after=nothing_written),
    Case("--jobs 0", lambda t: run(t, "--grid", "mini_index=0,1", "--set", "mini_count=2", "--jobs", "0"),
         r"--jobs 0 must be >= 1 \(members run at once\)\.", after=nothing_written),
    Case("--jobs 0 on a file of no family", lambda t: run(t, "--jobs", "0", "--check"),  # it ran, where 2 was refused
         r"--jobs 0 must be >= 1 \(members run at once\)\.", after=nothing_written),
    Case("family grid over run_dir", lambda t: run(t, "--grid", "run_dir=a,b"), r"run_dir cannot vary within a family",
         after=nothing_written),
    Case("two members with the same name",
         lambda t: run(t, params=str(write(t / "f.yaml", "mini_count: 2\nfamily: {grid: {mini_index: [0, 1]}, "
                                                         "member_name: mini}\n"))),
         r"both named 'mini' \(\{'mini_index': 0\} and \{'mini_index': 1\}\).*family\.member_name",
         after=nothing_written),
    Case("a member that cannot run", lambda t: run(t, "--grid", "mini_index=0,4", "--set", "mini_count=4"),
         r"member 'mini_index-4' of family 'demo'.*mini_index=4 must be < mini_count=4", after=nothing_written),
    # a bundle's key won over a plain grid key unsaid: two members, one mini_index, one fingerprint
    Case("a parameter set by two grid keys",
         lambda t: run(t, params=str(write(t / "f.yaml", "family: {grid: {mini_index: [0, 1], part: [{name: p, "
                                                         "mini_index: 3, mini_count: 4}]}}\n"))),
         r"family\.grid in \S*f\.yaml: mini_index is set by both grid keys mini_index and part: each member would "
         r"take part's value; set it in one", after=nothing_written),
    Case("a --grid key a bundle of the file's grid sets too",
         lambda t: run(t, "--grid", "mini_index=0,1", params=str(write(
             t / "f.yaml", "family: {grid: {part: [{name: p, mini_index: 3, mini_count: 4}]}}\n"))),
         r"family\.grid in \S*f\.yaml and --grid: mini_index is set by both grid keys part and mini_index",
         after=nothing_written),
    Case("two bundles alike but for their name",
         lambda t: run(t, params=str(write(t / "f.yaml", "family: {grid: {part: [{name: a, limit: 3}, "
                                                         "{name: b, limit: 3}]}}\n"))),
         r"family\.grid\.part in \S*f\.yaml lists \{'limit': 3\} twice \(their names aside\): give each value once",
         after=nothing_written),
    # written as bundles, the mappings are scorer_options' values: the error offered 'name' for `name`
    Case("a grid value of a parameter that takes a mapping, named as a bundle",
         lambda t: run(t, params=str(write(t / "f.yaml", "family: {grid: {scorer_options: [{name: short, "
                                                         "candidate_maxlength: 64}, {name: long}]}}\n"))),
         r"family\.grid\.scorer_options in \S*f\.yaml: \{'name': 'short', 'candidate_maxlength': 64\} holds 'name': "
         r"a mapping there is the value of scorer_options, not a bundle"
         r".*members are named .*family\.member_name",
         after=nothing_written),
    Case("a falsy grid value listed twice", lambda t: run(t, "--grid", "mini_index=0,0", "--check"),
         r"family\.grid\.mini_index in --grid lists 0 twice: give each value once", after=nothing_written),
    Case("a grid over a key no member's notebook reads",
         lambda t: run(t, "--set", "notebooks=[01_construct, 02_analyze]", "--grid", "reference=a.jsonl,b.jsonl",
                       "--check"),
         r"family\.grid\.reference in --grid does not tell members \S+ and \S+ apart, they would be the same run: "
         r"reference is read by 04_compare, which the members do not run \(notebooks: 01_construct, 02_analyze\)",
         after=nothing_written),
    Case("include in a grid", lambda t: run(t, "--grid", "include=a.yaml,b.yaml"),
         r"family\.grid\.include in --grid: include cannot vary within a family \(a params file's includes are read "
         r"once, before the grid: vary the parameters they set\)", after=nothing_written),
    Case("--grid without --out on a file of no family", lambda t: ["run", DEMO, "--grid", "mini_index=0,1", "--set",
                                                                   "mini_count=2", "--check"],
         r"--grid on \S*demo\.yaml, which declares no family: its members would go into \S*runs/demo, its run's "
         r"folder; give the family its own --out DIR"),
    Case("a wrong type in --grid", lambda t: run(t, "--grid", "mini_index=a,b"),
         r"mini_index: Input should be a valid integer.*\nFix the value in the family's grid \(family\.grid in the "
         r"params file, or --grid\)", after=nothing_written),
    Case("--member not in the family",
         lambda t: run(t, "--grid", "mini_index=0,1", "--set", "mini_count=2", "--member", "mini_index-7"),
         r"--member 'mini_index-7' is not a member of family 'demo'; its members are mini_index-0, mini_index-1 \(or their index, 0 to 1\)\.",
         after=nothing_written),
    # a file where a member's folder goes: a NotADirectoryError in the member's check, a traceback
    Case("a file where a member's folder goes",
         lambda t: run(t, "--grid", "mini_index=0,1", "--set", "mini_count=2") if write(t / "run" / "mini_index-0",
                                                                                      "x") else 0,
         r"REFUSED  run directory \(member mini_index-0\): \S*run/mini_index-0 is an existing file, not a folder: "
         r"a member's run goes into its own folder there\. Move what is in the way, or give the family another --out",
         after=lambda t: (t / "run" / "mini_index-0").read_text() == "x" and not (t / "run" / "mini_index-1").exists()
         or pytest.fail("written")),
    Case("--member without a family", lambda t: run(t, "--member", "x"), r"declares none: add family",
         after=nothing_written),
    Case("a row cache of another key format",
         lambda t: run(t, "--set", "cache_dir=" + str(write(t / "cache" / "cache-format.json", '{"key_format": 99}').parent)),
         r"row cache \S*cache was written with key format 99; this version of repro reads and writes key format 1\. "
         r"Nothing in it was changed", after=nothing_written),
    Case("a params key YAML reads as a boolean", lambda t: run(t, params=str(write(t / "p.yaml", "source: demo\nno: 3\n"))),
         r"\S*p.yaml has the key False on line 2 \(bool, as YAML reads it\), not a name: quote it or fix the line",
         after=nothing_written),
    Case("a params key YAML reads as a number", lambda t: run(t, params=str(write(t / "p.yaml", "source: demo\n1: x\n"))),
         r"\S*p.yaml has the key 1 on line 2 \(int, as YAML reads it\)", after=nothing_written),
    Case("a count that YAML reads as a boolean", lambda t: ["run", DEMO, "--set", "limit=yes", "--check"],
         r"limit \(from --set\): must be a number, not true or false \(YAML reads yes, no, on and off as those\) "
         r"\(got True\)", after=nothing_written),  # pydantic took it as 1: a run of one row
    Case("seeds that YAML reads as booleans", lambda t: ["run", DEMO, "--set", "candidate_seeds=[on, off]", "--check"],
         r"candidate_seeds\.0 \(from --set\): must be a number, not true or false", after=nothing_written),
    Case("a scorer option that YAML reads as a boolean",
         lambda t: ["run", DEMO, "--set", "scorer_options={output_index: yes}", "--check"],
         r"scorer_options\.output_index \(from --set\): must be a number, not true or false", after=nothing_written),
    Case("a misspelt scorer option",
         lambda t: ["run", DEMO, "--set", "scorers=[{name: b, model: x, options: {outptu_index: 1}}]", "--check"],
         r"scorers\.0\.options\.outptu_index \(from --set\): unknown name: check its spelling", after=nothing_written),
    Case("a count given as a fraction", lambda t: ["run", DEMO, "--set", "chunk_size=2.5", "--check"],
         r"chunk_size \(from --set\): Input should be a valid integer, got a number with a fractional part \(got 2.5\)",
         after=nothing_written),
    Case("an empty run_name", lambda t: ["run", DEMO, "--set", "run_name=''", "--check"],
         r"run_name \(from --set\): must be one folder's name \(the run goes to runs/<run_name>\).*\(got ''\)",
         after=nothing_written),
    Case("a run_name that leaves runs/", lambda t: ["run", DEMO, "--set", "run_name=../../etc", "--check"],
         r"run_name \(from --set\): must be one folder's name .*a path goes in run_dir \(got '../../etc'\)",
         after=nothing_written),
    # text that YAML reads as a number: how to quote it where it was given, with the value as typed where known
    Case("a run_name that YAML reads as a number", lambda t: ["run", DEMO, "--set", "run_name=001", "--check"],
         r"run_name \(from --set\): Input should be a valid string \(got 1\): YAML reads 001 as a number; quote it: "
         r"'--set run_name=\"001\"'", after=nothing_written),
    Case("a split that YAML reads as a number in a params file",
         lambda t: run(t, "--check", params=str(write(t / "p.yaml", "source: demo\nsource_split: 2024\n"))),
         r"source_split: Input should be a valid string \(got 2024\): YAML reads it as a number; quote it in the file "
         r"\(source_split: \"\.\.\.\", as you wrote it\)", after=nothing_written),
    Case("a run_name that YAML reads as a date in a params file",  # (it said only "got datetime.date(2024, 1, 1)")
         lambda t: run(t, "--check", params=str(write(t / "p.yaml", "source: demo\nrun_name: 2024-01-01\n"))),
         r"run_name: Input should be a valid string \(got datetime.date\(2024, 1, 1\)\): YAML reads it as a date; "
         r"quote it in the file \(run_name: \"\.\.\.\", as you wrote it\)", after=nothing_written),
    Case("include given with --set", lambda t: run(t, "--set", "include=missing.yaml", "--check"),
         r"--set include=missing.yaml: include: goes in a params file .*: add 'include: missing.yaml' to \S*demo.yaml",
         after=nothing_written),  # (it was read after the file's includes: ignored, the run went ahead)
    Case("a card of rows that are no pairs", lambda t: lambda: gather_facts(build(CardParams, {
        "card_dataset": str(jsonl(t / "big.jsonl", [{"prompt": "p", "resp0": "a", "resp1": "b"}])),
        "run_dir": str(t / "run")})),
         r"card_dataset '\S*big.jsonl' has no `chosen` and `rejected` columns, nor their scores \(it has prompt, resp0, "
         r"resp1\): "
         r"03_card describes preference pairs.*nothing was written", after=nothing_written),
    Case("a licence in capitals", lambda t: lambda: build(CardParams, {"license": "MIT"}),
         r"license: the Hub's licence identifiers are lower case: did you mean 'mit'\?"),
    Case("--set of a key the file's grid gives", lambda t: ["run", str(ROOT / "params" / "demo_family.yaml"), "--out",
                                                            str(t / "run"), "--set", "mini_index=2", "--check"],
         r"--set mini_index: the family's grid in \S*demo_family.yaml gives each member its own value, which wins",
         after=nothing_written),
    Case("a damaged manifest.json", lambda t: run(t, "--check") if write(t / "run" / "manifest.json", "[1, 2]") else 0,
         r"\S*run/manifest.json holds a list where a mapping belongs, not a run's record: restore it .*nothing was "
         r"written"),
    Case("a truncated manifest.json",
         lambda t: run(t, "--check") if write(t / "run" / "manifest.json", '{"status": "comp') else 0,
         r"\S*run/manifest.json is not JSON \(Unterminated string.*\), not a run's record"),
    Case("a manifest.json whose notebook's record is an empty list",  # (an AttributeError: 'list' object has no...)
         lambda t: run(t, "--check") if write(t / "run" / "manifest.json", '{"notebooks": {"01_construct": []}}')
         else 0,
         r'\S*run/manifest.json holds a list as its notebooks\["01_construct"\] where a mapping belongs, not a '
         r"run's record"),
    # folders written into: refused before any work (selfcheck crashed after all its checks had run)
    # selfcheck has no --kind: it said "Set the kind to 'auto' or 'sequence_classifier'" in its report
    Case("selfcheck of a reward model", lambda t: ["selfcheck", "--model", "builtin:tiny-reward-llama", "--report",
                                                   str(t / "rep")],
         r"--model builtin:tiny-reward-llama is a sequence-classifier reward model; repro selfcheck checks PairRM "
         r"against llm-blender only\. Score it with `repro score --model builtin:tiny-reward-llama --input \.\.\.` "
         r"and time it with `repro bench --model builtin:tiny-reward-llama`\.",
         after=lambda t: not (t / "rep").exists() or pytest.fail("a report was written")),
    Case("selfcheck of a reward model in a folder with a space",
         lambda t: write(t / "my rm" / "model.safetensors", "") and ["selfcheck", "--model", str(write(
             t / "my rm" / "config.json", json.dumps({"architectures": ["LlamaForSequenceClassification"]})).parent),
             "--report", str(t / "rep")],
         r"Score it with `repro score --model '\S*/my rm' --input \.\.\.` and time it with `repro bench --model "
         r"'\S*/my rm'`\."),
    Case("selfcheck with a reward model as the reference",
         lambda t: ["selfcheck", "--model", "builtin:tiny-pairrm", "--reference-model", "builtin:tiny-reward-llama",
                    "--report", str(t / "rep")],
         r"--reference-model builtin:tiny-reward-llama is a sequence-classifier reward model; repro selfcheck checks",
         after=lambda t: not (t / "rep").exists() or pytest.fail("a report was written")),
    Case("selfcheck --report is a file",
         lambda t: ["selfcheck", "--model", "builtin:tiny-pairrm", "--no-timing", "--report", str(write(t / "a", "x"))],
         r"--report \S*a is an existing file, not a folder\. The report .*give a new or existing folder"),
    Case("selfcheck --report inside a file",
         lambda t: ["selfcheck", "--model", "builtin:tiny-pairrm", "--report", str(write(t / "a", "x") / "sub")],
         r"--report \S*a/sub lies inside \S*a, which is a file"),
    Case("score --work-dir is a file", lambda t: score(t, "--work-dir", str(write(t / "wd", "x"))),
         r"--work-dir \S*wd is an existing file, not a folder\. .*finished chunks"),
    Case("bench --output-dir is a file", lambda t: ["bench", "--size", "tiny", "--prompts", "1", "--slice", "1",
                                                    "--output-dir", str(write(t / "res", "x"))],  # after the whole run
         r"--output-dir \S*res is an existing file, not a folder\. The results \(a JSON file\) go into a folder"),
    Case("bench --dtype bf16 with llm-blender", lambda t: ["bench", "--size", "tiny", "--prompts", "1", "--slice", "1",
                                                          "--device", "cpu", "--dtype", "bf16", "--output-dir",
                                                          str(t / "res")],  # it said "(or backend='repro')"
         r"--dtype bf16 on cpu: repro bench times llm-blender's code too, which runs fp16 on CUDA/MPS and fp32 "
         r"otherwise; choose one of those, or --skip bs1,bs8 to time repro's engine alone\.",
         after=lambda t: not (t / "res").exists() or pytest.fail("results written")),
    Case("repro notebooks into the checkout", lambda t: ["notebooks", str(ROOT)],  # a shutil.SameFileError
         r"\S+ is the folder these notebooks and params are copied from: open them there \(cd \S+ && jupyter lab\), "
         r"or give another folder for a project of your own\."),
    Case("repro notebooks where notebooks/ is a file", lambda t: ["notebooks", str(write(t / "p" / "notebooks", "x").parent)],
         r"\S*p/notebooks is an existing file, not a folder\. Give a new or existing folder"),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name if isinstance(c, Case) else None)
def test_bad_input_gets_one_clear_paragraph(case: Case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may land in the working directory either
    made = case.make(tmp_path)
    if callable(made):
        with pytest.raises(ReproError) as info:
            made()
        message = str(info.value)
    else:
        assert main(made) == case.code
        message = capsys.readouterr().err
        assert message.startswith(f"repro {made[0]}: " + ("error: " if case.code == 2 else "")), message
    assert re.search(case.match, message, flags=re.S), message
    assert "Traceback" not in message
    assert not re.search(r"got (\S+)\)? \(got \1", message), message  # the value said once
    if case.after:
        case.after(tmp_path)
    assert not list(tmp_path.glob("**/.*.tmp*"))  # no temp file left behind


def test_a_broken_line_in_the_source_of_repro_run_is_named_by_the_notebook_that_read_it(repro_run, tmp_path):
    """The source rows are read by 01_construct, so the run fails there and says where."""
    proc = repro_run(*run(tmp_path, "--set", f"source={broken_jsonl(tmp_path)}", "--set", "notebooks=[01_construct]")[1:],
                     cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    message = proc.stderr
    assert message.startswith("repro run: "), message
    assert re.search(r"Notebook 01_construct failed at cell .*line 3 of source '\S*bad.jsonl' is not valid JSON .*fix or remove "
                     r"that line", message, flags=re.S), message
    assert "Traceback" not in message
