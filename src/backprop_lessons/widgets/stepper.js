// Front end of backprop_lessons' steppers: shows one precomputed frame at a
// time.  Every frame (SVG + HTML) is in the model's state, so stepping needs
// no kernel.  Only anywidget's portable API is used (works with anywidget
// 0.9 / ipywidgets 7.7 on Colab and anywidget 0.11 / ipywidgets 8).

// Icons as inline SVG paths: font glyphs such as U+23EE are missing on many systems.
const ICONS = {
  reset: "M3 2h2v12H3zM14 2v12L6 8z",
  prev: "M12 2v12L4 8z",
  play: "M4 2v12l10-6z",
  pause: "M4 2h3v12H4zM9 2h3v12H9z",
  next: "M4 2v12l8-6z",
};

// The fill of the node being processed (viz.graph.HIGHLIGHT), and of the
// nodes receiving a gradient (backward.RECEIVING): the seed step highlights
// no node, only the output it seeds.
const HIGHLIGHT = "#ffd54f";
const RECEIVING = "#ffccbc";

function icon(name) {
  return `<svg class="bl-icon" viewBox="0 0 16 16" aria-hidden="true"><path d="${ICONS[name]}"/></svg>`;
}

function label(b, name, text, iconFirst = true) {
  b.innerHTML = iconFirst ? `${icon(name)}<span>${text}</span>` : `<span>${text}</span>${icon(name)}`;
}

function button(action, text, title, iconFirst = true) {
  const b = document.createElement("button");
  b.type = "button";
  b.className = "bl-btn";
  b.dataset.action = action;
  label(b, action, text, iconFirst);
  b.title = title;
  b.setAttribute("aria-label", title);
  return b;
}

function div(className) {
  const d = document.createElement("div");
  d.className = className;
  return d;
}

function render({ model, el }) {
  el.replaceChildren();  // one view, one stepper: never append a second copy
  const root = div("bl-stepper");
  root.tabIndex = 0;
  // Keys are the stepper's own (Enter or Space on a button, the arrows):
  // JupyterLab's shortcuts skip elements inside one with this attribute.
  root.setAttribute("data-lm-suppress-shortcuts", "true");

  const head = div("bl-stepper-head");
  const title = document.createElement("span");
  title.className = "bl-stepper-title";
  const counter = document.createElement("span");
  counter.className = "bl-stepper-counter";
  head.append(title, counter);

  const caption = div("bl-stepper-caption");
  caption.setAttribute("aria-live", "polite");
  const graph = div("bl-stepper-graph");

  const controls = div("bl-stepper-controls");
  const reset = button("reset", "Reset", "Back to the first step");
  const prev = button("prev", "Prev", "Previous step (left arrow)");
  const play = button("play", "Play", "Play / pause");
  const next = button("next", "Next", "Next step (right arrow)", false);
  const slider = document.createElement("input");
  slider.type = "range";
  slider.className = "bl-slider";
  slider.min = "0";
  slider.step = "1";
  slider.setAttribute("aria-label", "Step");
  controls.append(reset, prev, play, next, slider);

  const info = div("bl-stepper-info");
  const legend = div("bl-stepper-legend");
  root.append(head, caption, graph, controls, info, legend);
  el.appendChild(root);

  let timer = null;
  let shown = -1;
  const frames = () => model.get("frames") || [];
  const last = () => Math.max(0, frames().length - 1);
  const clamp = (i) => Math.min(Math.max(0, i | 0), last());

  // On a narrow screen the graph scrolls sideways: bring the highlighted
  // node (drawn in the highlight colour; on the seed step, the output
  // receiving its gradient) to the middle of the graph's box when the frame
  // changes.  Only the box scrolls, never the page.
  function revealCurrent() {
    if (graph.scrollWidth <= graph.clientWidth + 1) return;
    const marked = (fill) => graph.querySelector(
      `polygon[fill="${fill}"], ellipse[fill="${fill}"]`);
    const mark = marked(HIGHLIGHT) || marked(RECEIVING);
    if (!mark) return;
    const box = mark.getBoundingClientRect();
    const outer = graph.getBoundingClientRect();
    const centre = box.left + box.width / 2 - outer.left + graph.scrollLeft;
    graph.scrollLeft = Math.max(0, centre - graph.clientWidth / 2);
  }

  function show() {
    const i = clamp(model.get("index"));
    const f = frames()[i] || { svg: "", html: "", caption: "" };
    if (i !== shown) {
      graph.innerHTML = f.svg;
      caption.innerHTML = f.caption;
      info.innerHTML = f.html;
      shown = i;
      revealCurrent();
    }
    title.textContent = model.get("title");
    legend.innerHTML = model.get("legend");
    counter.textContent = `step ${i} of ${last()}`;
    slider.max = String(last());
    slider.value = String(i);
    prev.disabled = i <= 0;
    reset.disabled = i <= 0;
    next.disabled = i >= last();
    if (play.dataset.state !== (timer ? "pause" : "play")) {
      play.dataset.state = timer ? "pause" : "play";
      label(play, play.dataset.state, timer ? "Pause" : "Play");
    }
    play.setAttribute("aria-pressed", timer ? "true" : "false");
    root.dataset.index = String(i);
  }

  function go(i) {
    i = clamp(i);
    if (i !== model.get("index")) {
      model.set("index", i);
      try {
        model.save_changes();  // syncs to a live kernel; a no-op in the static page
      } catch (e) {
        /* no kernel connection: the front end alone is enough */
      }
    }
    show();
  }

  function stop() {
    if (timer) {
      clearInterval(timer);
      timer = null;
    }
    show();
  }

  function start() {
    if (model.get("index") >= last()) go(0);
    timer = setInterval(() => {
      if (model.get("index") >= last()) stop();
      else go(model.get("index") + 1);
    }, Math.max(200, model.get("interval") || 1200));
    show();
  }

  reset.addEventListener("click", () => { stop(); go(0); });
  prev.addEventListener("click", () => { stop(); go(model.get("index") - 1); });
  next.addEventListener("click", () => { stop(); go(model.get("index") + 1); });
  play.addEventListener("click", () => (timer ? stop() : start()));
  slider.addEventListener("input", () => {
    const target = Number(slider.value);  // read before stop() redraws the slider
    stop();
    go(target);
  });
  root.addEventListener("keydown", (e) => {
    if (e.target === slider) return;  // the slider handles its own arrows
    if (e.key === "ArrowRight") { stop(); go(model.get("index") + 1); e.preventDefault(); }
    if (e.key === "ArrowLeft") { stop(); go(model.get("index") - 1); e.preventDefault(); }
  });

  const redraw = () => { shown = -1; show(); };
  model.on("change:index", show);
  model.on("change:frames", redraw);
  model.on("change:title", show);
  model.on("change:legend", show);
  show();

  return () => {  // cleanup when the view is removed
    if (timer) clearInterval(timer);
    model.off("change:index", show);
    model.off("change:frames", redraw);
    model.off("change:title", show);
    model.off("change:legend", show);
  };
}

export default { render };
