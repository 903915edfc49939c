"""The chapters live in JupyterLab, the third way to read the book, started
as a reader starts it: `make lab`, in a copy of the repository, as the
machine's user (root here, as in containers and CI).

`make lab` runs with empty user config, data, settings and workspace
folders (so nothing of the machine's own Jupyter set-up takes part); the
settings only render every cell (`windowingMode` "none", so that cells out
of view exist to be checked) and turn off autosave and the news and update
checks.  The copy shares this checkout's `.venv` (a symlink; the files keep
their times, so `make` installs nothing).  Chromium then checks:

- chapters 2 and 6, opened and left alone, are not marked modified once
  their stored widgets are restored (the widget manager marked every
  notebook modified about two seconds after it opened: scripts/lab's
  extension fixes), and saved they change no byte (they are stored in the
  form JupyterLab writes, scripts/lab_form.py), nor are they modified again
  after the save;
- at first open, with nothing run, chapter 2's stored widgets are live: a
  stepper answers Next and Prev, and a number self-check takes its answer
  with Enter (the notebooks are trusted by `make lab`; an untrusted one
  shows the widgets' text reprs, `TopoSortStepper(12 steps ...)`);
- a notebook with every kind of widget and collapsed block (the browser
  tests' demo notebook, its outputs cleared) runs top to bottom: no cell
  fails, no widget says "Error displaying widget" or falls back to its text
  repr, the live stepper steps, and its exercise's "Why" is closed until
  clicked; saved, and opened again with a new kernel, its stepper still
  works (the widget state is saved with it: scripts/lab).  The chapters
  themselves run in nbval, once per make test; running one here again would
  prove nothing more about JupyterLab;
- no request leaves the machine.

Every wait is on a state, with room for a loaded machine.  Screenshots go
to `_build/screenshots/jupyterlab_*.png`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from .conftest import DESKTOP, ROOT, SCREENSHOTS, WAIT_MS, elsewhere


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lab_form = _load("lab_form", ROOT / "scripts" / "lab_form.py")
extension_fixes = _load(
    "extension_fixes", ROOT / "scripts" / "lab" / "extension_fixes.py"
)


pytestmark = [pytest.mark.browser, pytest.mark.jupyterlab]

NOTEBOOK = ROOT / "notebooks" / "02_topological_sort.ipynb"
STEPPERS = 5  # as in the book (tests/browser/test_chapter2_widgets.py)
DEMO_NOTEBOOK = ROOT / "tests" / "browser" / "demo_book" / "conventions.ipynb"
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


#: Copied into the repository's copy: what `make lab` needs, not the
#: environment (linked), the build or the caches.
NOT_COPIED = shutil.ignore_patterns(
    ".git",
    ".venv",
    "_build",
    "__pycache__",
    ".*_cache",
    "*.egg-info",
    ".ipynb_checkpoints",
)
#: Where the run-all test's copy of chapter 2 (outputs cleared) lives in the
#: repository's copy: outside notebooks/, which `make lab` trusts.
LIVE = "live"
#: opened and saved: stored steppers and self-checks (2), solutions,
#: revealed versions, Deeper boxes and figures (6)
SAVED = ["02_topological_sort.ipynb", "06_gpt_backward.ipynb"]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """(base URL, the repository's copy, log, process) of `make lab` started
    in a copy of the repository."""
    if not (ROOT / ".venv" / "bin" / "jupyter-lab").exists():
        pytest.fail("jupyter-lab is missing from .venv: `make book` installs it")
    tmp = tmp_path_factory.mktemp("jupyterlab")
    repo = tmp / "repo"
    shutil.copytree(ROOT, repo, ignore=NOT_COPIED)  # copy2: times kept
    (repo / ".venv").symlink_to(ROOT / ".venv")
    dirs = {
        name: tmp / name
        for name in ("config", "data", "runtime", "settings", "work")
    }
    for d in dirs.values():
        d.mkdir()
    for plugin, values in SETTINGS.items():
        path = dirs["settings"] / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    nb = nbformat.read(DEMO_NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata.pop("widgets", None)
    (repo / LIVE).mkdir()
    nbformat.write(nb, repo / LIVE / DEMO_NOTEBOOK.name)
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(dirs["config"]),
        JUPYTER_DATA_DIR=str(dirs["data"]),
        JUPYTER_RUNTIME_DIR=str(dirs["runtime"]),
        JUPYTERLAB_SETTINGS_DIR=str(dirs["settings"]),
        JUPYTERLAB_WORKSPACES_DIR=str(dirs["work"]),
    )
    lab_args = " ".join(
        [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.port=0",  # the OS picks; read back from the runtime file
            "--ServerApp.port_retries=0",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            "--LabApp.expose_app_in_browser=True",
        ]
    )
    log = tmp / "jupyterlab.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            ["make", "--no-print-directory", "lab", f"LAB_ARGS={lab_args}"],
            cwd=repo,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = None
    try:
        info = _wait(
            lambda: next(dirs["runtime"].glob("jpserver-*.json"), None),
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
        yield url, repo, log, proc
    finally:
        _stop(proc, url)


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


@pytest.fixture(scope="module")
def lab_tab(browser):
    """(page, requests to other hosts) of the JupyterLab tab that this
    module's tests share: JupyterLab, loaded in a new context, costs a few
    CPU-seconds of Chromium's (its scripts fetched and compiled again), so
    the tests that follow the first open their notebooks in the same page,
    as a reader's double-click does."""
    context, page, external = _lab_page(browser)
    yield page, external
    context.close()


def _lab_page(browser):
    """(context, page, requests to other hosts) of a new JupyterLab tab."""
    context = browser.new_context(viewport=DESKTOP)
    external: list[str] = []
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)  # a loaded machine renders slowly
    # Chromium's proxy refuses them (conftest.CHROMIUM_ARGS)
    page.on("request", lambda r: elsewhere(r.url) and external.append(r.url))
    # what the page logged, for the message of a wait that runs out
    CONSOLE[page] = []
    page.on(
        "console",
        lambda m: (
            m.type in ("error", "warning")
            and CONSOLE[page].append(f"{m.type}: {m.text}")
        ),
    )
    page.on("pageerror", lambda e: CONSOLE[page].append(f"uncaught: {e}"))
    return context, page, external


