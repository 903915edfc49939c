// Front end of backprop_lessons' SourceReveal: a closed <details> box whose
// summary names a function; opening it shows the function's source, which
// is in the model's state.  A native <details>: it opens without a kernel
// (the rendered book), its content is neither shown nor read aloud while it
// is closed, and keyboards and screen readers know it.  Only anywidget's
// portable API is used (anywidget 0.9 on Colab, 0.11 elsewhere).

function render({ model, el }) {
  el.replaceChildren();  // one view, one box
  const box = document.createElement("details");
  box.className = "bl-reveal";
  // Enter on the summary opens the box; JupyterLab's shortcuts (Enter
  // enters a cell's edit mode) skip elements inside one with this attribute.
  box.setAttribute("data-lm-suppress-shortcuts", "true");
  const summary = document.createElement("summary");
  summary.textContent = model.get("summary");
  const body = document.createElement("div");
  body.className = "bl-reveal-body";
  body.innerHTML = model.get("source_html");
  box.append(summary, body);
  el.appendChild(box);
}

export default { render };
