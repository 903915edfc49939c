"""Fixtures for browser tests of the rendered book.

The book in `_build/html` (or `$BOOK_HTML`) is served on 127.0.0.1 and
opened in Debian's Chromium through Playwright.  Chromium sends every
request to another host to a proxy on this machine that refuses it (it
bypasses proxies for 127.0.0.1 only), and each such request is recorded, so
nothing leaves the machine and a passing test proves the page works
offline.  Screenshots go to `_build/screenshots/`.

Tests load their pages in tabs that stay open (`Tab`): a new tab costs
about 2 CPU-seconds more than loading a page in one that is open (a
renderer process started, the book's scripts compiled again), and the
suite loads about 50 pages.  Each load starts clean: the storage of the
page's origin emptied, the viewport, colour scheme and pointer reset.

`demo_book` builds a one-page book of its own from
`demo_book/conventions.ipynb` (executed here, with the real `_config.yml`,
`book/_ext` and `book/_static`): it holds one example of every
reader-facing convention, so the mechanisms are tested end to end whatever
the chapters hold (see pages.py for the chapters' pending lists).

Tests wait on states, never on fixed times: `wait_for_function` and
Playwright's auto-waiting assertions (`expect`), which fail with a timeout
if the state never comes.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
SCREENSHOTS = ROOT / "_build" / "screenshots"
DEMO_SOURCE = Path(__file__).resolve().parent / "demo_book"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: A port on 127.0.0.1 that refuses connections for the whole session: a
#: socket bound to it that never listens.  Chromium's proxy (below).
_REFUSER = socket.socket()
_REFUSER.bind(("127.0.0.1", 0))
CHROMIUM_ARGS = [
    # every request to another host goes to this proxy, which refuses it;
    # requests to 127.0.0.1 never use a proxy.  (Routing each request
    # through Playwright did the same at ~25 ms of CPU per request: a third
    # of the cost of loading a chapter.)
    f"--proxy-server=http://127.0.0.1:{_REFUSER.getsockname()[1]}",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
PHONE = {"width": 390, "height": 844}  # a phone in portrait (iPhone 12-15)
DESKTOP = {"width": 1280, "height": 900}
#: How long any one wait may take (ms).  It only bounds a hang: with make
#: test's other lanes holding both cores, a full-page screenshot of a
#: 27-screen chapter once took more than 30 s and MathJax more than 20 s.
WAIT_MS = 180_000


def elsewhere(url: str) -> bool:
    """Whether a request for `url` would leave this machine (blob: and
    data: URLs are the page's own memory)."""
    parsed = urlparse(url)
    return (
        parsed.scheme not in ("blob", "data") and parsed.hostname != "127.0.0.1"
    )


#: An empty page every served directory answers with (see Tab.open).
BLANK = "__blank__.html"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/" + BLANK:
            # an icon of its own: without one, Chromium asks for
            # /favicon.ico, and the 404's console error could arrive after
            # the next page had begun to load, and count as that page's
            body = (
                b"<!doctype html><title>blank</title>"
                b'<link rel="icon" href="data:,">'
            )
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/favicon.ico":
            # asked for by pages without an icon link: Jupyter Book's
            # index.html, which only redirects (the book's pages link
            # _static/favicon.svg); a host's 404 there is not the book's
            self.send_response(204)
            self.end_headers()
        else:
            super().do_GET()


#: base URL -> the directory it serves
SERVED: dict[str, Path] = {}


@functools.cache
def _serve(directory: str) -> str:
    """Serve `directory` on 127.0.0.1 from a daemon thread; its base URL."""
    handler = functools.partial(_QuietHandler, directory=directory)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    SERVED[url] = Path(directory)
    return url


@pytest.fixture(scope="session")
def book_url():
    """Base URL of the rendered book served from a local thread."""
    if not (HTML / "index.html").exists():
        pytest.fail(
            f"{HTML}/index.html is missing: build the book first (`make book`)"
        )
    return _serve(str(HTML))


@pytest.fixture(scope="session")
def demo_book(build_once) -> str:
    """Base URL of the one-page conventions book, executed and built once
    per run (by the first xdist worker to ask)."""
    return _serve(
        str(build_once("demo-book", _build_demo_book) / "_build" / "html")
    )


def _build_demo_book(src: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    src.mkdir(parents=True)
    shutil.copy(ROOT / "_config.yml", src / "_config.yml")
    shutil.copy(DEMO_SOURCE / "_toc.yml", src / "_toc.yml")
    for part in ("_ext", "_static"):
        shutil.copytree(ROOT / "book" / part, src / "book" / part)
    (src / "notebooks").mkdir()
    nb = nbformat.read(DEMO_SOURCE / "conventions.ipynb", as_version=4)
    NotebookClient(
        nb,
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(src / "notebooks")}},
    ).execute()
    nbformat.write(nb, src / "notebooks" / "conventions.ipynb")
    jupyter_book = Path(sys.executable).with_name("jupyter-book")
    build = subprocess.run(
        [str(jupyter_book), "build", str(src), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, (
        f"the demo book failed to build:\n{build.stdout}\n{build.stderr}"
    )


def pytest_configure(config):
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install Debian's `chromium` "
            "package"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        yield b
        b.close()


@dataclass
class BookPage:
    """A loaded page plus everything that went wrong while loading it."""

    page: object
    url: str
    external: list[str] = field(
        default_factory=list
    )  # requests to other hosts (aborted)
    failed: list[str] = field(
        default_factory=list
    )  # local requests that failed / 4xx-5xx
    console_errors: list[str] = field(
        default_factory=list
    )  # console.error and uncaught errors

    def screenshot(self, name: str, full_page: bool = True) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def mark(self) -> tuple[int, int, int]:
        """Where the records stand now, for `assert_clean(since=...)`."""
        return len(self.external), len(self.failed), len(self.console_errors)

    def assert_clean(self, since: tuple[int, int, int] = (0, 0, 0)) -> None:
        """Nothing went wrong (since `mark()` returned `since`: axe, on a
        shared page, fetches stylesheets itself and records a 404)."""
        external = self.external[since[0] :]
        failed = self.failed[since[1] :]
        errors = self.console_errors[since[2] :]
        assert not external, f"{self.url}: requests to other hosts: {external}"
        assert not failed, f"{self.url}: failed requests: {failed}"
        assert not errors, f"{self.url}: console errors: {errors}"

    def resize(self, size: dict) -> None:
        """Set the viewport to `size` and wait until book.js has marked the
        scrolling boxes for the new width (150 ms after a resize)."""
        self.page.set_viewport_size(size)
        self.page.wait_for_function(
            "document.documentElement.dataset.blMarkedWidth === "
            f"'{size['width']}'"
        )

    def wait_for_widgets(self) -> int:
        """Wait until every widget view on the page has rendered; their count."""
        views = self.page.locator(VIEW).count()
        if views:
            self.page.wait_for_function(
                "document.querySelectorAll('.widget-subarea > *').length >= "
                f"{views}",
            )
        return views

    def wait_for_math(self) -> None:
        """Wait until MathJax has typeset every formula on the page (within
        the context's default timeout, WAIT_MS)."""
        if self.page.locator("article .math").count():
            self.page.wait_for_function(
                "document.querySelectorAll('article "
                ".math:not(:has(mjx-container))').length === 0",
            )


VIEW = 'script[type="application/vnd.jupyter.widget-view+json"]'
DEMO = "notebooks/conventions.html"  # the page of the demo book


class Tab:
    """A browser tab that tests load page after page in, in a context of its
    own (its own storage).  `open` returns the loaded page as a BookPage,
    which records what goes wrong from then until the tab's next `open`."""

    def __init__(self, browser):
        self.context = browser.new_context(viewport=DESKTOP)
        self.context.set_default_timeout(WAIT_MS)
        self.page = self.context.new_page()
        self.current: BookPage | None = None

        def record(kind: str, entry: str) -> None:
            if self.current is not None:
                getattr(self.current, kind).append(entry)

        page = self.page
        page.on(
            "request", lambda r: elsewhere(r.url) and record("external", r.url)
        )
        page.on(
            "console",
            lambda m: m.type == "error" and record("console_errors", m.text),
        )
        page.on("pageerror", lambda e: record("console_errors", f"uncaught: {e}"))
        page.on(
            "requestfailed",
            lambda r: (
                urlparse(r.url).hostname == "127.0.0.1"
                and record("failed", f"{r.url} ({r.failure})")
            ),
        )
        page.on(
            "response",
            lambda r: (
                r.status >= 400 and record("failed", f"{r.url} ({r.status})")
            ),
        )

    def open(
        self,
        base: str,
        path: str,
        width: int = DESKTOP["width"],
        height: int = DESKTOP["height"],
        mode: str | None = None,
        system: str | None = None,
    ) -> BookPage:
        """Load `base + path` as a reader's first visit: mode "light"/"dark"
        sets the system colour scheme and the theme's stored choice, None
        leaves the book's default (auto); `system` sets the system's scheme
        alone (light unless `mode` says otherwise)."""
        page = self.page
        # an empty page of the same origin first: what the last page still
        # sends or logs goes nowhere, and the origin's storage (the theme's
        # stored mode) can be emptied before the page reads it
        self.current = None
        page.goto(base + BLANK)
        page.evaluate(
            """(mode) => {
                localStorage.clear();
                sessionStorage.clear();
                if (mode) {
                    localStorage.setItem('mode', mode);
                    localStorage.setItem('theme', mode);
                }
            }""",
            mode,
        )
        page.set_viewport_size({"width": width, "height": height})
        page.emulate_media(color_scheme=system or mode or "light")
        page.mouse.move(0, 0)  # no hover left over from the last test
        self.current = BookPage(page, base + path)
        page.goto(self.current.url, wait_until="networkidle")
        # loaded and laid out (a loaded machine lays a page out late)
        page.wait_for_function(
            "document.readyState === 'complete' && "
            "document.body.getBoundingClientRect().height > 0"
        )
        return self.current


@pytest.fixture(scope="session")
def tab(browser) -> Tab:
    """The tab that `book_page` and `demo_page` load their pages in."""
    t = Tab(browser)
    yield t
    t.context.close()


@pytest.fixture
def book_page(tab, book_url):
    """`book_page("notebooks/01_value_nodes.html")` -> BookPage, loaded and
    settled (see Tab.open for `width`, `height` and `mode`).  A test's pages
    share one tab: a second call loads its page in place of the first."""
    return functools.partial(tab.open, book_url)


@pytest.fixture
def demo_page(tab, demo_book):
    """`demo_page(DEMO)` -> BookPage of the conventions book."""
    return functools.partial(tab.open, demo_book)


@pytest.fixture(scope="session")
def shared_page(browser, book_url):
    """`shared_page("notebooks/01_value_nodes.html", mode="light")` -> a
    BookPage loaded once and shared by the tests on that page: those that
    only read it (the figure sizes, the text, the loading checks), then
    those marked `clicks` (the exercises and the self-checks), which change
    it, then axe in light and in dark mode, then the phone tests (at a
    phone's width, back in light mode).  Asked for another mode, the
    loaded page switches in place, as the theme's switch does it: the
    stored choice and the attributes on <html> that the CSS reads (the
    system preference is emulated too).  Tests that need a page of their
    own use `book_page`.  The hook below runs the sharing tests page by
    page; two tabs of their own hold the two pages loaded last, and the
    next page is loaded in the tab of the older one."""
    tabs: dict[str, Tab] = {}  # path -> the tab that holds it, oldest first
    loaded: dict[str, BookPage] = {}
    modes: dict[str, str] = {}

    def get(path: str, mode: str = "light") -> BookPage:
        if path not in tabs:
            if len(tabs) >= 2:
                old = next(iter(tabs))
                t = tabs.pop(old)
                del loaded[old]
            else:
                t = Tab(browser)
            tabs[path] = t
            loaded[path] = t.open(book_url, path, mode=mode)
            modes[path] = mode
        p = loaded[path]
        if modes[path] != mode:
            p.page.emulate_media(color_scheme=mode)
            p.page.evaluate(SET_MODE, mode)
            # the theme's colours change through CSS transitions: read the
            # page once they have ended, as a reader sees it
            p.page.wait_for_function(
                "document.getAnimations().every((a) => "
                "!(a instanceof CSSTransition) || a.playState !== 'running')"
            )
            modes[path] = mode
        return p

    yield get
    for t in tabs.values():
        t.context.close()


#: What pydata-sphinx-theme's switch does on a click (its function that
#: sets the mode, in scripts/pydata-sphinx-theme.js).
SET_MODE = """(mode) => {
    localStorage.setItem('mode', mode);
    localStorage.setItem('theme', mode);
    document.documentElement.dataset.mode = mode;
    document.documentElement.dataset.theme = mode;
    document.querySelectorAll('.dropdown-menu').forEach(
        (el) => el.classList.toggle('dropdown-menu-dark', mode === 'dark'));
}"""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Tests that share loaded pages first, grouped by page, so that each
    page is loaded once; every other test keeps its place after them.  On
    each page the tests that only read it run first, then the tests marked
    `clicks`, which change it, then axe in light mode and in dark (on the
    page with its solutions open and its self-checks answered), and last
    the phone tests, which narrow the page (test_navigation's check of the
    page's width, then test_phone's, which steps the steppers).

    `make browser` runs two xdist workers (`--dist loadgroup`): the tests
    wait on page loads, typesetting and axe far more than they compute, so
    two browsers overlap their waits.  Each page's sharing tests form one
    xdist group, so one worker loads that page for all of them (this hook
    runs before xdist's own, which reads the groups)."""

    def uses_shared(item) -> bool:
        return "shared_page" in getattr(item, "fixturenames", ())

    def page_and_phase(item) -> tuple[str, int]:
        # axe fetches stylesheets itself (and logs what it cannot find): the
        # checks of how the page loaded run before it on the same page
        params = getattr(getattr(item, "callspec", None), "params", {})
        phase = 1 if item.get_closest_marker("clicks") else 0
        if "accessibility" in item.nodeid:
            phase = 3 if params.get("mode") == "dark" else 2
        if "test_phone" in item.nodeid or "wider_than_a_phone" in item.nodeid:
            phase = 4  # narrow the page to a phone's width for good
        return (params.get("page", ""), phase)

    shared = sorted((i for i in items if uses_shared(i)), key=page_and_phase)
    for item in shared:
        page = page_and_phase(item)[0]
        item.add_marker(pytest.mark.xdist_group(page.replace("/", "_") or "page"))
    items[:] = shared + [i for i in items if not uses_shared(i)]