#: page -> the errors and warnings its console showed
CONSOLE: dict = {}


def _wait_until_drawn(page, name: str, views: int) -> None:
    """Wait until the notebook in front has drawn its `views` stored
    widgets; if it never does, fail with how many it drew, what the console
    said and a screenshot (under load, this wait once ran out)."""
    try:
        page.wait_for_function(f"() => ({WIDGETS_DRAWN})() === {views}")
    except PlaywrightTimeout:
        drawn = page.evaluate(WIDGETS_DRAWN)
        shot = _shot(f"jupyterlab_undrawn_{Path(name).stem}")
        page.screenshot(path=str(shot))
        said = "\n".join(CONSOLE.get(page, [])[-20:]) or "(nothing)"
        pytest.fail(
            f"{name}: {drawn} of its {views} stored widgets drawn after "
            f"{WAIT_MS / 1000:.0f} s (screenshot {shot}); the console's "
            f"errors and warnings, last 20:\n{said}"
        )


#: the notebook panel on screen (other tabs stay in the page, hidden)
NOTEBOOK_IN_FRONT = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook"
#: the notebook at `path` is in front, open, its cells on the page
OPENED = f"""(path) => {{
    const nb = {NOTEBOOK_JS};
    return nb?.context?.path === path && nb.context.isReady
        && nb.content?.widgets?.length > 0; }}"""


def _open_notebook(page, url: str, path: str) -> None:
    """Open `path` (relative to the server's root) in front: the first by
    loading JupyterLab, the others through its document manager, as a
    reader's double-click does."""
    if page.url.startswith(f"{url}lab"):
        page.evaluate(
            "async (path) => { await window.jupyterapp.commands.execute("
            "'docmanager:open', {path}); }",
            path,
        )
    else:  # ?reset: not the tabs an earlier test left open
        page.goto(f"{url}lab/tree/{path}?reset", wait_until="domcontentloaded")
    page.wait_for_function(OPENED, arg=path, timeout=START_S * 1000, polling=500)


