"""Shared fixtures: real UltraFeedback rows (a committed fixture), tiny offline checkpoints, one demo run per pytest
run; the rule that puts a test in the heavy tier; the skip guard."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# Tests never reach the hub (these machines cannot): fail fast instead of retrying the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")
# Never the checkout's row cache (repro.cache): rows another run scored in other batches would change the last bits
# of this run's scores. One per pytest process for fixtures built once; each test gets its own (own_row_cache).
PROCESS_ROW_CACHE = os.environ["REPRO_ROW_CACHE"] = tempfile.mkdtemp(prefix="repro-row-cache-")
# A suite started in the background of a script (`bash .ci/run &`) inherits Ctrl-C ignored, which repro keeps so (as
# nohup's SIGHUP): the tests that press Ctrl-C on their own process need Python's own handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Under pytest-xdist (make test, make test-fast) the workers share the cores: one torch/BLAS thread each, set
# before torch is imported; the kernels, torchrun workers and subprocesses they start inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from filelock import FileLock
from markdown_it import MarkdownIt

from repro.cli.run import skip_rfc3987_grammar

skip_rfc3987_grammar()  # as `repro run` does: nbformat, which test modules import, 1.3 s faster in every worker

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# 200 train / 100 test real rows, chosen by fixtures/ultrafeedback/select_rows.py (see PROVENANCE.md there)
ULTRAFEEDBACK = FIXTURES / "ultrafeedback"
# the only reasons a test may skip: what a machine cannot have (pyproject.toml registers these markers)
ALLOWED_SKIP_MARKERS = ("real_weights", "gpu", "vllm")
DEMO_PARAMS = ROOT / "params" / "demo.yaml"


def html_elements(markdown: str) -> list[str]:
    """The raw HTML that markdown-it (CommonMark and tables, HTML on, as JupyterLab's Markdown) passes on from
    `markdown`."""
    tokens = MarkdownIt().enable("table").parse(markdown)
    tokens += [child for token in tokens for child in token.children or []]
    return [token.content for token in tokens if token.type in ("html_block", "html_inline")]


def shown_text(markdown: str) -> str:
    """The text a reader sees of `markdown` so rendered: each block's text and code spans, a line each."""
    words = {"text": None, "code_inline": None, "softbreak": " "}
    return "\n".join("".join(words[c.type] or c.content for c in t.children if c.type in words)
                     for t in MarkdownIt().enable("table").parse(markdown) if t.type == "inline")


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def hub_source(hub: Path, commit: str, replace: tuple[str, str] = ("", "")) -> None:
    """Hub dataset someone/rows at `commit` in the hub cache `hub`, the demo's prompts (text replaced as `replace`
    says), the cache's newest (refs/main)."""
    import datasets

    from repro.dataset_io import write_split

    rows = [json.loads(line.replace(*replace)) for line in
            (ROOT / "src" / "repro" / "data" / "demo_prompts.jsonl").read_text().splitlines()]
    snapshot = hub / "datasets--someone--rows" / "snapshots" / commit
    write_split(datasets.Dataset.from_list(rows), snapshot, "train_prefs")
    (snapshot.parents[1] / "refs").mkdir(exist_ok=True)
    (snapshot.parents[1] / "refs" / "main").write_text(commit)


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    """The committed folder of real UltraFeedback rows: train_prefs.jsonl (200 rows), test_prefs.jsonl (100)."""
    return ULTRAFEEDBACK


@pytest.fixture(scope="session")
def train_rows(sample_dir: Path) -> list[dict]:
    """200 real UltraFeedback train rows (H4 schema), with ties, identical pairs, an empty response, long rows."""
    return read_jsonl(sample_dir / "train_prefs.jsonl")


@pytest.fixture(scope="session")
def test_rows(sample_dir: Path) -> list[dict]:
    """100 real UltraFeedback test rows, disjoint from train_rows."""
    return read_jsonl(sample_dir / "test_prefs.jsonl")


@pytest.fixture(scope="session")
def tiny_pairrm_dir(tmp_path_factory) -> Path:
    """A tiny random PairRM checkpoint in llm-blender's layout, built offline, deterministically."""
    from repro.scorers.tiny import build_tiny_pairrm

    return build_tiny_pairrm(tmp_path_factory.mktemp("tiny-pairrm"))


@pytest.fixture(autouse=True)
def own_row_cache(tmp_path_factory, monkeypatch):
    """Each test its own row cache (repro.cache), never the checkout's cache/: a row one test scored in other
    batches must not reach another test's bitwise checks (runs started in a subprocess inherit it)."""
    monkeypatch.setenv("REPRO_ROW_CACHE", str(tmp_path_factory.mktemp("row-cache")))


# ---------------------------------------------------------------------------------------------
# the two tiers: one rule. A test is heavy (left out of `make test-fast`) when it uses one of these fixtures,
# which run notebooks, `repro run`, torchrun, a browser, a training loop or a wheel build. Tests reach that work
# only through them (tests/test_tiers.py checks the test files for it).
# ---------------------------------------------------------------------------------------------
HEAVY_FIXTURES = {
    "repro_run": "runs `repro run` (papermill, the notebooks) in a subprocess",
    "run_notebook": "executes a notebook through papermill",
    "papermill_cli": "runs the papermill command in a subprocess",
    "demo_run": "one `repro run params/demo.yaml`, shared by the tests that read it",
    "demo_run_copy": "a copy of the shared demo run, for a test that changes it",
    "torchrun_processes": "launches torchrun workers",
    "jupyterlab": "JupyterLab driven by headless Chromium",
    "trl_policy": "trains TRL's DPOTrainer",
    "wheel": "builds and installs the wheel",
    "kill_during_scoring": "runs a scoring job in a subprocess and kills it with SIGKILL",
    "mid_size_shape": "builds and runs PairRM at the benchmark's mid size (hidden 384, 6 layers)",
    "kernel": "starts a Jupyter kernel (jupyter_client), as JupyterLab does, and runs cells in it",
}
# The order the modules are handed to xdist's workers (make test: --dist loadscope --no-loadscope-reorder): the
# longest first, so the many short ones fill in at the end and both workers finish together. The seconds are each
# module's total of one run's test durations (`make durations` writes them); a module missing there counts as
# DEFAULT_SECONDS per heavy test. A stale file only costs time, never a result.
DURATIONS = Path(__file__).resolve().parent / "durations.json"
DEFAULT_SECONDS = 10.0


def pytest_addoption(parser):
    parser.addoption("--store-durations", action="store_true",
                     help=f"write each test module's total duration to {DURATIONS.name} (make durations)")


def pytest_collection_modifyitems(config, items):
    """Marks every test that uses a heavy fixture (directly or through another fixture) `heavy`; longest modules
    first (DURATIONS)."""
    heavy: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        heavy.setdefault(module, 0)
        if set(item.fixturenames) & HEAVY_FIXTURES.keys():
            item.add_marker(pytest.mark.heavy)
            heavy[module] += 1
    known = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    seconds = {m: known.get(m, DEFAULT_SECONDS * n) for m, n in heavy.items()}
    items.sort(key=lambda item: -seconds[item.nodeid.split("::")[0]])  # stable: a module keeps its own order


_durations: dict[str, float] = {}  # module -> seconds of this run (pytest_runtest_logreport, below)


def _store_durations(config) -> None:
    if config.getoption("store_durations") and not os.environ.get("PYTEST_XDIST_WORKER"):
        DURATIONS.write_text(json.dumps({m: round(s, 1) for m, s in sorted(_durations.items())}, indent=1) + "\n")


def shared_tmp(tmp_path_factory) -> Path:
    """A folder of this pytest run that its xdist workers share (under xdist each worker has its own basetemp)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture
def kernel():
    """A function starting a kernel as JupyterLab does (python3, this checkout's src first): its (manager, client);
    each shut down at the test's end."""
    from jupyter_client.manager import start_new_kernel

    started = []

    def start():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
        started.append(start_new_kernel(kernel_name="python3", env=env,
                                        extra_arguments=["--IPKernelApp.log_level=CRITICAL"]))
        return started[-1]

    yield start
    for km, kc in started:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture(autouse=True)
def no_kernel_in_a_light_test(request, monkeypatch):
    """The rule at run time: a test not marked heavy that starts a Jupyter kernel in this process (jupyter_client's
    start_new_kernel or a KernelManager, nbclient, papermill: each through LocalProvisioner.pre_launch) fails, before
    the kernel starts; one started in a subprocess is caught in the tests' text (tests/test_tiers.py)."""
    if request.node.get_closest_marker("heavy") is None:
        async def refuse(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} starts a Jupyter kernel without a heavy fixture, so make test-fast "
                        f"would run it: start it with the `kernel` fixture (papermill: `run_notebook`).", pytrace=False)
        monkeypatch.setattr("jupyter_client.provisioning.LocalProvisioner.pre_launch", refuse)


@pytest.fixture(scope="session")
def repro_run():
    """`repro run ARGS...` in a subprocess from the repository root (or `cwd`): the CompletedProcess."""
    def run(*args, cwd: Path = ROOT, env: dict | None = None, timeout: int = 900) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "repro.cli", "run", *map(str, args)], cwd=cwd,
                              env=run_env(env), capture_output=True, text=True, timeout=timeout)
    return run


