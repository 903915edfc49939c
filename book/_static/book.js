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

  // 2. Scrollable regions reachable by keyboard.  A wide formula (and, on
  // a phone, a graph drawing or a stepper's graph) scrolls sideways inside
  // its box; a box that scrolls must be focusable so that keyboard users
  // can scroll it too (WCAG 2.1.1; axe's scrollable-region-focusable).
  const SCROLLERS = [
    "mjx-container[display='true']",
    ".bd-article span.math.bl-wide",
    ".cell_output.bl-scroll",
    ".bl-stepper-graph",
    ".bl-stepper .bl-table",
  ].join(", ");

  function markScrollable() {
    // Graph drawings (SVG images): their output box scrolls on narrow screens.
    document.querySelectorAll(".cell_output img[src$='.svg']").forEach((img) => {
      img.closest(".cell_output").classList.add("bl-scroll");
    });
    // Inline formulas wider than their line of text scroll (book.css).
    document.querySelectorAll(".bd-article span.math").forEach((math) => {
      const line = math.parentElement.clientWidth;
      math.classList.toggle("bl-wide", line > 0 && math.scrollWidth > line);
    });
    document.querySelectorAll(SCROLLERS).forEach((box) => {
      if (box.scrollWidth > box.clientWidth) {  // as axe judges a scroller
        if (!box.hasAttribute("tabindex")) {
          box.setAttribute("tabindex", "0");
          box.dataset.blScrollFocus = "";
        }
      } else if (box.dataset.blScrollFocus !== undefined) {
        box.removeAttribute("tabindex");
        delete box.dataset.blScrollFocus;
      }
    });
    // The width this layout was marked at (tests wait for it after a resize).
    document.documentElement.dataset.blMarkedWidth = String(window.innerWidth);
  }

  function whenTypeset(callback) {
    const mj = window.MathJax;
    if (mj && mj.startup && mj.startup.promise) mj.startup.promise.then(callback, callback);
    else callback();
  }

  document.addEventListener("DOMContentLoaded", forwardToggles);
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