def test_make_lab_serves_its_fixed_widget_extensions(jupyterlab):
    """`make lab` serves its copies of two extensions, each with its fix
    (scripts/lab's config): anywidget's front end waits 60 s for a model to
    start, not 2 (a busy JupyterLab once took longer), and the widget
    manager no longer marks a notebook modified when it registers a model
    (restoring the stored widgets did it, about two seconds after a
    notebook opened)."""
    url = jupyterlab[0]
    for name, pattern, _, _ in extension_fixes.PATCHES:
        installed = ROOT / ".venv" / "share" / "jupyter" / "labextensions" / name
        chunks = [
            js.name
            for js in (installed / "static").glob("*.js")
            if re.search(pattern, js.read_text(encoding="utf-8"))
        ]
        assert chunks, f"{name} changed: see PATCHES in scripts/lab's config"
        for chunk in chunks:
            served = f"{url}lab/extensions/{name}/static/{chunk}"
            with urllib.request.urlopen(served, timeout=30) as r:
                code = r.read().decode()
            assert not re.search(pattern, code), f"{name}: {chunk} unpatched"


#: the number of widget views the notebook in front shows, drawn
WIDGETS_DRAWN = f"""() => {NOTEBOOK_JS}.content.node.querySelectorAll(
    '.bl-stepper, .bl-check, .bl-reveal').length"""
DIRTY = f"() => {NOTEBOOK_JS}.context.model.dirty"
#: the widgets JupyterLab marks as cut off from the kernel, and those of
#: them whose mark (an icon in ::before) is on screen
BROKEN_CHAINS = f"""() => {{
    const marked = Array.from({NOTEBOOK_JS}.content.node.querySelectorAll(
        '.jupyter-widgets-disconnected'));
    return {{disconnected: marked.length, shown: marked.filter((el) =>
        getComputedStyle(el, '::before').display !== 'none')
        .map((el) => el.className)}}; }}"""


def _stored_views(path: Path) -> int:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return sum(
        lab_form.WIDGET_VIEW in output.get("data", {})
        for cell in nb["cells"]
        for output in cell.get("outputs", [])
    )


def test_chapters_open_and_save_unmodified_with_live_stored_widgets(
    lab_tab, jupyterlab
):
    """A reader who opens a chapter and leaves it, or saves it, finds it
    unmodified and the clone unchanged; chapter 2's stored stepper answers
    Next and a number self-check takes its answer with Enter."""
    url, repo, log, proc = jupyterlab
    page, external = lab_tab
    changed = []
    for name in SAVED:
        saved = repo / "notebooks" / name
        before = saved.stat().st_mtime_ns
        _open_notebook(page, url, f"notebooks/{name}")
        views = _stored_views(saved)
        # every stored widget restored and drawn: the widget manager has
        # registered every model by then
        _wait_until_drawn(page, name, views)
        page.wait_for_function(KERNEL_IDLE, timeout=START_S * 1000)
        assert not page.evaluate(DIRTY), f"{name} is modified, untouched"
        page.evaluate(
            "async () => { await window.jupyterapp.commands.execute("
            "'docmanager:save'); }"
        )
        _wait(
            lambda saved=saved, before=before: saved.stat().st_mtime_ns != before,
            START_S,
            f"{name} not saved",
            proc,
            log,
        )
        page.wait_for_function(f"() => !({DIRTY})()")
        if saved.read_bytes() != (ROOT / "notebooks" / name).read_bytes():
            changed.append(name)
    assert not changed, (
        f"saving in JupyterLab changed {changed}: store them in its form "
        "(python scripts/lab_form.py notebooks/*.ipynb)"
    )
    assert not page.evaluate(DIRTY), f"{SAVED[-1]} modified after the save"

    _open_notebook(page, url, f"notebooks/{NOTEBOOK.name}")
    notebook = page.locator(NOTEBOOK_IN_FRONT)
    steppers = notebook.locator(".bl-stepper")
    expect(steppers).to_have_count(STEPPERS, timeout=WAIT_MS)
    outputs = notebook.locator(".jp-OutputArea-output").all_inner_texts()
    reprs = [t[:60] for t in outputs if REPR.search(t)]
    assert not reprs, f"widgets shown as their text repr (untrusted?): {reprs}"
    # stored widgets are not connected to the kernel, and JupyterLab
    # marks such a widget with a red broken-chain icon: ours need no
    # kernel, so they hide it (widgets/*.css)
    marks = page.evaluate(BROKEN_CHAINS)
    assert marks["disconnected"] > 0, "no stored widget marked disconnected?"
    assert marks["shown"] == [], f"broken-chain icons shown: {marks}"
    backward = steppers.nth(1)  # BackwardStepper on relu(a*b + d)
    backward.scroll_into_view_if_needed()
    start = _frame(backward)
    assert start["index"] == "0"
    one = _step(backward, "next", "1")
    assert one["graph"] != start["graph"] and one["caption"] != start["caption"]
    backward.screenshot(path=str(_shot("jupyterlab_stored_stepper")))
    assert _step(backward, "prev", "0") == start

    number = notebook.locator('.bl-check[data-kind="number"]').first
    number.scroll_into_view_if_needed()
    field = number.locator("input.bl-check-input")
    field.click()
    field.fill("1")  # wrong: x is used three times
    field.press("Enter")
    expect(number.locator(".bl-check-verdict")).to_contain_text(
        "Not right yet", timeout=WAIT_MS
    )
    field.fill("3")
    field.press("Enter")
    expect(number.locator(".bl-check-verdict")).to_contain_text(
        "Correct", timeout=WAIT_MS
    )
    number.screenshot(path=str(_shot("jupyterlab_selfcheck_enter")))
    assert not external, f"requests to other hosts: {external}"


