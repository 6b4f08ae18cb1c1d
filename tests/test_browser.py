"""The notebooks as a new user meets them: JupyterLab on 127.0.0.1 at the project root, driven by headless Chromium.

A copy of the project layout (notebooks/, params/, pyproject.toml) in a temporary folder is the project root,
so nothing is written into the repository; a demo run is built there first (`runs/demo`, fewer rows). The
kernel imports this checkout's `repro` (PYTHONPATH). Chromium is Debian's package, driven by playwright
through `executable_path` (no browser download). Screenshots go to $REPRO_BROWSER_SCREENSHOTS when set.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import run_env

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("REPRO_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions"]
KERNEL_DISPLAY_NAME = "Python (repro)"
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"  # the notebook in the active tab
DEMO_ROWS = 8  # the demo run the notebooks read: enough rows for every figure, quick to score
# What a user types is `runs/demo`, relative to the project root. That holds once the path rule lands (relative
# paths resolved against the project root, here REPRO_HOME = the copy's root); until then the kernel runs in
# notebooks/ and the test types the absolute path. The switch is this one line: TYPE_RELATIVE_PATHS = True.
TYPE_RELATIVE_PATHS = True

pytestmark = [pytest.mark.browser]

if not CHROMIUM.exists():
    pytest.skip(f"real-browser test skipped: Chromium not found at {CHROMIUM} (install Debian's `chromium` "
                f"package: apt-get install -y chromium; .ci/run does)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="real-browser test skipped: playwright is not installed "
                                                           "(it is a dev dependency: pip install -e '.[dev]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def project(repro_run, tmp_path_factory):
    """A project root with the notebooks, params and a demo run in runs/demo."""
    root = tmp_path_factory.mktemp("project")
    for name in ("notebooks", "params"):
        shutil.copytree(ROOT / name, root / name)
    shutil.copy2(ROOT / "pyproject.toml", root / "pyproject.toml")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = repro_run("params/demo.yaml", "--out", root / "runs" / "demo", "--set", f"limit={DEMO_ROWS}", cwd=root,
                     env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return root


@pytest.fixture(scope="module")
def jupyterlab(project, tmp_path_factory):
    """JupyterLab on a free 127.0.0.1 port at the project root, no token; yields its base URL."""
    from repro.cli.run import ensure_kernel

    ensure_kernel()  # the set-up registers it; a bare environment gets it here
    state = tmp_path_factory.mktemp("lab-state")
    port = _free_port()
    news = state / "settings" / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    news.parent.mkdir(parents=True)
    news.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))  # no pop-up asking about news
    env = run_env({**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
                   "REPRO_HOME": str(project), "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"),
                   "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"), "JUPYTER_RUNTIME_DIR": str(state / "runtime")})
    jupyter = Path(sys.executable).with_name("jupyter")
    log = open(state / "lab.log", "w")
    server = subprocess.Popen(
        [str(jupyter), "lab", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
         "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={project}",
         "--KernelManager.transport_encryption=auto", "--LabApp.news_url=",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
        cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
            assert server.poll() is None, (state / "lab.log").read_text()
        else:
            pytest.fail("JupyterLab did not start: " + (state / "lab.log").read_text()[-3000:])
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def browser(jupyterlab):
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    yield page
    context.close()


def _shot(page, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("REPRO_BROWSER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=False)


def _open(page, lab: str, notebook: str) -> None:
    """Open a notebook; it must start the project's kernel with no kernel picker."""
    page.goto(f"{lab}/lab/tree/notebooks/{notebook}?reset")  # ?reset: a fresh workspace, this notebook alone
    page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=120_000)
    page.wait_for_function(f"() => {{ const k = document.querySelector('{PANEL} .jp-Toolbar-kernelName');"
                           f" return k && k.textContent.includes({json.dumps(KERNEL_DISPLAY_NAME)}); }}", timeout=120_000)
    assert page.locator(".lm-DockPanel-tabBar .lm-mod-current .lm-TabBar-tabLabel").inner_text() == notebook
    assert page.locator(".jp-Dialog").count() == 0, "a dialog (kernel picker?) opened with the notebook"
    _wait_idle(page, 180_000)


def _wait_idle(page, timeout_ms: int) -> None:
    page.wait_for_function(
        f"() => {{ const s = document.querySelector('{PANEL} .jp-Notebook-ExecutionIndicator');"
        " return s && s.getAttribute('data-status') === 'idle'; }", timeout=timeout_ms)


def _append_to_parameters(page, lines: list[str]) -> None:
    """Type assignments at the end of the cell tagged `parameters`, as a user would."""
    index = _parameters_cell_index(page)
    cell = page.locator(f"{PANEL} .jp-Cell").nth(index)
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    for line in lines:
        page.keyboard.press("Enter")
        page.keyboard.type(line)


def _parameters_cell_index(page) -> int:
    cells = page.locator(f"{PANEL} .jp-Cell")
    for i in range(cells.count()):
        if "# Parameters" in cells.nth(i).inner_text() or cells.nth(i).locator("text=run_name =").count():
            return i
    raise AssertionError("no parameters cell found")


