// Front end of backprop_lessons' self-checks: a question the reader answers
// on the page, checked right here in the browser.  The question, the answer
// and the feedback are all in the model's state, so checking needs no kernel:
// the rendered book, where no Python runs, checks answers exactly as a live
// notebook does.  `judge` is the rule; selfcheck.py implements the same rule
// in Python (SelfCheck.check), and a browser test compares the two.
//
// Only anywidget's portable API is used (works with anywidget 0.9 /
// ipywidgets 7.7 on Colab and anywidget 0.11 / ipywidgets 8).

const SPACES = /[ \t\n\r\f\v\u00a0\u2009\u202f]/g;  // the same set as selfcheck.py
const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i;
const THOUSANDS = /^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$/;

// The reader's text as a number, or null.  Accepts -3, 0.25, .5, 2e-3,
// 1/4, -3/2, a Unicode minus, spaces, and commas between thousands.
export function parseNumber(text) {
  let s = String(text).replace(SPACES, "").replace(/\u2212/g, "-");
  if (THOUSANDS.test(s)) s = s.replace(/,/g, "");
  const parts = s.split("/");
  if (parts.length > 2 || !parts.every((p) => NUMBER.test(p))) return null;
  const value = parts.length === 2 ? Number(parts[0]) / Number(parts[1]) : Number(parts[0]);
  return Number.isFinite(value) ? value : null;
}

// The verdict for one response: {status, message, detail}.
//   status: "empty" | "invalid" | "correct" | "wrong"
//   state:  the model's state (kind, answer, tolerances, choices, hints, ...)
//   response: the typed text (number) or the chosen index as a string (choice)
export function judge(state, response) {
  const text = String(response ?? "").replace(SPACES, " ").replace(/^ +| +$/g, "");
  if (state.kind === "choice") {
    if (text === "") return { status: "empty", message: "Choose an answer first.", detail: "" };
    const i = Number(text);
    if (i === state.answer) return { status: "correct", message: "Correct.", detail: state.explanation || "" };
    const specific = (state.choice_hints || [])[i] || "";
    return { status: "wrong", message: "Not right yet.", detail: specific || state.hint || "" };
  }
  if (text === "") return { status: "empty", message: "Type an answer first.", detail: "" };
  const x = parseNumber(text);
  if (x === null) {
    return { status: "invalid", message: "That is not a number this check can read.",
             detail: "Type for example -3, 0.25, 1/4 or 2e-3." };
  }
  const a = state.answer;
  const allowed = Math.max(state.tolerance, state.rel_tolerance * Math.abs(a));
  if (Math.abs(x - a) <= allowed) return { status: "correct", message: "Correct.", detail: state.explanation || "" };
  if (a !== 0 && Math.abs(-x - a) <= allowed) {
    return { status: "wrong", message: "Not right yet: the size is right, the sign is not.", detail: state.hint || "" };
  }
  return { status: "wrong", message: "Not right yet.", detail: state.hint || "" };
}