def run_env(env: dict | None) -> dict:
    """The environment of a subprocess that runs notebooks (`repro run`, papermill, JupyterLab): one started by a
    module or session fixture (the process's row cache, not a test's own) gets a row cache of its own, or its bits
    would depend on which fixtures ran before it in this worker."""
    env = dict(os.environ if env is None else env)
    if env.get("REPRO_ROW_CACHE") == PROCESS_ROW_CACHE:
        env["REPRO_ROW_CACHE"] = tempfile.mkdtemp(prefix="repro-row-cache-")
    return env


@pytest.fixture(scope="session")
def papermill_cli():
    """`papermill ARGS...` in a subprocess from the repository root (or `cwd`): the CompletedProcess."""
    def run(*args, cwd: Path = ROOT, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "papermill", *map(str, args)], cwd=cwd, env=run_env(env),
                              capture_output=True, text=True, timeout=timeout)
    return run


@pytest.fixture(scope="session")
def run_notebook():
    """papermill.execute_notebook (in this process, with the project's kernel unless `kernel_name` says another)."""
    import papermill

    def run(notebook, output, **kwargs):
        kwargs.setdefault("kernel_name", "repro")
        kwargs.setdefault("progress_bar", False)
        return papermill.execute_notebook(str(notebook), str(output), **kwargs)
    return run