def _run_all(page, project: Path, notebook: str, timeout_s: float) -> list[dict]:
    """Run All Cells from the Run menu; wait until every code cell has run; return the saved outputs."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    path = project / "notebooks" / notebook
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(2)
        if page.locator(f"{PANEL} .jp-Notebook-ExecutionIndicator").get_attribute("data-status") != "idle":
            continue
        page.keyboard.press("Escape")
        page.keyboard.press("Control+s")  # the notebook as the user sees it, read back from disk
        time.sleep(1)
        cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
        failed = any(o["output_type"] == "error" for c in cells for o in c.get("outputs", []))
        if failed or all(c.get("execution_count") for c in cells):
            return [o for c in cells for o in c.get("outputs", [])]
    raise AssertionError(f"{notebook} did not finish within {timeout_s} s")


def _errors(outputs: list[dict]) -> list[str]:
    return [o.get("ename", "") + ": " + o.get("evalue", "") for o in outputs if o["output_type"] == "error"]


def _loaded_images(page, selector: str) -> tuple[int, int]:
    """(images under `selector` that rendered, images that did not)."""
    return page.eval_on_selector_all(
        selector, "imgs => [imgs.filter(i => i.complete && i.naturalWidth > 0).length,"
                  " imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length]")


def _run_dir(project: Path, name: str) -> str:
    return f"runs/{name}" if TYPE_RELATIVE_PATHS else str(project / "runs" / name)


def test_each_notebook_opens_with_the_projects_kernel(page, jupyterlab, tmp_path):
    for notebook in ("01_construct.ipynb", "02_analyze.ipynb", "03_card.ipynb"):
        _open(page, jupyterlab, notebook)
        assert KERNEL_DISPLAY_NAME in page.locator(f"{PANEL} .jp-Toolbar-kernelName").inner_text()
    _shot(page, "open_03_card", tmp_path)


def test_analyze_runs_all_cells_and_renders_six_figures(page, jupyterlab, project, tmp_path):
    _open(page, jupyterlab, "02_analyze.ipynb")
    _append_to_parameters(page, [f"run_dir = '{_run_dir(project, 'demo')}'"])
    outputs = _run_all(page, project, "02_analyze.ipynb", 300)
    _shot(page, "02_analyze_top", tmp_path)
    page.locator(f"{PANEL} .jp-Cell").last.scroll_into_view_if_needed()
    _shot(page, "02_analyze_figures", tmp_path)
    assert _errors(outputs) == []
    assert not [o for o in outputs if o.get("name") == "stderr"], "stderr output in 02_analyze"
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    loaded, broken = _loaded_images(page, f"{PANEL} .jp-OutputArea-output img")
    assert (loaded, broken) == (6, 0)


def test_card_preview_shows_its_images(page, jupyterlab, project, tmp_path):
    _open(page, jupyterlab, "03_card.ipynb")
    _append_to_parameters(page, [f"run_dir = '{_run_dir(project, 'demo')}'"])
    outputs = _run_all(page, project, "03_card.ipynb", 300)
    preview = page.locator(f"{PANEL} .jp-OutputArea-output.jp-RenderedMarkdown img").first
    preview.scroll_into_view_if_needed()
    _shot(page, "03_card_preview", tmp_path)
    assert _errors(outputs) == []
    loaded, broken = _loaded_images(page, f"{PANEL} .jp-RenderedMarkdown img")
    figures = len(list((project / "runs" / "demo" / "dataset" / "figures").glob("*.png")))
    assert figures == 6 and (loaded, broken) == (2 * figures, 0)  # English and Chinese halves
    assert "](figures/" in (project / "runs" / "demo" / "dataset" / "README.md").read_text()  # the file keeps links


def test_construct_runs_all_cells_with_widget_progress(page, jupyterlab, project, tmp_path):
    _open(page, jupyterlab, "01_construct.ipynb")
    _append_to_parameters(page, ["scorer_model = 'builtin:tiny-pairrm'", f"limit = {DEMO_ROWS}",
                                 f"run_dir = '{_run_dir(project, 'explore')}'"])
    outputs = _run_all(page, project, "01_construct.ipynb", 600)
    page.locator(f"{PANEL} .jp-Cell").last.scroll_into_view_if_needed()
    _shot(page, "01_construct_end", tmp_path)
    assert _errors(outputs) == []
    bars = page.locator(".jp-Notebook .jupyter-widgets", has_text="PairRM scoring")
    assert bars.count() >= 1, "no widget progress bar for scoring"
    bars.first.scroll_into_view_if_needed()
    _shot(page, "01_construct_scoring", tmp_path)
    pngs = [o["data"]["image/png"] for o in outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 2 and all(base64.b64decode(p)[:4] == b"\x89PNG" for p in pngs)
    manifest = json.loads((project / "runs" / "explore" / "manifest.json").read_text())
    assert manifest["counts"]["kept"] == DEMO_ROWS and manifest["scorer"]["stand_in"] is True
