import ast
import re
from pathlib import Path

import datasets
import pytest
from conftest import html_elements, shown_text
from markdown_it import MarkdownIt

from repro import parameters
from repro.cli import main
from repro.dataset_io import split_files, write_split
from repro.errors import ParameterError
from repro.family import parse_grid_args
from repro.parameters import (AnalyzeParams, CardParams, CompareParams, ConstructParams, build, load_params_file,
                              parse_set, Stale, cell_names, validate_all, validate_namespace)

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["demo.yaml", "demo_generate.yaml", "part2_mini_1.yaml"])
def test_shipped_params_files_validate(name):
    values = load_params_file(ROOT / "params" / name)
    construct = validate_all(values)["construct"]
    assert isinstance(construct, ConstructParams)


def test_recipe_params_say_what_the_recipe_is():
    values = load_params_file(ROOT / "params" / "part2_mini_1.yaml")
    assert values["source"] == "ZHLiu627/ultrafeedback_binarized_with_response_full"
    assert (values["part_start"], values["part_stop"], values["drop_rows"]) == (40000, 61135, 400)
    assert (values["mini_index"], values["mini_count"]) == (1, 4)
    assert values["candidate_columns"] == ["resp0", "resp1"]
    assert values["scorer_model"] == "llm-blender/PairRM" and values["device"] == "cuda"
    assert "undocumented" in (ROOT / "params" / "part2_mini_1.yaml").read_text()


def test_keys_no_listed_notebook_reads_are_named_in_one_line_not_refused(tmp_path, capsys):
    (tmp_path / "base.yaml").write_text("reference: a/b\nlanguage: [en]\n")  # a shared base: keys for every notebook
    child = tmp_path / "child.yaml"
    child.write_text("include: base.yaml\nnotebooks: [01_construct, 02_analyze]\ncompare_source: demo\n")
    values = load_params_file(child, ["near_tie=0.1", "limit=3"])
    assert (values["compare_source"], values["near_tie"], values["reference"]) == ("demo", 0.1, "a/b")
    note = capsys.readouterr().err
    assert note.count("\n") == 1 and "reference" not in note and "limit" not in note, note  # (the base's: by design)
    assert re.search(r"compare_source \(read by 04_compare\), near_tie \(read by 04_compare; from --set\) are set "
                     r"but not used: the run's notebooks are 01_construct, 02_analyze \(add the one that reads them to "
                     r"notebooks, or remove them\)", note), note
    load_params_file(child, ["notebooks=[01_construct, 04_compare]"])  # listed: nothing to say
    for path in sorted((ROOT / "params").glob("**/*.yaml")):  # nor about the shipped files
        load_params_file(path)
    assert capsys.readouterr().err == ""


