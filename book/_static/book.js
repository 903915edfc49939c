// Small fixes to the theme's behaviour, loaded on every page of the book.
(function () {
  "use strict";

  // 1. Sidebar toggles.  pydata-sphinx-theme 0.17 adds its own hidden
  // `.primary-toggle` (and `.secondary-toggle`) to the top bar, ahead of the
  // visible buttons sphinx-book-theme puts in the article header.  Both
  // themes attach their click handlers to the *first* element of each class
  // only (document.querySelector), so the visible buttons do nothing, on a
  // phone (open the sidebar as a dialog) and on a desktop (collapse it).
  // Upstream: pydata-sphinx-theme #2451, sphinx-book-theme #988.  Forward a
  // click on any later toggle to the first one, whose handlers are the real
  // ones; when a theme fixes this, the forwarding finds one element per
  // class and does nothing.
  function forwardToggles() {
    for (const cls of ["primary-toggle", "secondary-toggle"]) {
      const toggles = Array.from(document.querySelectorAll("." + cls));
      const first = toggles[0];
      toggles.slice(1).forEach((toggle) => {
        toggle.addEventListener("click", (event) => {
          event.preventDefault();
          event.stopPropagation();
          first.click();
        });
      });
    }
  }

  // 2. The sidebar opens at its top.  The theme scrolls the book's
  // navigation so that the current page's link sits a quarter of the way
  // down (or where the previous page left it), which hides the book's title
  // on every later page.  Scroll only as far as it takes to show the
  // current page's link, and not at all when it is in view from the top.
  function sidebarFromTheTop() {
    const sidebar = document.querySelector("div.bd-sidebar");
    const nav = document.querySelector(".bd-docs-nav");
    if (!sidebar || !nav) return;
    const links = nav.querySelectorAll("a.current, li.current > a");
    const link = links[links.length - 1];
    if (!link) return;
    const top = sidebar.getBoundingClientRect().top - sidebar.scrollTop;
    const bottom = link.getBoundingClientRect().bottom - top;
    const margin = 48;  // the link, and a little of what follows it
    sidebar.scrollTop = Math.max(0, bottom + margin - sidebar.clientHeight);
  }

  // 3. Scrollable regions: reachable by keyboard, and visibly scrollable.
  // A wide formula, a printed table, a code line (and, on a phone, a
  // stepper's graph) scrolls sideways inside its box.  A box that scrolls
  // must be focusable so that keyboard users can scroll it too (WCAG
  // 2.1.1; axe's scrollable-region-focusable), and its edge fades where
  // more is hidden (book.css: bl-more-left / bl-more-right), since a phone
  // shows no scroll bar until the reader scrolls.
  const SCROLLERS = [
    "mjx-container[display='true']",
    ".bd-article span.math.bl-wide",
    ".bd-article .cell_output pre",
    ".bd-article .cell_input pre",
    ".bd-article .bl-source pre",
    ".bd-article .pst-scrollable-table-container",
    ".bl-stepper-graph",
    ".bl-stepper .bl-table",
  ].join(", ");

  function showMore(box) {
    const more = box.scrollWidth - box.clientWidth;
    box.classList.toggle("bl-more-left", more > 1 && box.scrollLeft > 1);
    box.classList.toggle("bl-more-right", more > 1 && box.scrollLeft < more - 1);
  }

  function markScrollable() {
    // Inline formulas wider than their line of text scroll (book.css).
    // (A formula kept with its punctuation sits in an inline span.bl-nobreak:
    // the line is that span's parent.)
    document.querySelectorAll(".bd-article span.math").forEach((math) => {
      const host = math.parentElement.closest(":not(.bl-nobreak)");
      const line = host ? host.clientWidth : 0;
      math.classList.toggle("bl-wide", line > 0 && math.scrollWidth > line);
    });
    document.querySelectorAll(SCROLLERS).forEach((box) => {
      if (box.scrollWidth > box.clientWidth) {  // as axe judges a scroller
        if (!box.hasAttribute("tabindex") || box.tabIndex < 0) {
          box.setAttribute("tabindex", "0");
          box.dataset.blScrollFocus = "";
        }
      } else if (box.dataset.blScrollFocus !== undefined) {
        box.removeAttribute("tabindex");
        delete box.dataset.blScrollFocus;
      }
      showMore(box);
    });
    // The width this layout was marked at (tests wait for it after a resize).
    document.documentElement.dataset.blMarkedWidth = String(window.innerWidth);
  }

  function whenTypeset(callback) {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(callback, callback);
    else callback();
  }

  document.addEventListener("DOMContentLoaded", () => {
    forwardToggles();
    sidebarFromTheTop();
  });
  // Scroll events do not bubble: one listener, capturing, for every box.
  document.addEventListener("scroll", (event) => {
    const box = event.target;
    if (box instanceof Element && box.matches(SCROLLERS)) showMore(box);
  }, { capture: true, passive: true });
  // Opening a collapsed block lays its content out: look at it then.
  document.addEventListener("toggle", () => requestAnimationFrame(markScrollable),
    { capture: true });
  window.addEventListener("load", () => {
    whenTypeset(markScrollable);
    // Widgets render after the page loads: look again when they appear.
    let queued = false;
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; markScrollable(); });
    }).observe(document.body, { childList: true, subtree: true });
  });
  let pending = null;
  window.addEventListener("resize", () => {
    clearTimeout(pending);
    pending = setTimeout(markScrollable, 150);
  });
})();