@pytest.fixture(scope="session")
def demo_run(repro_run, tmp_path_factory) -> Path:
    """The run directory `make demo` writes (`repro run params/demo.yaml`), made once per pytest run (the first
    xdist worker to need it builds it, the others wait for it): read it only; a test that changes a run takes
    `demo_run_copy`."""
    shared = shared_tmp(tmp_path_factory)
    out = shared / "demo" / "runs" / "demo"
    with FileLock(str(shared / "demo.lock")):
        manifest = out / "manifest.json"
        if not (manifest.is_file() and json.loads(manifest.read_text()).get("status") == "complete"):
            proc = repro_run(DEMO_PARAMS, "--out", out)
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture
def demo_run_copy(demo_run, tmp_path) -> Path:
    """A copy of the shared demo run that the test may change."""
    return Path(shutil.copytree(demo_run, tmp_path / "runs" / "demo"))


@pytest.fixture
def stubbed_notebooks(monkeypatch) -> list[str]:
    """`repro run` with papermill stubbed (each notebook's output `{}`, the kernel taken as registered): the names of
    the notebooks run, in order."""
    from repro.cli import family, run as runner

    executed: list[str] = []
    for module in (runner, family):  # (family's is run's, imported by name: one imported now kept the stub after)
        monkeypatch.setattr(module, "ensure_kernel", lambda name=runner.KERNEL_NAME: name)
    monkeypatch.setattr("papermill.execute_notebook",
                        lambda src, out, **kw: executed.append(Path(out).stem) or Path(out).write_text("{}"))
    return executed