// Unique element ids when one page shows several checks.  The count lives
// on the page (globalThis), not in this module: anywidget may load a fresh
// copy of the module for every widget, and each copy would start at 0.
function nextId() {
  globalThis.__blCheckCount = (globalThis.__blCheckCount || 0) + 1;
  return `bl-check-${globalThis.__blCheckCount}`;
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function stateOf(model) {
  const keys = ["kind", "answer", "tolerance", "rel_tolerance", "choices", "choice_hints", "hint",
                "explanation"];
  return Object.fromEntries(keys.map((k) => [k, model.get(k)]));
}

function typeset(node) {
  // The rendered book loads MathJax 3; a question may hold $...$ math.
  const mj = globalThis.MathJax;
  if (mj && typeof mj.typesetPromise === "function") mj.typesetPromise([node]).catch(() => {});
}

function render({ model, el: host }) {
  host.replaceChildren();  // one view, one check: never append a second copy
  const id = nextId();
  const kind = model.get("kind");
  const root = el("div", "bl-check");
  root.dataset.kind = kind;
  // JupyterLab's keyboard shortcuts (Enter enters a cell's edit mode, ...)
  // would take the reader's keys before the form sees them: Enter would not
  // submit an answer.  Lumino skips the shortcuts of any element inside one
  // carrying this attribute.
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const form = el("form", "bl-check-form");
  form.noValidate = true;

  const question = el(kind === "choice" ? "legend" : "label", "bl-check-question");
  question.innerHTML = model.get("question");
  question.id = `${id}-q`;
  let input = null;
  let radios = [];
  if (kind === "choice") {
    const fieldset = el("fieldset", "bl-check-fieldset");
    fieldset.append(question);
    model.get("choices").forEach((choice, i) => {
      const label = el("label", "bl-check-choice");
      const radio = el("input");
      radio.type = "radio";
      radio.name = id;
      radio.value = String(i);
      const text = el("span");
      text.innerHTML = choice;
      label.append(radio, text);
      fieldset.append(label);
      radios.push(radio);
    });
    form.append(fieldset);
  } else {
    question.htmlFor = `${id}-input`;
    const row = el("div", "bl-check-row");
    input = el("input", "bl-check-input");
    input.type = "text";
    input.id = `${id}-input`;
    input.inputMode = "decimal";
    input.autocomplete = "off";
    input.spellcheck = false;
    input.setAttribute("aria-describedby", `${id}-verdict`);
    row.append(input);
    if (model.get("unit")) row.append(el("span", "bl-check-unit", model.get("unit")));
    form.append(question, row);
  }

  const buttons = el("div", "bl-check-buttons");
  const submit = el("button", "bl-check-btn bl-check-submit", "Check");
  submit.type = "submit";
  const reveal = el("button", "bl-check-btn bl-check-reveal", "Show the answer");
  reveal.type = "button";
  reveal.hidden = true;  // offered after a first wrong attempt
  buttons.append(submit, reveal);
  form.append(buttons);

  // The verdict is announced by screen readers (a polite live region) and
  // never carried by colour alone: it always starts with a word.
  const verdict = el("div", "bl-check-verdict");
  verdict.id = `${id}-verdict`;
  verdict.setAttribute("role", "status");
  verdict.setAttribute("aria-live", "polite");
  const answerBox = el("div", "bl-check-answer");
  answerBox.hidden = true;
  root.append(form, verdict, answerBox);
  host.appendChild(root);
  typeset(root);

  function response() {
    if (kind === "choice") {
      const chosen = radios.find((r) => r.checked);
      return chosen ? chosen.value : "";
    }
    return input.value;
  }

  function save(text, status) {
    model.set("response", text);
    model.set("status", status);
    try {
      model.save_changes();  // syncs to a live kernel; nothing to sync to in the static page
    } catch (e) {
      /* no kernel connection: the front end alone is enough */
    }
  }

  function show(result) {
    verdict.replaceChildren();
    root.dataset.status = result.status;
    const head = el("strong", "bl-check-verdict-head", result.message);
    verdict.append(head);
    // After "Show the answer" the explanation is in view already, in the
    // answer's box: a right answer then gets its verdict alone, not the
    // explanation a second time.
    const explained = result.status === "correct" && !answerBox.hidden;
    if (result.detail && !explained) {
      const more = el("span", "bl-check-verdict-detail");
      more.innerHTML = " " + result.detail;
      verdict.append(more);
      typeset(more);
    }
    if (result.status === "wrong") reveal.hidden = false;
    if (result.status === "correct") reveal.hidden = true;
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const text = response();
    const result = judge(stateOf(model), text);
    show(result);
    if (result.status === "correct" || result.status === "wrong") save(text, result.status);
  });
  // Enter in the number field checks the answer.  A browser submits the form
  // on Enter by itself, but inside JupyterLab's notebook the keypress that
  // would do it is taken (measured: the keydown arrives, no submit follows),
  // so the field submits explicitly, and only once.
  if (input) {
    input.addEventListener("keydown", (event) => {
      if (event.key !== "Enter" || event.isComposing) return;
      event.preventDefault();
      if (typeof form.requestSubmit === "function") form.requestSubmit();
      else form.dispatchEvent(new Event("submit", { cancelable: true }));
    });
  }
  // Changing the answer clears an old verdict, so it never describes another answer.
  form.addEventListener("input", () => {
    if (root.dataset.status) {
      verdict.replaceChildren();
      delete root.dataset.status;
    }
  });
  reveal.addEventListener("click", () => {
    const a = model.get("answer");
    const shown = kind === "choice" ? model.get("choices")[a] : model.get("answer_text") || String(a);
    answerBox.innerHTML = "";
    answerBox.append(el("strong", "", "Answer: "));
    const value = el("span");
    value.innerHTML = shown;
    answerBox.append(value);
    if (model.get("explanation")) {
      const why = el("span");
      why.innerHTML = " " + model.get("explanation");
      answerBox.append(why);
    }
    answerBox.hidden = false;
    reveal.hidden = true;
    typeset(answerBox);
  });
}

export default { render };
