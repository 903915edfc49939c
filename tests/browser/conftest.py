"""Fixtures for browser tests of the rendered book.

The book in `_build/html` (or `$BOOK_HTML`) is served on 127.0.0.1 and
opened in Debian's Chromium through Playwright.  Every request to another
host is aborted and recorded, so a passing test proves the page works
offline.  Screenshots go to `_build/screenshots/`.
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic",
                 "--no-first-run"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def book_url():
    """Base URL of the rendered book served from a local thread."""
    if not (HTML / "index.html").exists():
        pytest.fail(f"{HTML}/index.html is missing: build the book first (`make book`)")
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's `chromium` package")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@dataclass
class BookPage:
    """A loaded page plus everything that went wrong while loading it."""

    page: object
    url: str
    external: list[str] = field(default_factory=list)       # requests to other hosts (aborted)
    failed: list[str] = field(default_factory=list)         # local requests that failed / 4xx-5xx
    console_errors: list[str] = field(default_factory=list)  # console.error and uncaught errors

    def screenshot(self, name: str, full_page: bool = True) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        return path

    def assert_clean(self) -> None:
        assert not self.external, f"{self.url}: requests to other hosts: {self.external}"
        assert not self.failed, f"{self.url}: failed requests: {self.failed}"
        assert not self.console_errors, f"{self.url}: console errors: {self.console_errors}"


@pytest.fixture
def book_page(browser, book_url):
    """`book_page("notebooks/01_value_nodes.html")` -> BookPage, loaded and settled."""
    contexts = []

    def open_page(path: str, width: int = 1280, height: int = 900) -> BookPage:
        context = browser.new_context(viewport={"width": width, "height": height})
        contexts.append(context)
        page = context.new_page()
        result = BookPage(page, book_url + path)

        def route(r):
            if urlparse(r.request.url).hostname == "127.0.0.1":
                r.continue_()
            else:
                result.external.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("console", lambda m: m.type == "error" and result.console_errors.append(m.text))
        page.on("pageerror", lambda e: result.console_errors.append(f"uncaught: {e}"))
        page.on("requestfailed", lambda r: urlparse(r.url).hostname == "127.0.0.1"
                and result.failed.append(f"{r.url} ({r.failure})"))
        page.on("response", lambda r: r.status >= 400 and result.failed.append(f"{r.url} ({r.status})"))
        page.goto(result.url, wait_until="networkidle")
        return result

    yield open_page
    for c in contexts:
        c.close()
