"""Chapter 2 live in JupyterLab, the third way to read the book (`make lab`).

A JupyterLab from this environment (`.venv`, as `make lab` starts it) is
started on 127.0.0.1 with no token and empty user config, data, settings
and workspace folders (so nothing of the machine's own Jupyter set-up takes
part); its settings only render every cell (`windowingMode` "none", so that
cells out of view exist to be checked) and turn off autosave and the news
and update checks.  It serves a copy of chapter 2 with its outputs cleared,
so every widget on the page comes from this run.  Chromium opens it, runs
all cells and then checks what a reader sees:

- no cell failed, no widget says "Error displaying widget", and none fell
  back to its text repr (`TopoSortStepper(12 steps ...)`, which is what a
  JupyterLab without the environment's widget extensions shows);
- the steppers answer Next and Prev in the live page: a backward stepper
  and a topological-sort stepper change frame and come back;
- every exercise's "Why" (`<details class="why">`) is closed until its
  summary is clicked;
- no request leaves the machine.

Every wait is on a state, with room for a loaded machine.  Screenshots go
to `_build/screenshots/jupyterlab_*.png`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest
from playwright.sync_api import expect

from .conftest import DESKTOP, ROOT, SCREENSHOTS, WAIT_MS

pytestmark = pytest.mark.browser

NOTEBOOK = ROOT / "notebooks" / "02_topological_sort.ipynb"
STEPPERS = 5  # as in the book (tests/browser/test_chapter2_widgets.py)
START_S = 180  # JupyterLab up, the notebook open, its kernel idle
RUN_S = 900  # every cell run (about a minute on a loaded 2-core machine)
SETTINGS = {
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyterlab/docmanager-extension/plugin": {"autosave": False},
    "@jupyterlab/apputils-extension/notification": {
        "checkForUpdates": False,
        "fetchNews": "false",
    },
}
REPR = re.compile(r"\b(\w*Stepper|NumberCheck|ChoiceCheck)\(")


def _wait(condition, seconds: float, what: str, proc, log: Path):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"JupyterLab exited ({proc.returncode}):\n{_tail(log)}")
        result = condition()
        if result:
            return result
        time.sleep(0.2)
    pytest.fail(f"JupyterLab: {what} within {seconds} s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


def _status_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "api/status", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def _port(info: Path) -> int | None:
    try:
        return json.loads(info.read_text()).get("port")
    except ValueError:  # still being written
        return None


def _stop(proc, url: str | None) -> None:
    """Shut the server down (it stops its kernels), then make sure."""
    if url and proc.poll() is None:
        try:
            request = urllib.request.Request(url + "api/shutdown", method="POST")
            urllib.request.urlopen(request, timeout=10).close()
        except OSError:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # its own session: it and its kernel
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """(base URL, notebook name) of a JupyterLab serving chapter 2's copy."""
    lab = Path(sys.executable).with_name("jupyter-lab")
    if not lab.exists():
        pytest.fail(f"{lab} is missing: install requirements.txt (`make book`)")
    tmp = tmp_path_factory.mktemp("jupyterlab")
    dirs = {
        name: tmp / name
        for name in ("root", "config", "data", "runtime", "settings", "work")
    }
    for d in dirs.values():
        d.mkdir()
    for plugin, values in SETTINGS.items():
        path = dirs["settings"] / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    nbformat.write(nb, dirs["root"] / NOTEBOOK.name)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["work"]),
    )
    args = [
        str(lab),
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port=0",  # the OS picks; read back from the runtime file
        "--ServerApp.port_retries=0",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        "--ServerApp.disable_check_xsrf=True",
        "--LabApp.expose_app_in_browser=True",
        f"--ServerApp.root_dir={dirs['root']}",
    ]
    if os.geteuid() == 0:
        args.append("--allow-root")
    log = tmp / "jupyterlab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            args,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = None
    try:
        info = _wait(
            lambda: next(dirs["runtime"].glob(f"jpserver-{proc.pid}.json"), None),
            START_S,
            "no server file",
            proc,
            log,
        )
        port = _wait(
            lambda: _port(info),
            START_S,
            "no port in the server file",
            proc,
            log,
        )
        url = f"http://127.0.0.1:{port}/"
        _wait(lambda: _status_ok(url), START_S, "no answer", proc, log)
        yield url, NOTEBOOK.name, log, proc
    finally:
        _stop(proc, url)
        shutil.rmtree(dirs["root"] / ".ipynb_checkpoints", ignore_errors=True)


NOTEBOOK_JS = "window.jupyterapp?.shell.currentWidget"
KERNEL_IDLE = f"""() => {{
    const nb = {NOTEBOOK_JS};
    return nb?.content?.widgets?.length > 0
        && nb.sessionContext?.session?.kernel?.status === 'idle'; }}"""
