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
import pytest

from repro.cli import main
from repro.errors import ReproError
from repro.sources import load_source

ROOT = Path(__file__).resolve().parents[1]
DEMO = str(ROOT / "params" / "demo.yaml")
GOOD_ROW = {"prompt": "Name a prime number.", "candidates": ["Seven.", "Eight."]}


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


def broken_jsonl(tmp: Path) -> Path:
    """A good row, a blank line, then a row cut short (line 3)."""
    return write(tmp / "bad.jsonl", json.dumps(GOOD_ROW) + "\n\n" + '{"prompt": "x", "candidates": ["a",\n')


def truncated_parquet(tmp: Path) -> Path:
    path = tmp / "rows.parquet"
    datasets.Dataset.from_list([{"prompt": f"p{i}" * 50, "resp0": "a", "resp1": "b"} for i in range(200)]).to_parquet(path)
    data = path.read_bytes()
    return write(path, data[: len(data) // 2])


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
    # repro run: parameters, all checked before any notebook runs
    Case("unknown key in --set", lambda t: run(t, "--set", "limit=3", "--set", "mini_idx=1"),
         r"Unknown parameter 'mini_idx' in --set mini_idx=1\. Did you mean 'mini_index'\?", after=nothing_written),
    Case("unknown key in the file", lambda t: run(t, params=str(write(t / "p.yaml", "mini_idx: 1\n"))),
         r"Unknown parameter 'mini_idx' in \S*p.yaml\. Did you mean 'mini_index'\?", after=nothing_written),
    Case("chunk_size 0", lambda t: run(t, params=str(write(t / "p.yaml", "chunk_size: 0\n"))),
         r"Invalid construct parameters in \S*p.yaml:\n  - chunk_size: must be >= 1 \(got 0\)\nFix the value",
         after=nothing_written),
    Case("batch_tokens 0 from --set", lambda t: run(t, "--set", "batch_tokens=0"),
         r"  - batch_tokens \(from --set\): must be >= 1 \(got 0\)\n", after=nothing_written),
    Case("limit 0", lambda t: run(t, "--set", "limit=0"), r"  - limit \(from --set\): must be >= 1", after=nothing_written),
    Case("negative chunk_size", lambda t: run(t, "--set", "chunk_size=-5"),
         r"  - chunk_size \(from --set\): must be >= 1 \(got -5\)\n", after=nothing_written),
    Case("a column named twice", lambda t: run(t, "--set", "candidate_columns=[resp0, resp0]"),
         r"candidate_columns \(from --set\): names column\(s\) \['resp0'\] more than once \(got \['resp0', 'resp0'\]\)"),
    # the source loader itself
    Case("jsonl source with a broken line",
         lambda t: lambda: load_source(str(broken_jsonl(t))), r"line 3 of \S*bad.jsonl is not valid JSON"),
    Case("truncated parquet source", lambda t: lambda: load_source(str(truncated_parquet(t))),
         r"source '\S*rows.parquet' could not be read as parquet .*truncated or damaged\. Write it again"),
    Case("empty jsonl source", lambda t: lambda: load_source(str(write(t / "e.jsonl", ""))), r"is an empty file"),
    # repro score: output and input checked before the model is loaded
    Case("score --output is a folder", lambda t: score(t, output=(t / "outdir").mkdir() or t / "outdir"),
         r"--output \S*outdir is a folder; give a file path for the scored rows, e.g\. --output \S*outdir/scored.jsonl",
         after=no_file_in("outdir")),
    Case("score --output inside a file", lambda t: score(t, output=write(t / "f", "x") / "out.jsonl"),
         r"--output \S*f/out.jsonl lies inside \S*f, which is a file"),
    Case("score an empty input", lambda t: score(t, input=write(t / "empty.jsonl", "\n\n")),
         r"--input \S*empty.jsonl holds no rows .*nothing to score\. Give a jsonl file", after=nothing_written),
    Case("score a missing input", lambda t: score(t, input=t / "nope.jsonl"),
         r"--input \S*nope.jsonl does not exist; check the path .*give an existing jsonl file", after=nothing_written),
    Case("score an input that is a folder", lambda t: score(t, input=t),
         r"--input \S+ is a folder; give the path of a jsonl file in it", after=nothing_written),
    Case("score --batch-tokens 0", lambda t: score(t, "--batch-tokens", "0"), r"--batch-tokens 0 must be >= 1\.",
         after=nothing_written),
    Case("score --chunk-size 0", lambda t: score(t, "--chunk-size", "0"), r"--chunk-size 0 must be >= 1\."),
    # repro score: bad lines, each named by its line number
    *[Case(f"score line: {why}", lambda t, line=line: score(t, input=write(t / "in.jsonl", json.dumps(GOOD_ROW) + "\n" + line + "\n")),
           message, after=nothing_written) for why, line, message in [
        ("one candidate", '{"prompt": "p", "candidates": ["only one"]}', r"line 2 of .*at least two strings"),
        ("no prompt", '{"candidates": ["a", "b"]}', r"line 2 of .*'prompt' is missing; expected a string"),
        ("a null candidate", '{"prompt": "p", "candidates": ["a", null]}', r"line 2 of .*at least two strings"),
        ("a list, not an object", '["p", ["a", "b"]]', r"line 2 of .*JSON list; expected an object"),
        ("broken JSON", '{"prompt": "p", "candidates": ', r"line 2 of \S*in.jsonl is not valid JSON .*fix or remove that line"),
    ]],
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
    assert re.search(r"Notebook 01_construct failed at cell .*line 3 of \S*bad.jsonl is not valid JSON .*fix or remove "
                     r"that line", message, flags=re.S), message
    assert "Traceback" not in message