@pytest.fixture
def offline_hub_rows(tmp_path, monkeypatch) -> Path:
    """Offline, with a hub cache of its own holding someone/rows at commit a…a (hub_source): the cache."""
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    hub_source(tmp_path / "hub", "a" * 40)
    return tmp_path / "hub"


PINNED, MAIN = "0123456789abcdef" * 2 + "01234567", "fedcba9876543210" * 2 + "fedcba98"


@pytest.fixture
def two_template_hub(tmp_path, monkeypatch) -> Path:
    """Offline, with a hub cache of its own holding the model fakeorg/policy (the tiny stand-in policy's files, no
    stand-in marker) at commit PINNED and at MAIN (refs/main), whose chat template differs: the repo's folder."""
    from huggingface_hub import constants

    from repro.paths import STAND_IN_MARKER
    from repro.scorers.tiny_policy import build_tiny_policy

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--fakeorg--policy"
    for commit in (PINNED, MAIN):
        shutil.copytree(build_tiny_policy(), repo / "snapshots" / commit,
                        ignore=shutil.ignore_patterns(STAND_IN_MARKER))
    (repo / "snapshots" / MAIN / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ '### ' + m['role'] + ': ' + m['content'] + '\\n' }}{% endfor %}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(MAIN)
    return repo


@pytest.fixture
def kill_during_scoring():
    """killed_run.kill_while_scoring_the_third_chunk: a scoring job in a subprocess, SIGKILLed in its third chunk."""
    from killed_run import kill_while_scoring_the_third_chunk

    return kill_while_scoring_the_third_chunk


@pytest.fixture(scope="session")
def mid_size_shape() -> dict:
    """The shape of `repro bench`'s mid-size PairRM network (a model large enough to show real batching effects)."""
    from repro.cli.bench import harness

    return dict(harness().MODEL_SIZES["mid"])


@pytest.fixture
def torchrun_processes() -> int:
    """How many torchrun workers a test launches (gloo on CPU)."""
    return 2


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module's tiny models: on shared CI cores extra threads only spin (5x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------------------------------------
# the skip guard: with REPRO_FORBID_SKIPS=1 (.ci/run sets it) any skip without an allowed marker fails the run
# ---------------------------------------------------------------------------------------------
_forbidden_skips: list[tuple[str, str]] = []


def _skip_reason(report) -> str:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    return reason.removeprefix("Skipped: ")


def pytest_runtest_logreport(report):
    """Adds the report's time to its module's (make durations); collects skipped tests that carry none of
    ALLOWED_SKIP_MARKERS (an expected failure is not a skip)."""
    module = report.nodeid.split("::")[0]
    _durations[module] = _durations.get(module, 0.0) + report.duration
    if report.skipped and not hasattr(report, "wasxfail") and not any(m in report.keywords for m in ALLOWED_SKIP_MARKERS):
        _forbidden_skips.append((report.nodeid, _skip_reason(report)))


def pytest_collectreport(report):
    """A whole module skipped at collection (e.g. a module-level importorskip) counts too."""
    if report.skipped:
        _forbidden_skips.append((report.nodeid, _skip_reason(report)))


def _skips_forbidden() -> bool:
    return os.environ.get("REPRO_FORBID_SKIPS", "") not in ("", "0")


def pytest_terminal_summary(terminalreporter):
    """Lists the skips that are not allowed, and what to do about them."""
    if _skips_forbidden() and _forbidden_skips:
        terminalreporter.section("skips not allowed (REPRO_FORBID_SKIPS=1)", red=True)
        terminalreporter.line(f"Only tests marked {', '.join(ALLOWED_SKIP_MARKERS)} may skip. These skipped: put what "
                              "they need in the repository or build it in the test (mark a test only if it needs "
                              "real weights, a GPU or vLLM):")
        for nodeid, reason in _forbidden_skips:
            terminalreporter.line(f"  {nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    """Writes the modules' durations when asked; a run that would pass fails instead when a skip was not allowed."""
    _store_durations(session.config)
    if _skips_forbidden() and _forbidden_skips and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