# every code cell has run (or one failed), and the kernel is idle again
RUN_DONE = f"""() => {{
    const nb = {NOTEBOOK_JS};
    const code = nb.content.widgets.filter(c => c.model.type === 'code');
    const failed = code.some(c => c.model.outputs.toJSON()
        .some(o => o.output_type === 'error'));
    const ran = code.every(c => c.model.executionCount !== null);
    return (failed || ran)
        && nb.sessionContext.session.kernel.status === 'idle'; }}"""
ERRORS = f"""() => {NOTEBOOK_JS}.content.widgets
    .filter(c => c.model.type === 'code')
    .flatMap(c => c.model.outputs.toJSON())
    .filter(o => o.output_type === 'error')
    .map(o => o.ename + ': ' + o.evalue)"""


def _frame(stepper) -> dict:
    return {
        "index": stepper.get_attribute("data-index"),
        "caption": stepper.locator(".bl-stepper-caption").inner_text(),
        "graph": stepper.locator(".bl-stepper-graph svg").inner_html(),
        "info": stepper.locator(".bl-stepper-info").inner_text(),
    }


def _step(stepper, action: str, index: str) -> dict:
    stepper.locator(f"button[data-action={action}]").click()
    expect(stepper).to_have_attribute("data-index", index, timeout=WAIT_MS)
    return _frame(stepper)


def test_chapter2_runs_and_its_steppers_step_in_jupyterlab(browser, jupyterlab):
    url, name, log, proc = jupyterlab
    context = browser.new_context(viewport=DESKTOP)
    external: list[str] = []

    def route(r):
        if urlparse(r.request.url).hostname == "127.0.0.1":
            r.continue_()
        else:
            external.append(r.request.url)
            r.abort()

    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)  # a loaded machine renders slowly
        page.route("**/*", route)
        page.goto(f"{url}lab/tree/{name}", wait_until="domcontentloaded")
        page.wait_for_function(KERNEL_IDLE, timeout=START_S * 1000, polling=500)
        page.evaluate(
            "window.jupyterapp.commands.execute('notebook:run-all-cells')"
        )
        page.wait_for_function(RUN_DONE, timeout=RUN_S * 1000, polling=1000)
        assert page.evaluate(ERRORS) == [], f"cells failed:\n{_tail(log)}"

        notebook = page.locator(".jp-NotebookPanel .jp-Notebook")
        steppers = notebook.locator(".bl-stepper")
        expect(steppers).to_have_count(STEPPERS, timeout=WAIT_MS)
        expect(notebook.locator(".bl-check")).not_to_have_count(
            0, timeout=WAIT_MS
        )
        text = notebook.inner_text()
        assert "Error displaying widget" not in text
        outputs = notebook.locator(".jp-OutputArea-output").all_inner_texts()
        reprs = [t[:60] for t in outputs if REPR.search(t)]
        assert not reprs, f"widgets shown as their text repr: {reprs}"

        backward = steppers.nth(1)  # BackwardStepper on relu(a*b + d)
        backward.scroll_into_view_if_needed()
        expect(backward.locator(".bl-stepper-title")).to_contain_text(
            "Backward pass", timeout=WAIT_MS
        )
        start = _frame(backward)
        assert start["index"] == "0"
        one = _step(backward, "next", "1")
        two = _step(backward, "next", "2")
        assert one["graph"] != start["graph"] and two["graph"] != one["graph"]
        assert two["caption"] != one["caption"]
        page.mouse.move(0, 0)
        backward.screenshot(path=str(_shot("jupyterlab_backward_stepper")))
        page.screenshot(path=str(_shot("jupyterlab_chapter2")))
        assert _step(backward, "prev", "1") == one

        topo = steppers.first
        topo.scroll_into_view_if_needed()
        start = _frame(topo)
        assert start["index"] == "0"
        one = _step(topo, "next", "1")
        two = _step(topo, "next", "2")
        assert two["caption"] != one["caption"] != start["caption"]
        expect(topo.locator(".bl-stepper-caption")).to_contain_text(
            "visit e", timeout=WAIT_MS
        )
        assert _step(topo, "prev", "1") == one
        assert _step(topo, "prev", "0") == start
        topo.screenshot(path=str(_shot("jupyterlab_toposort_stepper")))

        whys = notebook.locator(".jp-RenderedMarkdown details.why")
        assert whys.count() >= 3, "chapter 2's exercise explanations"
        for k in range(whys.count()):
            summary = whys.nth(k).locator("> summary")
            expect(summary).to_have_text("Why", timeout=WAIT_MS)
            expect(whys.nth(k).locator("> p").first).to_be_hidden(timeout=WAIT_MS)
        first = whys.first
        first.locator("> summary").click()
        expect(first.locator("> p").first).to_be_visible(timeout=WAIT_MS)
        first.screenshot(path=str(_shot("jupyterlab_why_open")))
        assert not external, f"requests to other hosts: {external}"
    finally:
        context.close()


def _shot(name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
