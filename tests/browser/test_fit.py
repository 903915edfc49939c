"""What the reader looks at fits its column, whole and typeset (issue 41).

Every page is read once at 1280 x 900 (the pages the other tests share,
conftest.py) with every collapsed block opened - Why, Hint, Deeper, the
solutions, the source reveals - and closed again after the reading:

- no raw TeX: no backslash command (`\\hat`, `\\epsilon`) and no `$` in the
  text outside code and outside what MathJax typeset (chapter 6's RMSNorm
  box once showed `$\\hat{x}_i = ...` as text: a line starting with `+`
  had become a list item and split the formula);
- printed output: each sentence line (a verdict, a check's line, an error;
  book/_ext/reading.py marks them `.bl-wrap`) wraps inside its box, and
  every exercise verdict and printed error is such a line; the lines of a
  printed table fit the desktop column (pending chapters print wider ones);
- figures and graph drawings: within the column, each a link to its own
  image file (a tap opens it at full size);
- display math and tables fit the desktop column (pending pages hold wider
  ones: their formulas need restructuring in the notebook or page);
- collapsed blocks: one look, whatever they hold.

In dark mode (chapters 2, 6 and 10) the steppers are dark cards like the
self-checks, figures sit on white cards undimmed and graph drawings are
drawn light on dark.  The same reading at a phone's width is in
test_phone.py.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import SCREENSHOTS
from .pages import APPENDICES, CHAPTERS, PAGES, chapter_params

pytestmark = pytest.mark.browser

#: Reads the page with every closed <details> opened (and closes them again).
READ = r"""() => {
  const opened = Array.from(
    document.querySelectorAll('article details:not([open])'));
  opened.forEach((d) => { d.open = true; });
  const article = document.querySelector('article.bd-article');
  const found = {tex: [], sentences: [], unwrapped: [], tableLines: [], math: [],
                 tables: [], images: [], unlinked: []};
  const where = (el) => {
    let h = null;
    for (const x of article.querySelectorAll('h1, h2, h3')) {
      if (x.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) h = x;
    }
    return h ? h.textContent.replace('#', '').trim() : '(top)';
  };
  try {
    // 1. raw TeX: text outside code and typeset math
    const SKIP = 'pre, code, kbd, samp, script, style, textarea, svg, ' +
      'mjx-container, .bl-source';
    const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      const m = n.textContent.match(/\\[A-Za-z]+|\$/);
      if (!m || !el || el.closest(SKIP)) continue;
      if (!el.checkVisibility({checkVisibilityCSS: true})) continue;
      const at = Math.max(0, m.index - 30);
      const text = n.textContent.slice(at, m.index + 40);
      found.tex.push(`${where(el)}: ...${text}...`);
    }
    // 2. printed output (code and show_source blocks scroll by design)
    const VERDICT = /^\s*Exercise \d+:|\b[A-Z]\w*(Error|Exception)\b/;
    for (const pre of article.querySelectorAll(
        '.cell_output .output:is(.stream, .text_plain) pre')) {
      if (!pre.checkVisibility()) continue;
      const box = pre.getBoundingClientRect();
      const style = getComputedStyle(pre);
      const right = box.left + pre.clientLeft + pre.clientWidth -
        parseFloat(style.paddingRight) + 1;
      for (const w of pre.querySelectorAll('.bl-wrap')) {
        if (w.getBoundingClientRect().right > right) {
          found.sentences.push(`${where(pre)}: ${w.textContent.slice(0, 80)}`);
        }
      }
      for (const node of pre.childNodes) {
        if (node.nodeType !== Node.TEXT_NODE) continue;
        let offset = 0;
        for (const line of node.textContent.split('\n')) {
          if (line.trim()) {
            if (VERDICT.test(line)) {
              found.unwrapped.push(`${where(pre)}: ${line.slice(0, 80)}`);
            }
            const range = document.createRange();
            range.setStart(node, offset);
            range.setEnd(node, offset + line.length);
            if (range.getBoundingClientRect().right > right) {
              const text = line.trimEnd().slice(0, 100);
              found.tableLines.push(`${where(pre)}: ${text}`);
            }
          }
          offset += line.length + 1;
        }
      }
    }
    // 3. display math and tables wider than the column
    const mathDoc = window.MathJax && MathJax.startup && MathJax.startup.document;
    for (const m of article.querySelectorAll("mjx-container[display='true']")) {
      if (m.scrollWidth <= m.clientWidth + 1 || !m.checkVisibility()) continue;
      let tex = '';
      try {
        tex = mathDoc.getMathItemsWithin(m.parentElement)[0].math;
      } catch (e) { /* no TeX to quote */ }
      const size = `${m.scrollWidth} px in ${m.clientWidth} px`;
      found.math.push(`${where(m)}: ${size}: ` +
        tex.replace(/\s+/g, ' ').slice(0, 90));
    }
    for (const t of article.querySelectorAll('.pst-scrollable-table-container')) {
      if (t.scrollWidth <= t.clientWidth + 1 || !t.checkVisibility()) continue;
      const size = `${t.scrollWidth} px in ${t.clientWidth} px`;
      found.tables.push(`${where(t)}: ${size}: ` +
        t.querySelector('tr').innerText.replace(/\s+/g, ' | ').slice(0, 90));
    }
    // 4. figures: within the column, and links to their own files
    for (const img of article.querySelectorAll('img')) {
      if (!img.checkVisibility()) continue;
      const column = (img.closest('.cell_output, figure') || img.parentElement)
        .parentElement.getBoundingClientRect();
      const r = img.getBoundingClientRect();
      const name = img.src.split('/').pop().slice(0, 16);
      if (r.right > column.right + 1 || r.left < column.left - 1) {
        found.images.push(`${name}: ${Math.round(r.width)} px wide, ` +
          `${Math.round(r.left)}-${Math.round(r.right)} in ` +
          `${Math.round(column.left)}-${Math.round(column.right)}`);
      }
      const link = img.closest('a.image-reference');
      if (!link || link.href !== img.src) found.unlinked.push(name);
    }
  } finally {
    opened.forEach((d) => { d.open = false; });
  }
  return found;
}"""

#: The look of a closed collapsed block: its box, its title bar, its chevron.
LOOK = r"""(block) => {
  const s = (el, pseudo) => getComputedStyle(el, pseudo || null);
  const summary = block.querySelector(':scope > summary');
  const box = s(block), bar = s(summary), chevron = s(summary, '::before');
  return {
    'edge': [box.borderLeftWidth, box.borderLeftStyle, box.borderLeftColor],
    'radius': box.borderRadius, 'background': box.backgroundColor,
    'shadow': box.boxShadow, 'padding': box.padding,
    'bar': bar.backgroundColor, 'text': bar.color, 'weight': bar.fontWeight,
    'font': `${bar.fontSize} ${bar.fontFamily}`, 'bar padding': bar.padding,
    'bar display': bar.display, 'cursor': bar.cursor,
    'chevron': `${chevron.maskImage} ${chevron.backgroundColor} ${chevron.width}`,
    'chevron place': `${chevron.left} ${chevron.top}`,
  };
}"""
BLOCKS = (
    "article :is(details.why, details.hint, details.deeper, "
    "div.cell details.hide, details.bl-reveal)"
)


_READINGS: dict[str, dict] = {}


def reading(p, page: str) -> dict:
    """The page read once at its current width (cached per page and width:
    the tests below share one reading)."""
    key = f"{page}@{p.page.viewport_size['width']}"
    if key not in _READINGS:
        p.wait_for_math()
        p.wait_for_widgets()
        _READINGS[key] = p.page.evaluate(READ)
    return _READINGS[key]


@pytest.mark.parametrize("page", PAGES)
def test_no_raw_tex(shared_page, page):
    found = reading(shared_page(page + ".html"), page)["tex"]
    assert not found, f"{page}: raw TeX in the text:\n" + "\n".join(found)


@pytest.mark.parametrize("page", CHAPTERS)
def test_printed_sentences_wrap_in_their_box(shared_page, page):
    found = reading(shared_page(page + ".html"), page)
    assert not found["sentences"], (
        f"{page}: printed sentences wider than their box at 1280 px:\n"
        + "\n".join(found["sentences"])
    )
    assert not found["unwrapped"], (
        f"{page}: verdicts or errors printed as table lines (they do not "
        "wrap):\n" + "\n".join(found["unwrapped"])
    )


@pytest.mark.parametrize("page", chapter_params("wide_output"))
def test_printed_tables_fit_the_desktop_column(shared_page, page):
    found = reading(shared_page(page + ".html"), page)["tableLines"]
    assert not found, (
        f"{page}: printed table lines wider than the column at 1280 px:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("page", PAGES)
def test_figures_fit_and_open_at_full_size(shared_page, page):
    found = reading(shared_page(page + ".html"), page)
    assert not found["images"], f"{page}: figures cut: {found['images']}"
    assert not found["unlinked"], (
        f"{page}: figures that are not links to their image file: "
        f"{found['unlinked']}"
    )


@pytest.mark.parametrize("page", chapter_params("wide_math", PAGES))
def test_display_math_fits_the_desktop_column(shared_page, page):
    found = reading(shared_page(page + ".html"), page)["math"]
    assert not found, (
        f"{page}: display math wider than the column at 1280 px:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize("page", chapter_params("wide_tables", PAGES))
def test_tables_fit_the_desktop_column(shared_page, page):
    found = reading(shared_page(page + ".html"), page)["tables"]
    assert not found, (
        f"{page}: tables wider than the column at 1280 px:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("page", CHAPTERS)
def test_collapsed_blocks_have_one_look(shared_page, page):
    """Why, Hint, Deeper, a solution, a hidden output and a source reveal:
    closed, each looks like the first."""
    p = shared_page(page + ".html")
    p.wait_for_widgets()
    # one query for them all (a locator per block cost 2 CPU-seconds a page)
    looks = p.page.locator(BLOCKS).evaluate_all(
        "(blocks) => blocks.map((block) => "
        f"[block.querySelector(':scope > summary').innerText, ({LOOK})(block)])"
    )
    if page in APPENDICES and not looks:
        return  # an appendix may have none
    assert looks, f"{page}: no collapsed blocks"
    first_title, first = looks[0]
    different = [
        f"{title!r}: "
        + ", ".join(
            f"{k} {v!r} (not {first[k]!r})"
            for k, v in look.items()
            if v != first[k]
        )
        for title, look in looks[1:]
        if look != first
    ]
    assert not different, (
        f"{page}: collapsed blocks that do not look like {first_title!r}:\n"
        + "\n".join(different)
    )


#: The chapters the issue read in dark mode.
DARK = [
    "notebooks/02_topological_sort",
    "notebooks/06_gpt_backward",
    "notebooks/10_memory_and_precision",
]

DARK_LOOK = r"""() => {
  const lum = (c) => {
    const [r, g, b] = c.match(/[\d.]+/g).map(Number);
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const out = {steppers: [], figures: [], drawings: []};
  for (const st of document.querySelectorAll('article .bl-stepper')) {
    const s = getComputedStyle(st);
    const panel = getComputedStyle(st.closest('.widget-subarea'));
    const box = st.querySelector('.bl-stepper-graph svg polygon[fill="#ffffff"]');
    out.steppers.push({
      card: lum(s.backgroundColor), ink: lum(s.color),
      panel: panel.backgroundColor,
      graphBox: box ? lum(getComputedStyle(box).fill) : null,
    });
  }
  const images = 'article .cell_output img, article figure img';
  for (const img of document.querySelectorAll(images)) {
    const s = getComputedStyle(img);
    const entry = {filter: s.filter, background: s.backgroundColor};
    (img.src.endsWith('.svg') ? out.drawings : out.figures).push(entry);
  }
  return out;
}"""


@pytest.mark.parametrize("page", DARK)
def test_dark_mode_steppers_and_figures(shared_page, page):
    p = shared_page(page + ".html", mode="dark")
    p.wait_for_widgets()
    look = p.page.evaluate(DARK_LOOK)
    for k, st in enumerate(look["steppers"]):
        assert st["card"] < 60 < st["ink"], (
            f"{page}: stepper {k} is not dark: {st}"
        )
        assert st["panel"] == "rgba(0, 0, 0, 0)", (
            f"{page}: stepper {k} sits on the theme's light panel: {st}"
        )
        if st["graphBox"] is not None:
            assert st["graphBox"] < 60, f"{page}: stepper {k}'s graph: {st}"
    for k, fig in enumerate(look["figures"]):
        assert fig["filter"] == "none", f"{page}: figure {k} is dimmed: {fig}"
        assert fig["background"] == "rgb(255, 255, 255)", f"{page}: figure {k}"
    for k, drawing in enumerate(look["drawings"]):
        assert "invert" in drawing["filter"], f"{page}: drawing {k}: {drawing}"
        assert drawing["background"] == "rgba(0, 0, 0, 0)", f"{page}: {drawing}"
    if page == DARK[0]:
        assert look["steppers"] and look["figures"], f"{page}: {look}"
    name = page.split("/")[-1]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    p.page.mouse.move(0, 0)
    for kind, selector in (
        ("stepper", "article .bl-stepper"),
        ("figure", "article .cell_output img"),
    ):
        found = p.page.locator(selector)
        if found.count():
            found.first.scroll_into_view_if_needed()
            expect(found.first).to_be_visible()
            found.first.screenshot(
                path=str(SCREENSHOTS / f"dark_{name}_{kind}.png")
            )
