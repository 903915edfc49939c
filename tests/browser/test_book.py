"""The rendered book as a reader sees it: pages load offline and cleanly."""

import pytest

pytestmark = pytest.mark.browser


def test_landing_page(book_page):
    p = book_page("index.html")  # redirects to the root page
    p.page.wait_for_selector("article h1")
    assert "Backpropagation" in p.page.title()
    p.screenshot("landing")
    p.assert_clean()


def test_chapter1_graph_and_math(book_page):
    p = book_page("notebooks/01_value_nodes.html")
    assert p.page.locator(".cell_output svg g.node").count() > 0, "no graphviz graph on the page"
    p.page.wait_for_selector("mjx-container svg", timeout=15000)  # MathJax rendered
    p.screenshot("chapter1")
    p.assert_clean()