def test_unknown_parameter_names_the_key_and_suggests(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("mini_idx: 1\n")
    with pytest.raises(ParameterError, match=r"Unknown parameter 'mini_idx'.*Did you mean 'mini_index'"):
        load_params_file(f)


def test_messages_name_the_examples_where_this_user_has_them(tmp_path, monkeypatch):
    # an installed wheel, in a folder of one's own: no params/ nor notebooks/ there until `repro notebooks DIR`
    f = tmp_path / "p.yaml"
    for home, elsewhere in ((ROOT, False), (tmp_path, True)):
        monkeypatch.setenv("REPRO_HOME", str(home))
        for text, named in (("", "Start from params/demo.yaml"), ("mini_idx: 1\n", "parameters cell (notebooks/")):
            f.write_text(text)
            with pytest.raises(ParameterError) as err:
                load_params_file(f)
            assert named in str(err.value), err.value
            assert ("`repro notebooks DIR` copies it into DIR" in str(err.value)) == elsewhere, err.value
        with pytest.raises(ParameterError, match=r"is a folder, not a file; .* or an example's name, e.g\. demo\."):
            load_params_file(tmp_path)  # (the name works in both; params/demo.yaml only in a project)


def test_mistyped_values_name_the_key(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text("mini_index: one\n")
    with pytest.raises(ParameterError, match="mini_index"):
        load_params_file(f)
    with pytest.raises(ParameterError, match="dtype"):
        load_params_file(f, ["mini_index=0", "dtype=float8"])


def test_torch_precision_names_are_the_schemas_own_as_repro_score_and_load_scorer_read_them(tmp_path):
    """`repro score --dtype half` scored in fp16, while `repro run --set dtype=half` was refused ("Input should be
    'auto', 'fp32', 'fp16' or 'bf16'"): two vocabularies for one input. The schema reads torch's names as its own."""
    f = tmp_path / "p.yaml"
    f.write_text("dtype: fp32\n")
    values = load_params_file(f, ["dtype=half", "generation_dtype=torch.bfloat16"])
    assert build(ConstructParams, values).dtype == "fp16"
    assert build(parameters.GenerationParams, values).generation_dtype == "bf16"
    assert parameters.ScorerSpec(name="rm", model="owner/rm", dtype=" Float32").dtype == "fp32"
    with pytest.raises(ParameterError, match=r"  - dtype \(from --set\): Input should be 'auto', 'fp32', 'fp16' or "
                                             r"'bf16' \(got 'float8'\)"):
        load_params_file(f, ["dtype=float8"])



def test_an_empty_list_says_how_many_items_it_needs():
    # "must hold at least 1 item(s)": the count's noun, as every other message writes it
    with pytest.raises(ParameterError, match=r"score_tolerances: must hold at least 1 item \(got \[\]\)"):
        build(CompareParams, {"score_tolerances": []})


def test_yaml_pitfalls_are_caught_or_cast(tmp_path):
    f = tmp_path / "p.yaml"
    # YAML reads `yes` as True: for a string parameter that is an error, not a silent "True"
    f.write_text("source: yes\n")
    with pytest.raises(ParameterError, match="source"):
        load_params_file(f)
    # `1e-5` is a string in YAML; the schema casts it for a float parameter
    f.write_text("temperature: 1e-5\n")
    assert validate_all(load_params_file(f))["generation"].temperature == pytest.approx(1e-5)
    # a key given twice kept the last value without a word; an empty file ran every default (the published recipe)
    f.write_text("source: demo\nlimit: 5\nsource: other.jsonl\n")
    with pytest.raises(ParameterError, match=r"p.yaml sets 'source' twice \(lines 1 and 3\): keep one"):
        load_params_file(f)
    for empty in ("", "# only a comment\n", "{}\n"):
        f.write_text(empty)
        with pytest.raises(ParameterError, match=r"p.yaml is empty: it sets no parameter.*params/demo.yaml"):
            load_params_file(f)
    f.write_text("{limit: 5, limit: 6}\n")
    with pytest.raises(ParameterError, match=r"p.yaml sets 'limit' twice \(line 1\): keep one"):
        load_params_file(f)
    # saved as latin-1 (a comment with an accent): a traceback of UnicodeDecodeError
    f.write_bytes("source: demo\n# café\n".encode("latin-1"))
    with pytest.raises(ParameterError, match=r"^Params file \S*p.yaml is not UTF-8 text \(byte 0xe9 on line 2\): save "
                                             r"it as UTF-8"):
        load_params_file(f)
    # a key given twice on the command line: the last won without a word, as in a file
    f.write_text("source: demo\n")
    with pytest.raises(ParameterError, match=r"--set limit=8: limit is set twice on the command line \(--set limit=5 "
                                             r"before\): keep one"):
        load_params_file(f, ["limit=5", "limit=8"])


def test_generated_candidates_are_the_ones_ranked():
    # generate: true with n_candidates 2 and the default four candidate_columns ranked two policy texts with the
    # source's resp2/resp3, and the card said all four were generated; n_candidates 5 with three columns left two
    # generated texts unranked
    for n, columns in ((2, ["resp0", "resp1", "resp2", "resp3"]), (5, ["resp0", "resp1", "resp2"])):
        with pytest.raises(ParameterError, match=rf"candidate_columns {re.escape(str(columns))}: with generate: true the "
                                                 rf"candidates are the n_candidates={n} generated ones "
                                                 rf"\({', '.join(f'resp{k}' for k in range(n))}\): set "
                                                 rf"candidate_columns: \[{', '.join(f'resp{k}' for k in range(n))}\]"):
            validate_all({"generate": True, "n_candidates": n, "candidate_columns": columns})
    policy = {"generate": True, "policy_model": "builtin:tiny-policy"}
    assert validate_all({**policy, "n_candidates": 2, "candidate_columns": ["resp1", "resp0"]})
    assert validate_all({**policy, "n_candidates": 0, "generate_reference": True, "candidate_columns": [],
                         "include_reference": True, "include_original_pair": True})  # SELM's: the greedy text + the pair
    assert validate_all({"candidate_columns": ["resp0", "resp1", "resp2"]})  # not generated: the source's


def test_set_overrides_and_bad_set():
    assert parse_set(["mini_index=2", "candidate_columns=[a, b]", "limit=null"]) == {
        "mini_index": 2, "candidate_columns": ["a", "b"], "limit": None}
    with pytest.raises(ParameterError, match="KEY=VALUE"):
        parse_set(["mini_index"])


def test_set_takes_text_as_typed_where_yaml_would_drop_a_comment_or_make_a_mapping():
    # `--set "run_dir=runs/exp #3"` ran in runs/exp; `source=data dir/note: v2.jsonl` became {'data dir/note': ...}
    assert parse_set(["run_dir=runs/exp #3", "card_dataset=data dir/run #2.jsonl", "source=data dir/note: v2.jsonl",
                      "known_recipe=scored with PairRM: best vs worst", "hub_repo_id=#1", "run_name=- a"]) == {
        "run_dir": "runs/exp #3", "card_dataset": "data dir/run #2.jsonl", "source": "data dir/note: v2.jsonl",
        "known_recipe": "scored with PairRM: best vs worst", "hub_repo_id": "#1", "run_name": "- a"}
    # YAML's numbers, booleans, null, lists and mappings in brackets, quoted text: read as before
    assert parse_set(["limit=3", "candidate_columns=[]", "scorers=[{name: a, model: 'x #1'}]", "push_to_hub=true",
                      "known_recipe={source: 'a: b'}", "run_name=\"exp #3\"", "pretty_name=a#b", "mini_index= 1 "]) == {
        "limit": 3, "candidate_columns": [], "scorers": [{"name": "a", "model": "x #1"}], "push_to_hub": True,
        "known_recipe": {"source": "a: b"}, "run_name": "exp #3", "pretty_name": "a#b", "mini_index": 1}
    # a date or time (cron's `--set run_name=$(date +%F)`): "Input should be a valid string (got datetime.date(2024, 1,
    # 1))", with no hint; no parameter is a date, so it is the text typed, and --grid reads a value as --set does
    assert parse_set(["run_name=2024-01-01", "pretty_name=2024-01-01 10:00:00", "mini_index=2024"]) == {
        "run_name": "2024-01-01", "pretty_name": "2024-01-01 10:00:00", "mini_index": 2024}
    assert load_params_file("demo", ["run_name=2024-01-01"])["run_name"] == "2024-01-01"
    assert parse_grid_args(["run_name=2024-01-01,2024-01-02"]) == {"run_name": ["2024-01-01", "2024-01-02"]}
    # a comment after a number, a list or quoted text is one (it worked before the rule above): only plain text is kept
    assert parse_set(["limit=3 # three", "candidate_columns=[resp0, resp1] # two", "known_recipe='PairRM' # note"]) == {
        "limit": 3, "candidate_columns": ["resp0", "resp1"], "known_recipe": "PairRM"}


def test_cross_field_checks():
    with pytest.raises(ParameterError, match="mini_index"):
        build(ConstructParams, {"mini_index": 4, "mini_count": 4})
    with pytest.raises(ParameterError, match="part_stop"):
        build(ConstructParams, {"part_start": 10, "part_stop": 5})
    with pytest.raises(ParameterError, match="batch_tokens"):
        build(ConstructParams, {"batch_tokens": 100})


def test_validate_namespace_ignores_modules_and_other_notebooks_keys():
    import json
    ns = {"json": json, "mini_index": 0, "bootstrap_resamples": 10, "_private": 1, "In": [], "notebooks": ["x"]}
    p = validate_namespace("construct", ns)
    assert p.mini_index == 0
    with pytest.raises(ParameterError, match="Unknown parameter 'bootstrap_resample'"):
        validate_namespace("construct", {"bootstrap_resample": 1})


def test_a_notebooks_bad_value_is_explained_in_a_notebooks_words():
    # `papermill ... -p language en`: refused, with advice to use --set, which papermill does not have
    assert validate_namespace("card", {"language": "en"}).language == ["en"]  # one language: a list of one
    # where the value came from cannot be told (no history of the cells): both places are named
    with pytest.raises(ParameterError, match=r"bootstrap_resamples: must be >= 100 \(got 5\)\nFix the value where it "
                                             r"was given: the notebook's parameters cell, or papermill's -p KEY VALUE "
                                             r"\(a list: -y 'KEY: \[a, b\]'\), which overrides the cell\.$"):
        validate_namespace("analyze", {"bootstrap_resamples": 5})
    # `papermill ... -p bootstrap_resamples 1`: it said to fix the value in the parameters cell, which held 1000
    header = "# Parameters of notebooks/02_analyze.ipynb.\n"
    cells = ["", header + "bootstrap_resamples = 1000\n", "# Parameters\nbootstrap_resamples = 1\n"]
    with pytest.raises(ParameterError, match=r"^Invalid analyze parameters in notebook 02_analyze's parameters:\n  - "
                                             r"bootstrap_resamples \(from papermill's -p/-y/-f\): must be >= 100 "):
        validate_namespace("analyze", {"In": cells, "bootstrap_resamples": 1})
    with pytest.raises(ParameterError, match=r"\n  - bootstrap_resamples \(from the parameters cell\): must be >= 100 "):
        validate_namespace("analyze", {"In": ["", header + "bootstrap_resamples = 1\n"], "bootstrap_resamples": 1})


def test_text_that_papermill_reads_as_a_number_names_its_raw_option():
    # `papermill ... -p dataset_split 2024`: -p made it a number; -r passes the text as typed
    with pytest.raises(ParameterError, match=r"dataset_split: Input should be a valid string \(got 2024\): the "
                                             r"parameters cell or papermill's -p read it as a number; quote it in the "
                                             r"cell, or pass it with -r dataset_split VALUE \(as typed\)"):
        validate_namespace("analyze", {"dataset_split": 2024})


def test_missing_params_file():
    with pytest.raises(ParameterError, match="does not exist"):
        load_params_file("nope.yaml")


def test_validate_namespace_twice_in_one_notebook_and_on_rerun():
    ns = {"limit": 3, "temperature": 0.5}
    p = validate_namespace("construct", ns)
    ns["p"] = p
    ns["scores"] = [[0.1, -0.1]]  # a notebook variable made after the first validation
    gen = validate_namespace("generation", ns)
    assert gen.temperature == 0.5 and validate_namespace("construct", ns).limit == 3


def test_a_failed_parameters_cell_leaves_nothing_of_the_previous_run_to_write_with():
    # JupyterLab's Run All sends every cell at once, and the kernel aborts only some after the failed one: the later
    # cells ran with the previous run's `ctx` and rewrote its folder (one deleted by hand came back)
    import json

    class Context:
        run_dir = "runs/previous"

    ns = {"json": json, "limit": 3}
    ns["p"] = validate_namespace("construct", ns)
    ns.update(ctx=Context(), rows=[1, 2], limit=-5)
    with pytest.raises(ParameterError, match=r"limit: must be >= 1 \(got -5\)"):
        ns["p"] = validate_namespace("construct", ns)
    assert ns["json"] is json and ns["limit"] == -5  # modules and the parameters' values stay
    with pytest.raises(ParameterError, match="`rows` is from before a cell above failed"):  # lists too (old scores)
        len(ns["rows"])
    assert repr(ns["rows"]) == "<rows: from before a cell above failed; run the notebook again>"
    for name in ("p", "ctx"):
        with pytest.raises(ParameterError, match=rf"`{name}` is from before a cell above failed: fix it and run the "
                                                 rf"notebook again"):
            getattr(ns[name], "run_dir")
    assert not hasattr(ns["ctx"], "_repr_html_")  # what IPython's display asks is simply absent
    ns["limit"] = 4
    assert validate_namespace("construct", ns).limit == 4


def test_in_a_kernel_a_cell_failing_with_repros_error_makes_the_notebooks_objects_stale():
    # a missing source (01_construct's begin) or a failed stage: Run All went on with the earlier run's `ctx`,
    # `candidate_set`, ... and wrote a dataset of the old candidates into the new run's folder
    from types import SimpleNamespace

    from repro.errors import DataError

    hooks = []
    shell = SimpleNamespace(events=SimpleNamespace(register=lambda event, fn: hooks.append((event, fn))))
    ns = {"get_ipython": lambda: shell, "limit": 3}
    validate_namespace("construct", ns)
    validate_namespace("generation", ns)
    assert [event for event, _ in hooks] == ["post_run_cell"]  # once per kernel
    after = hooks[0][1]

    def ran(cell="pairs.foo", before=None, error=None):
        after(SimpleNamespace(error_before_exec=before, error_in_exec=error, info=SimpleNamespace(raw_cell=cell)))

    ns["candidate_set"] = object()
    ran(error=AttributeError("a typo in a cell of one's own"))
    assert not isinstance(ns["candidate_set"], Stale)  # exploring: only repro's failures make objects stale
    ran(error=DataError("source 'x' is neither ..."))
    assert isinstance(ns["candidate_set"], Stale) and ns["limit"] == 3
    ns["pairs"] = object()
    ran(error=KeyboardInterrupt())
    assert isinstance(ns["pairs"], Stale)


def test_after_an_interrupt_the_notebooks_objects_say_a_cell_was_interrupted_not_that_one_failed():
    # Interrupt Kernel during §5 PairRM scores, then that cell run again: "`ctx` is from before a cell above failed:
    # fix it and run the notebook again", though nothing had failed
    from types import SimpleNamespace

    from repro.errors import Interrupted

    hooks = []
    shell = SimpleNamespace(events=SimpleNamespace(register=lambda event, fn: hooks.append(fn)))
    ns = {"get_ipython": lambda: shell, "limit": 3}
    validate_namespace("construct", ns)
    ns["ctx"] = object()
    hooks[0](SimpleNamespace(error_before_exec=None, info=SimpleNamespace(raw_cell="stages.score(ctx, candidate_set)"),
                             error_in_exec=Interrupted("stage 'score': run the notebook again to continue.")))
    with pytest.raises(ParameterError, match=r"^`ctx` is from before a cell was interrupted: run the notebook again "
                                             r"\(Run All\), which goes on from what was kept \(this cell did "
                                             r"nothing\)\.$"):
        ns["ctx"].run
    assert repr(ns["ctx"]) == "<ctx: from before a cell was interrupted; run the notebook again>"


def test_a_cell_failing_with_repros_error_stops_run_all_in_the_kernel(kernel):
    """ReproError's short display (_render_traceback_) keeps the reply 'error': the kernel aborts the cells Run All
    queued behind it (a verifier saw later cells run in JupyterLab; the kernel, given them at once, runs none)."""
    _, kc = kernel()
    # the failing cell works a moment first, as a load cell does: the cells behind it are queued by then (failing
    # at once, on a busy machine it could fail before they reached the kernel, which then had nothing to abort)
    cells = ["from repro.errors import DataError", "import time; time.sleep(1); raise DataError('the load cell "
             "failed')", "1", "2"]
    ids = [kc.execute(code, stop_on_error=True) for code in cells]  # as JupyterLab's Run All sends them
    replies = {}  # by request: a late reply to the start's kernel_info requests is not one of ours
    while not replies.keys() >= set(ids):
        msg = kc.get_shell_msg(timeout=60)
        replies[msg["parent_header"].get("msg_id")] = msg["content"].get("status")
    assert [replies[i] for i in ids] == ["ok", "error", "aborted", "aborted"]


def test_a_parameters_cell_that_did_not_run_to_its_end_is_refused():
    # `limit = 30)` (a SyntaxError) gave every default, and `limit = thirty` (a NameError before `chunk_size = 4`)
    # ran with the earlier values: the next cell built a run of values the cell did not hold
    from types import SimpleNamespace

    hooks = []
    shell = SimpleNamespace(events=SimpleNamespace(register=lambda event, fn: hooks.append(fn)))
    header = "# Parameters of notebooks/01_construct.ipynb.\n"
    ns = {"get_ipython": lambda: shell, "In": ["", header + "limit = 3\nchunk_size = 8\n"], "limit": 3,
          "chunk_size": 8}
    validate_namespace("construct", ns)
    ns["ctx"] = object()
    cell = header + "limit = thirty\nchunk_size = 4\n"
    ns["In"].append(cell)
    hooks[0](SimpleNamespace(error_before_exec=None, error_in_exec=NameError("thirty"),
                             info=SimpleNamespace(raw_cell=cell)))
    assert isinstance(ns["ctx"], Stale)
    with pytest.raises(ParameterError, match="The parameters cell failed when it last ran"):
        validate_namespace("construct", ns)
    cell = header + "limit = 30\nchunk_size = 4\n"
    ns["In"].append(cell)
    ns.update(limit=30, chunk_size=4)
    hooks[0](SimpleNamespace(error_before_exec=None, error_in_exec=None, info=SimpleNamespace(raw_cell=cell)))
    assert validate_namespace("construct", ns).chunk_size == 4
    # a fresh kernel (no hook yet): a name the cell sets is missing, or the cell does not parse
    fresh = {"In": ["", header + "limit = thirty\nchunk_size = 4\n"]}
    with pytest.raises(ParameterError, match="The parameters cell stopped before it set chunk_size"):
        validate_namespace("construct", fresh)
    with pytest.raises(ParameterError, match=r"The parameters cell does not parse \(line 2: unmatched '\)'\)"):
        validate_namespace("construct", {"In": ["", header + "limit = 30)\n"], "limit": 3})


def test_the_parameters_are_the_names_the_parameters_cell_assigns_as_it_last_ran():
    # the cell run a second time in the same kernel: `limt = 10` was ignored (only the names of the first
    # validation were read) and the run silently kept limit = 30; once fixed, the stale `limt` was still refused
    header = "# Parameters of notebooks/01_construct.ipynb.\n"
    ns = {"In": ["", header + "limit = 30\n", "p = validate_namespace('construct', globals())"], "limit": 30}
    assert validate_namespace("construct", ns).limit == 30
    ns["In"] += [header + "limt = 10\n", "p = validate_namespace('construct', globals())"]
    ns["limt"], ns["scores"] = 10, [0.1]
    with pytest.raises(ParameterError, match=r"Unknown parameter 'limt' in notebook 01_construct's parameters\. Did you mean 'limit'"):
        validate_namespace("construct", ns)
    ns["In"] += [header + "limit = 120\n", "p = validate_namespace('construct', globals())"]
    ns["limit"] = 120
    assert validate_namespace("construct", ns).limit == 120  # `limt` and `scores` are still in the kernel
    # papermill's injected cell after the notebook's own: its names count too
    ns["In"] += ["# Parameters\nlimit = 7\nmini_count = 2\n", "p = validate_namespace('construct', globals())"]
    ns.update(limit=7, mini_count=2)
    assert validate_namespace("construct", ns).mini_count == 2
    assert cell_names({"In": ["x = 1"]}) is None and cell_names({}) is None  # no such cell: the first names rule


def test_nothing_to_generate_is_refused_only_when_generating():
    # `--set generate=false` on SELM's recipe (n_candidates 0) with generate_reference false was refused for
    # "nothing to generate", though nothing would be generated
    quiet = {"n_candidates": 0, "generate_reference": False, "candidate_columns": ["resp0", "resp1"]}
    assert validate_all({**quiet, "generate": False})["generation"].n_candidates == 0
    with pytest.raises(ParameterError, match="generate is true, but n_candidates is 0 and generate_reference is "
                                             "false: nothing to generate"):
        validate_all({**quiet, "generate": True, "candidate_columns": []})


@pytest.mark.parametrize("key", ["output_split", "card_split"])
def test_a_written_split_name_that_datasets_refuses_is_refused_by_the_schema(tmp_path, key):
    # output_split: train-prefs passed `repro run --check`; the run scored every row, wrote
    # data/train-prefs-00000-of-00001.parquet, then 03_card said "No dataset at ...: Run 01_construct first" (false)
    # and load_dataset refused the folder. card_split names the split 03_card writes a card_dataset's rows to.
    demo = Path(parameters.__file__).parents[2] / "params" / "demo.yaml"
    for bad, example in (("train-prefs", "train_prefs"), ("train prefs", "train_prefs"), ("v1/train", "v1_train"),
                         ("-", "train_prefs"), (".train", "train")):
        with pytest.raises(ParameterError, match=re.escape(
                f"{key} (from --set): must be a split name datasets accepts (^\\w+(?:\\.\\w+)*$: letters, digits and "
                f"_, parts joined by '.'), e.g. {example!r} (got {bad!r})")):
            validate_all(load_params_file(demo, [f"{key}={bad}"]))
    for bad in ("all", "ALL"):  # passed --check; 03_card then failed in datasets after every row was scored
        with pytest.raises(ParameterError, match=re.escape(
                f"{key} (from --set): must not be {bad!r}, datasets' word for all splits together: name the split "
                f"e.g. 'train_prefs' (got {bad!r})")):
            validate_all(load_params_file(demo, [f"{key}={bad}"]))
    for good in ("train_prefs", "train_prefs_iter2", "test", "v1.train"):
        sections = validate_all(load_params_file(demo, [f"{key}={good}"]))
        assert getattr(sections["construct" if key == "output_split" else "card"], key) == good
        # what the schema takes, the run reads back (a dotted name, which datasets takes, was no split here)
        write_split(datasets.Dataset.from_dict({"prompt": ["p"]}), tmp_path / good, good)
        assert list(split_files(tmp_path / good)) == [good]


@pytest.mark.parametrize("key", ["device", "generation_device"])
def test_a_device_outside_its_fixed_set_is_refused_by_the_schema(tmp_path, key):
    f = tmp_path / "p.yaml"
    f.write_text("run_name: p\n")
    with pytest.raises(ParameterError, match=rf"{key} \(from --set\): must be one of auto, cpu, cuda, cuda:N or mps "
                                             r"\(got 'gpu'\)"):
        load_params_file(f, [f"{key}=gpu"])
    for good in ("auto", "cpu", "cuda", "cuda:3", "CUDA:1", "mps"):
        params = validate_all(load_params_file(f, [f"{key}={good}"]))
        section = "construct" if key == "device" else "generation"
        assert getattr(params[section], key) == good.lower()


def test_every_parameter_with_a_fixed_set_of_values_is_checked_by_the_schema():
    # a free-text str parameter must not be named like one that takes a fixed set (device, dtype, backend, kind, ...)
    from repro.parameters import SCHEMAS, ScorerSpec
    fixed = ("device", "dtype", "backend", "kind", "format", "mode", "drop_from", "messages", "long_prompts")
    for schema in (*SCHEMAS.values(), ScorerSpec):
        for name, field in schema.model_fields.items():
            if any(word in fixed for word in (name, *name.split("_"))):
                assert field.annotation is not str or field.metadata, f"{schema.__name__}.{name} takes any string"


def test_a_notebook_shows_its_parameters_as_a_table_with_the_defaults_it_left(tmp_path):
    """The `p` cell of 02-05: where the run goes, then each parameter, with its default where the value differs."""
    shown = build(AnalyzeParams, {"run_dir": str(tmp_path / "run"), "bootstrap_resamples": 2000})._repr_markdown_()
    assert shown.splitlines()[0] == f"**Parameters** of 02_analyze, run directory `{tmp_path / 'run'}`:"
    assert "| `bootstrap_resamples` | `2000` (default `1000`) |" in shown
    assert "| `bootstrap_seed` | `0` |" in shown and "run_name" not in shown
    card = build(CardParams, {"run_dir": str(tmp_path / "run"), "known_recipe": "x | y"})._repr_markdown_()
    assert "| `known_recipe` | `'x \\| y'` (default `None`) |" in card  # a | in a value does not split the row


def test_a_notebooks_parameters_table_shows_a_value_with_backticks_as_text(tmp_path):
    """`pretty_name: "a` <img src=x onerror=alert(1)> `"` in a colleague's params file: 03_card's `p` cell put its
    repr between backticks that it closed, and JupyterLab ran the <img>'s onerror. Now its code span holds it all."""
    value = "a` <img src=x onerror=alert(1)> `"
    shown = build(CardParams, {"run_dir": str(tmp_path / "run"), "pretty_name": value})._repr_markdown_()
    assert f"| `pretty_name` | ``{value!r}`` (default `None`) |" in shown
    assert "<img" not in MarkdownIt().render(shown)


def test_a_backtick_in_text_does_not_open_the_code_span_that_follows_it():
    """A column named "a`b" shown as text, then a file named "<img src=x onerror=alert(1)>" in a code span: the text's
    backtick closed at the span's first, and the <img> ran. Now the text's backticks are shown as text too."""
    name = "<img src=x onerror=alert(1)>"
    shown = f"columns {parameters.one_line('a`b')} of {parameters.code_span(name)}"
    assert html_elements(shown) == [] and shown_text(shown) == f"columns a`b of {name}"


def test_text_keeping_its_own_code_spans_escapes_only_outside_them():
    """selfcheck.md's details (`spans`): a model folder `runs&more` in the span the detail made showed `runs&amp;more`
    (a code span shows what it holds as it is); the text around it is still escaped. A backslash before a backtick
    (`\\``, a backtick as text) was read as opening a span, and the <img> after it kept as the span's: it ran."""
    shown = parameters.one_line(f"llm-blender on {parameters.code_span('runs&more <x>')}: a & b <img src=x> [l](u)",
                                spans=True)
    assert shown_text(shown) == "llm-blender on runs&more <x>: a & b <img src=x> [l](u)" and html_elements(shown) == []
    shown = parameters.one_line("a \\`<img src=x onerror=alert(1)>`", spans=True)  # (\`: a backtick, no span's)
    assert shown_text(shown) == "a `<img src=x onerror=alert(1)>`" and html_elements(shown) == []


def test_dollar_signs_in_text_are_shown_as_written_not_typeset_as_math():
    """A run folder `runs2 $5 & $10` or a model folder `rm_$5_$10`: JupyterLab (MathJax) and the Hub typeset what two
    `$` enclose, so the card's title showed "runs2 5 &amp; 10" half as broken math. Every `$` outside code spans is
    escaped (`\\$`, which Markdown shows as `$` and no math reads), a verdict's own `\\$` not twice."""
    for shown, raw in ((parameters.one_line("runs2 $5 & $10"), "runs2 $5 & $10"),
                       (parameters.one_line("rm_$5 `x$` $10", spans=True), "rm_$5 x$ $10"),
                       (parameters.one_line(str(parameters.one_line("pub_$5_$10 &")) + " **b**", markdown=True),
                        "pub_$5_$10 & b"),  # (a verdict stored escaped, then one of an older repro, as written)
                       (parameters.one_line("pub_$5_$10 **b**", markdown=True), "pub_$5_$10 b"),
                       # (a verdict an older one_line wrote of `x\$y$z`: its `\\` a backslash, its `$` unescaped)
                       (parameters.one_line("x\\\\$y\\$z", markdown=True), "x\\$y$z")):
        outside = re.sub(r"`[^`]*`", "", shown)
        assert not re.search(r"(?<!\\)(\\\\)*\$", outside) and shown_text(shown) == raw, shown


def test_asterisks_and_underscores_in_text_are_shown_as_written_not_as_emphasis():
    """A run named `run *q*` had its card titled "run <em>q</em>", a model folder `rm_*x*_y` lost its asterisks in
    02_analyze's stand-in note: Markdown read them as emphasis. Every `*` outside code spans is escaped, a `_` where it
    could open or close emphasis (not inside a word: `mini_1` stays as written in the Markdown)."""
    for raw in ("run *q*", "rm_*x*_y", "_private_ and __init__.py", "a * b * c", "**bold**", "me/_my_set_", "x_ _y"):
        shown = parameters.one_line(raw)
        assert shown_text(shown) == raw and "<em>" not in MarkdownIt().render(shown), shown
        assert "<strong>" not in MarkdownIt().render(shown), shown
    assert parameters.one_line("mini_1 of part_2, 数据_集") == "mini_1 of part_2, 数据_集"
    shown = parameters.one_line("rm_*x*_y `a*b*c_` _z", spans=True)  # (a code span shows what it holds as it is)
    assert shown == "rm\\_\\*x\\*\\_y `a*b*c_` \\_z" and shown_text(shown) == "rm_*x*_y a*b*c_ _z"
    verdict = "**Reproduced** for `mini_1`: _its_ rows"  # (a record's Markdown keeps its emphasis)
    assert parameters.one_line(verdict, markdown=True) == verdict


def test_backslashes_in_text_are_shown_as_written_and_leave_its_escapes_whole():
    """A run folder `x\\$y$z`, a model folder `a\\*b\\*`: the folder's backslash and the one one_line put before the
    `$`, `*` made `\\\\$` (a backslash shown, then a `$` that opens math, a `*` emphasis); `a\\#b` lost its backslash,
    `a\\&b` showed `&amp;`, `c\\` before the prose's `)` lost it. A backslash before ASCII punctuation (CommonMark's
    escapes) or at the end is escaped too (in `spans` text but before a backtick, which there says a backtick as text),
    so the rendered text is the folder's name."""
    unescaped = r"(?<!\\)(\\\\)*[$*]"  # (after no backslash, or after a backslash escaped)
    for raw in ("x\\$y$z", "a\\*b\\*", "a\\*b*", "a\\#b \\& \\<img src=x> c\\", "C:\\runs\\rm_1 \\_a_",
                "a\\\\*b\\\\*", "[l]\\(u) \\](u)"):
        for shown in (parameters.one_line(raw), parameters.one_line(raw, spans=True)):
            assert shown_text(f"({shown})") == f"({raw})" and shown.raw == raw and html_elements(shown) == [], shown
            assert not re.search(unescaped, shown) and not re.search("<(em|a)\\b", MarkdownIt().render(shown)), shown
    shown = parameters.one_line("x\\$y `a\\$b` \\`$z", spans=True)  # (a span's text as it is; \\`: a backtick)
    assert shown_text(shown) == "x\\$y a\\$b `$z" and html_elements(shown) == []


def test_plain_text_is_the_text_markdown_shows_of_one_lines_and_code_spans_output():
    """05_family's tables (HTML, no Markdown) show a verdict's headline (Markdown of one_line, code_span and bold) as
    plain_text: its escapes, entities, code spans and bold as Markdown shows them."""
    for raw in ("x\\$y$z", "a\\*b\\* _c_", "<img src=x> & &amp; **b**", "a`b", "`` x ``", "C:\\runs\\"):
        one, span = parameters.one_line(raw), parameters.code_span(raw)
        for markdown in (one, span, f"**Reproduced: {one}** of {span} \\` ` &lt;"):
            assert parameters.plain_text(markdown) == shown_text(markdown), markdown
        assert parameters.plain_text(one) == parameters.plain_text(span) == raw


def test_yaml_anchors_and_merge_keys_share_values_between_bundles(tmp_path):
    """`<<: *anchor` (YAML's merge key) was refused as "not valid YAML"; a key the merge gives and the mapping sets
    again is the mapping's (YAML's rule), while a key set twice by hand is still refused."""
    f = tmp_path / "p.yaml"
    f.write_text("source: demo\nmini_count: 2\nfamily:\n  grid:\n    part:\n"
                 "      - &small {name: a, mini_index: 0, limit: 6}\n"
                 "      - {<<: *small, name: b, mini_index: 1}\n")
    assert load_params_file(f)["family"]["grid"]["part"][1] == {"name": "b", "mini_index": 1, "limit": 6}
    f.write_text("source: demo\nlimit: 3\nlimit: 4\n")
    with pytest.raises(ParameterError, match="sets 'limit' twice"):
        load_params_file(f)


def test_every_scorer_load_option_is_a_typed_scorer_option():
    # ScorerOptions refused fast_attention, which PairRM's load takes (and a run at 0a6e7dc passed on)
    import inspect

    from repro.parameters import ScorerOptions
    from repro.scorers import LOAD_SETTINGS, SCORERS, SequenceClassifierScorer

    taken = {p.name for cls in {*SCORERS.values(), SequenceClassifierScorer}
             for p in inspect.signature(cls.load).parameters.values()
             if p.kind is p.KEYWORD_ONLY and p.name not in LOAD_SETTINGS}
    assert taken == set(ScorerOptions.__annotations__)
    assert validate_all({"scorer_options": {"fast_attention": False}})["construct"].scorer_options == {
        "fast_attention": False}
    with pytest.raises(ParameterError, match=r"scorer_options\.fast_atention: unknown name: check its spelling\. Did "
                                             r"you mean 'fast_attention'\?"):
        validate_all({"scorer_options": {"fast_atention": False}})
    # a scorer option is suggested among the scorer options only (`name`, a scorers: item's, was offered for `name`)
    with pytest.raises(ParameterError) as raised:
        validate_all({"scorer_options": {"name": "short"}})
    assert "scorer_options.name: unknown name: check its spelling. (got 'short')" in str(raised.value)
    with pytest.raises(ParameterError, match=r"scorers\.0\.options\.batchsize: .* Did you mean 'batch_size'\?"):
        validate_all({"scorers": [{"name": "b", "model": "builtin:tiny-pairrm", "options": {"batchsize": 2}}]})
    with pytest.raises(ParameterError, match=r"scorers\.0\.modle: .* Did you mean 'model'\?"):
        validate_all({"scorers": [{"name": "b", "modle": "builtin:tiny-pairrm"}]})
    # the card's rebuild file holds FILL_IN where the reader puts a chat template: left so, it was taken as the
    # template itself and refused by the scorer inside 01_construct, after the run had started
    left = {"chat_template": "FILL_IN"}
    other = {"name": "b", "model": "builtin:tiny-pairrm", "options": left}
    for given in ({"scorer_options": left}, {"scorers": [other]}):
        with pytest.raises(ParameterError, match=r"chat_template: .*FILL_IN.*put the chat template .* sha256"):
            validate_all(given)


def test_defaults_several_schemas_share_are_written_once():
    # bootstrap_resamples = 1000 and bootstrap_seed = 0 were written in each of 02_analyze's, 04_compare's and
    # 05_family's schemas, and "train_prefs" in three split fields while the others took paths.SPLIT
    tree = ast.parse(Path(parameters.__file__).read_text())
    written = [node.target.id for node in ast.walk(tree) if isinstance(node, ast.AnnAssign) and node.value]
    assert "bootstrap_resamples" not in written and "bootstrap_seed" not in written  # a shared type's default
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value == "train_prefs"]
    for schema in (parameters.AnalyzeParams, parameters.CompareParams, parameters.FamilyViewParams):
        assert schema.model_json_schema()["properties"]["bootstrap_resamples"] == {
            "default": 1000, "ge": 100, "title": "Bootstrap Resamples", "type": "integer"}
        assert schema.model_fields["bootstrap_seed"].default == 0
    assert {name: field.default for schema in parameters.SCHEMAS.values() for name, field in schema.model_fields.items()
            if name.endswith("_split") and field.default} == dict.fromkeys(
        ["source_split", "dataset_split", "card_split", "reference_split", "candidate_split", "compare_source_split"],
        "train_prefs")


def test_a_blank_dataset_parameter_is_unset_as_null_is(tmp_path, capsys):
    """`--set "dataset=''"` (papermill's -p dataset "") passed the check as "this run's dataset", then 02_analyze read
    '' as the project root ("dataset '.' holds data files of 10 formats"). A blank dataset is null, recorded so."""
    keys = ("dataset", "card_dataset", "candidate", "reference", "compare_source")
    values = parameters.resolve_parameters(load_params_file(ROOT / "params" / "demo.yaml", [f"{k}=''" for k in keys]))
    assert {k: values[k] for k in keys} == dict.fromkeys(keys)
    values = parameters.resolve_parameters(load_params_file(ROOT / "params" / "demo.yaml", [f"{k}=' '" for k in keys]))
    assert {k: values[k] for k in keys} == dict.fromkeys(keys)  # (only blanks: not a folder named ' ')
    for section, key in (("analyze", "dataset"), ("card", "card_dataset"), ("compare", "candidate")):
        p = validate_namespace(section, {key: "  ", "run_name": "mine"})  # (papermill's -p KEY "  ")
        assert getattr(p, key) is None and p.run_root == build(type(p), {"run_name": "mine"}).run_root
    with pytest.raises(ParameterError, match=r"source: must not be empty"):  # (no null to mean: still refused)
        build(ConstructParams, {"source": ""})


def test_keys_that_act_only_under_another_value_are_named_as_unused(tmp_path, capsys):
    """`repro run --check uf.yaml --set length_penalty=0.5` said nothing and recorded the value, though length_penalty
    acts only with selection: best_worst_length_penalised; a generation key acts only with generate: true."""
    f = tmp_path / "uf.yaml"
    f.write_text("source: demo\nselection_seed: 3\n")
    load_params_file(f, ["length_penalty=0.5", "temperature=0.9"])
    assert capsys.readouterr().err == (
        f"repro run: {f}: selection_seed (acts only with selection: best_random or random_pair), length_penalty (acts "
        f"only with selection: best_worst_length_penalised; from --set), temperature (acts only with generate: true; "
        f"from --set) are set but not used: set the value named beside them, or remove them.\n")
    load_params_file(f, ["length_penalty=0.5", "selection=best_worst_length_penalised", "notebooks=[02_analyze]"])
    assert capsys.readouterr().err == (  # (with a key no listed notebook reads: a line each)
        f"repro run: {f}: source (read by 01_construct), selection_seed (read by 01_construct), length_penalty (read "
        f"by 01_construct; from --set), selection (read by 01_construct; from --set) are set but not used: the run's "
        f"notebooks are 02_analyze (add the one that reads them to notebooks, or remove them).\n")
    load_params_file(f, ["length_penalty=0.5", "selection=best_worst_length_penalised", "cache=false"])
    assert capsys.readouterr().err == (
        f"repro run: {f}: selection_seed (acts only with selection: best_random or random_pair) is set but not used: "
        f"set the value named beside it, or remove it.\n")


def test_a_key_that_acts_in_some_member_of_a_family_is_not_named_as_unused(tmp_path, capsys):
    """`repro run demo.yaml --grid selection=best_worst,best_worst_length_penalised --set length_penalty=0.5` said
    length_penalty "is set but not used" (only a family: key was taken for a family, not --grid), and following the
    advice ran the penalised member with length_penalty 0. A key is named where it acts in no member: in the family's
    command and in each member's own (--member, as --jobs starts them), a key another member uses not named there."""
    demo, generate = ROOT / "params" / "demo.yaml", ROOT / "params" / "demo_generate.yaml"
    rules = ["--grid", "selection=best_worst,best_worst_length_penalised"]
    for i, (params, command) in enumerate([
            (demo, [*rules, "--set", "length_penalty=0.5"]),
            (demo, [*rules, "--set", "length_penalty=0.5", "--member", "0"]),
            (demo, [*rules, "--set", "length_penalty=0.5", "--member", "1"]),
            (demo, ["--grid", "scorer_prompt=raw,chat_template", "--set", "scorer_prompt_tokenizer=x/y"]),
            (generate, ["--grid", "generation_backend=transformers,vllm", "--set", "vllm_requests=per_prompt"]),
            (demo, ["--grid", "generate=false,true", "--set", "temperature=0.9", "--set",
                    "policy_model=builtin:tiny-policy", "--set", "candidate_columns=[resp0, resp1]"]),
            # 05_family reads it, as a family's folder runs it
            (demo, ["--grid", "mini_index=0,1", "--set", "mini_count=2", "--set", "notebooks=[01_construct]",
                    "--set", "bootstrap_resamples=200"])]):
        main(["run", str(params), *command, "--out", str(tmp_path / str(i)), "--check"])
        assert "set but not used" not in capsys.readouterr().err, command
    # a key no member uses is named, by the family's command and each member's, a grid in the file or from --grid
    (tmp_path / "fam.yaml").write_text(f"include: {demo}\nfamily: {{grid: {{selection: [best_worst, "
                                       f"best_worst_length_penalised]}}}}\nlength_penalty: 0.5\nselection_seed: 3\n")
    for i, (params, command) in enumerate([(demo, [*rules, "--set", "length_penalty=0.5", "--set", "selection_seed=3"]),
                                           (tmp_path / "fam.yaml", []), (tmp_path / "fam.yaml", ["--member", "1"])]):
        main(["run", str(params), *command, "--out", str(tmp_path / f"named{i}"), "--check"])
        assert [line for line in capsys.readouterr().err.splitlines() if "set but not used" in line] == [
            f"repro run: {params}: selection_seed (acts only with selection: best_random or random_pair"
            f"{'; from --set' * (params == demo)}) is set but not used: set the value named beside it, or remove it."]
