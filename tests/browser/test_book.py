"""The rendered book as a reader sees it: every page loads offline and cleanly.

Every request to a host other than 127.0.0.1 is blocked and recorded (see
conftest.py), so passing tests prove the book works with no network.
"""

from __future__ import annotations

import os
import re

import pytest
import yaml

from .conftest import HTML, PHONE, ROOT
from .pages import CHAPTERS, PAGES, chapter_params

pytestmark = pytest.mark.browser

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
#: Each page's screenshot shows its first screen; BOOK_SCREENSHOTS=full
#: takes whole pages (a 27-screen chapter costs Chromium 3 CPU-seconds to
#: paint and encode, a minute of make test's CPU over the book).
FULL_SCREENSHOTS = os.environ.get("BOOK_SCREENSHOTS") == "full"


def test_landing_page(book_page):
    p = book_page("index.html")  # redirects to the root page
    p.page.wait_for_selector("article h1")
    assert "Backpropagation" in p.page.title()
    p.screenshot("landing")
    # on a phone the title keeps a margin from the screen's edge
    p.resize(PHONE)
    right = p.page.evaluate("""() => { const r = document.createRange();
        r.selectNodeContents(document.querySelector('article h1').firstChild);
        return r.getBoundingClientRect().right; }""")
    assert right <= PHONE["width"] - 12, f"the title ends at {right} px"
    p.screenshot("landing_phone", full_page=False)
    p.assert_clean()


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_offline(shared_page, page):
    p = shared_page(page + ".html")
    pg = p.page
    assert pg.locator("article h1").count() == 1, f"{page}: expected one title"
    p.wait_for_math()  # fails with a timeout if a formula stays untypeset
    views = p.wait_for_widgets()
    if views:
        # Each widget view renders once, into the output that holds its state.
        assert pg.locator(".widget-subarea > *").count() == views, (
            f"{page}: a widget rendered twice"
        )
        assert (
            pg.locator(
                ".widget-subarea .jupyter-widgets-error-widget, .widget-error"
            ).count()
            == 0
        )
    alts = pg.locator("article img").evaluate_all(
        "(images) => images.map((img) => img.getAttribute('alt') || '')"
    )
    for alt in alts:
        assert alt.strip(), f"{page}: an image has no alt text"
        assert not re.search(r"\.(png|svg|jpe?g)$", alt), (
            f"{page}: an image's alt text is its file name: {alt}"
        )
    pg.evaluate("window.scrollTo(0, 0)")
    p.screenshot(page.replace("/", "__"), full_page=FULL_SCREENSHOTS)
    p.assert_clean()


@pytest.mark.parametrize("page", CHAPTERS)
def test_launch_buttons(page):
    """Colab and download links point at this notebook in the repository;
    there is no Binder link (README: its image cannot be built reliably)."""
    repo = CONFIG["repository"]["url"].removeprefix("https://github.com/")
    branch = CONFIG["repository"]["branch"]
    assert (ROOT / f"{page}.ipynb").exists()
    html = (HTML / f"{page}.html").read_text()
    hrefs = set(re.findall(r'href="([^"]+)"', html))
    colab = f"https://colab.research.google.com/github/{repo}/blob/{branch}/{page}.ipynb"
    assert colab in hrefs, f"no Colab link {colab}"
    binder = [h for h in hrefs if "binder" in h.lower()]
    assert not binder, f"a Binder link: {binder}"
    download = f"../_sources/{page}.ipynb"
    assert download in hrefs, f"no download link {download}"
    assert (HTML / "_sources" / f"{page}.ipynb").exists()


def test_requests_to_other_hosts_are_refused_and_recorded(book_page):
    """A page that asks another host, by name or by address, gets no answer:
    Chromium's proxy refuses the request before it leaves the machine, and
    assert_clean names it."""
    p = book_page("book/intro.html")
    urls = ["http://example.com/x.js", "http://93.184.215.14/x.js"]
    for url in urls:
        with p.page.expect_event("requestfailed") as failed:
            outcome = p.page.evaluate(
                "(url) => fetch(url, {mode: 'no-cors'})"
                ".then(() => 'answered', () => 'refused')",
                url,
            )
        assert outcome == "refused", url
        assert failed.value.url == url
        assert failed.value.failure == "net::ERR_PROXY_CONNECTION_FAILED"
    assert p.external == urls
    with pytest.raises(AssertionError, match="requests to other hosts"):
        p.assert_clean()


def test_search_finds_pages(book_page):
    p = book_page("search.html?q=gradient")
    p.page.wait_for_selector("#search-results li")
    assert p.page.locator("#search-results li").count() >= 2
    p.assert_clean()


def test_widgets_get_a_minute_to_start():
    """The book's copy of anywidget waits 60 s for a widget's model, not 2
    (book/_ext/offline_assets.py): a chapter's page busy typesetting for
    longer once showed an empty space where its stepper belongs."""
    code = (HTML / "_static" / "vendor" / "anywidget" / "index.js").read_text()
    assert "AbortSignal.timeout(6e4)" in code
    assert "AbortSignal.timeout(2e3)" not in code


def test_no_cdn_urls_in_built_pages():
    """Pages reference no third-party script, stylesheet or font."""
    pattern = re.compile(
        r'<(script|link)[^>]+(src|href)="(https?:)?//(?!127\.0\.0\.1)[^"]+"'
    )
    offenders = []
    for html in HTML.rglob("*.html"):
        for m in pattern.finditer(html.read_text(errors="replace")):
            if (
                m.group(1) == "link"
                and 'rel="stylesheet"' not in m.group(0)
                and "preload" not in m.group(0)
            ):
                continue
            offenders.append(f"{html.relative_to(HTML)}: {m.group(0)[:120]}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("page", chapter_params("nbval_text", PAGES))
def test_no_test_markers_in_the_reading(shared_page, page):
    """nbval's markers are cell tags, never `# NBVAL_...` lines a reader sees."""
    p = shared_page(page + ".html")
    text = p.page.locator("article").inner_text()
    found = sorted(set(re.findall(r"NBVAL\w*", text, flags=re.IGNORECASE)))
    assert not found, f"{page}: the page shows {found}"


#: The parts of a chapter, in order (CONTRIBUTING.md, "Each chapter's shape"); any
#: other section title is one of the chapter's own sections.
SHAPE = [
    "Overview",
    "Prerequisites",
    "sections",
    "Summary",
    "Exercises",
    "What's next",
]


def _part(title: str) -> str:
    title = title.replace("\u2019", "'")
    for part in SHAPE:
        if part != "sections" and title.startswith(part):
            return part
    return "sections"


@pytest.mark.parametrize("page", chapter_params("sections", CHAPTERS))
def test_chapter_sections_in_the_books_order(page):
    """Overview, Prerequisites, the chapter's sections, Summary, Exercises,
    What's next: each once, in that order (read from the built page)."""
    html = (HTML / f"{page}.html").read_text()
    titles = [
        re.sub(r"<[^>]+>", "", t).strip()
        for t in re.findall(r"<h2>(.*?)<a class=\"headerlink\"", html)
    ]
    parts = [_part(t) for t in titles]
    collapsed = [p for k, p in enumerate(parts) if k == 0 or p != parts[k - 1]]
    assert collapsed == SHAPE, (
        f"{page}: sections {titles} read as {collapsed}, expected {SHAPE}"
    )