def test_a_notebook_runs_and_keeps_working_widgets_in_jupyterlab(
    lab_tab, jupyterlab
):
    url, repo, log, proc = jupyterlab
    live = f"{LIVE}/{DEMO_NOTEBOOK.name}"
    page, external = lab_tab
    if page.url.startswith(f"{url}lab"):
        # the chapters an earlier test opened: closed, so that the reload
        # below restores this notebook alone
        page.evaluate(
            "async () => { await window.jupyterapp.commands.execute("
            "'application:close-all'); }"
        )
    _open_notebook(page, url, live)
    page.wait_for_function(KERNEL_IDLE, timeout=START_S * 1000, polling=500)
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(RUN_DONE, timeout=RUN_S * 1000, polling=1000)
    assert page.evaluate(ERRORS) == [], f"cells failed:\n{_tail(log)}"

    notebook = page.locator(NOTEBOOK_IN_FRONT)
    steppers = notebook.locator(".bl-stepper")
    expect(steppers).to_have_count(1, timeout=WAIT_MS)
    expect(notebook.locator(".bl-check")).to_have_count(2, timeout=WAIT_MS)
    expect(notebook.locator(".bl-reveal")).to_have_count(1, timeout=WAIT_MS)
    text = notebook.inner_text()
    assert "Error displaying widget" not in text
    outputs = notebook.locator(".jp-OutputArea-output").all_inner_texts()
    reprs = [t[:60] for t in outputs if REPR.search(t)]
    assert not reprs, f"widgets shown as their text repr: {reprs}"

    backward = steppers.first
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
    assert _step(backward, "prev", "1") == one

    why = notebook.locator(".jp-RenderedMarkdown details.why").first
    summary = why.locator("> summary")
    expect(summary).to_have_text("Why", timeout=WAIT_MS)
    expect(why.locator("> p").first).to_be_hidden(timeout=WAIT_MS)
    summary.click()
    expect(why.locator("> p").first).to_be_visible(timeout=WAIT_MS)
    why.screenshot(path=str(_shot("jupyterlab_why_open")))

    # Saved, and opened again with a new kernel (nothing of the run is
    # live any more), the widgets come from the state saved with the
    # notebook: a reader's run keeps working steppers.
    page.evaluate(
        "async () => { await window.jupyterapp.commands.execute("
        "'docmanager:save'); await "
        f"{NOTEBOOK_JS}.sessionContext.shutdown(); }}"
    )
    saved = nbformat.read(repo / LIVE / DEMO_NOTEBOOK.name, as_version=4)
    state = saved.metadata["widgets"][lab_form.WIDGET_STATE]["state"]
    assert len(state) >= 4, "the run's widgets were not saved"
    page.reload(wait_until="domcontentloaded")
    page.wait_for_function(OPENED, arg=live, timeout=START_S * 1000)
    steppers = page.locator(NOTEBOOK_IN_FRONT).locator(".bl-stepper")
    expect(steppers).to_have_count(1, timeout=WAIT_MS)
    again = steppers.first
    again.scroll_into_view_if_needed()
    at = int(_frame(again)["index"])  # where the run left it, saved
    _step(again, "next", str(at + 1))
    text = page.locator(NOTEBOOK_IN_FRONT).inner_text()
    assert "Error displaying widget" not in text
    assert not external, f"requests to other hosts: {external}"


def _shot(name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
