// The book's calculators (docs/_ext/aiinfra_book/calculators.py): a form made from
// an aiinfra command's own flags; the answer computed by the package itself in a
// Web Worker (calculator-worker.mjs, Pyodide), shown as a table and a bar chart.
const SVG = "http://www.w3.org/2000/svg";
let worker = null;
let nextId = 0;
const waiting = new Map();

function getWorker() {
  if (worker === null) {
    worker = new Worker(new URL("calculator-worker.mjs", import.meta.url), { type: "module" });
    worker.onmessage = (event) => {
      const done = waiting.get(event.data.id);
      waiting.delete(event.data.id);
      if (done) done(event.data);
    };
  }
  return worker;
}

function ask(message) {
  return new Promise((resolve) => {
    const id = nextId++;
    waiting.set(id, resolve);
    getWorker().postMessage({ id, ...message });
  });
}

function el(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== null) node.textContent = text;
  return node;
}

function fill(template, values) {
  return template.replace(/\{(\w+)\}/g, (_, key) => (key in values ? values[key] : `{${key}}`));
}

function figure(spec, result, words) {
  const [labelColumn, valueColumn] = spec.figure;
  const bars = result.bars; // aiinfra.calculator.forms.figure: (label, value) pairs
  const word = (w) => words[`calc_word:${w}`] ?? w;
  const rowH = 26;
  const left = 270;
  const width = 720;
  const top = 30;
  const height = top + rowH * bars.length + 10;
  const max = Math.max(...bars.map((b) => b[1]), 1e-12);
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  svg.setAttribute("class", "calc-figure");
  svg.setAttribute("role", "img");
  const title = document.createElementNS(SVG, "text");
  title.setAttribute("x", 0);
  title.setAttribute("y", 18);
  title.setAttribute("class", "calc-figure-title");
  title.textContent = fill(words.calc_figure, { column: word(valueColumn), row: word(labelColumn) });
  svg.appendChild(title);
  bars.forEach(([name, value], i) => {
    const y = top + i * rowH;
    const w = ((width - left - 90) * value) / max;
    const text = document.createElementNS(SVG, "text");
    text.setAttribute("x", left - 8);
    text.setAttribute("y", y + rowH * 0.65);
    text.setAttribute("text-anchor", "end");
    text.textContent = word(name);
    const rect = document.createElementNS(SVG, "rect");
    rect.setAttribute("x", left);
    rect.setAttribute("y", y + 4);
    rect.setAttribute("width", Math.max(w, 1));
    rect.setAttribute("height", rowH - 8);
    const number = document.createElementNS(SVG, "text");
    number.setAttribute("x", left + Math.max(w, 1) + 6);
    number.setAttribute("y", y + rowH * 0.65);
    number.textContent = String(value);
    svg.append(text, rect, number);
  });
  return svg;
}

function setUp(section) {
  const spec = JSON.parse(section.dataset.spec);
  const words = JSON.parse(section.dataset.words);
  const base = new URL(section.dataset.base, document.baseURI).href;
  const word = (w) => words[`calc_word:${w}`] ?? w;
  const body = section.querySelector(".calc-body");
  const form = el("form", { class: "calc-form", novalidate: "" });
  const inputs = new Map();
  const errors = new Map();
  let config = null;
  for (const field of spec.fields) {
    const row = el("div", { class: "calc-field" });
    const id = `calc-${spec.kind}-${field.flag.slice(2)}`;
    const name = el("label", { for: id });
    name.append(el("span", { class: "calc-name" }, words[`calc_field:${field.flag}`] ?? field.flag));
    name.append(" ", el("code", {}, field.flag));
    let input;
    if (field.kind === "bool") {
      input = el("input", { type: "checkbox", id, "data-flag": field.flag });
      input.checked = Boolean(field.default);
    } else if (field.kind === "choice" || field.kind === "model") {
      input = el("select", { id, "data-flag": field.flag });
      for (const choice of field.choices) {
        const shown = choice === "config.json" ? words.calc_pasted : choice;
        const option = el("option", { value: choice }, shown);
        if (choice.toLowerCase() === String(field.default).toLowerCase()) option.selected = true;
        input.append(option);
      }
    } else {
      input = el("input", { type: "text", id, "data-flag": field.flag, value: field.default });
    }
    input.title = field.help;
    const error = el("span", { class: "calc-field-error", role: "alert" });
    error.hidden = true;
    row.append(name, input, error);
    form.append(row);
    inputs.set(field.flag, input);
    errors.set(field.flag, error);
    if (field.kind === "model") {
      config = el("textarea", { class: "calc-config", rows: "6", placeholder: words.calc_config });
      config.hidden = input.value !== "config.json";
      input.addEventListener("change", () => {
        config.hidden = input.value !== "config.json";
      });
      form.append(config);
    }
  }
  const button = el("button", { type: "submit", class: "calc-run" }, words.calc_run);
  const status = el("p", { class: "calc-status", "aria-live": "polite" });
  const formError = el("p", { class: "calc-error", role: "alert" });
  formError.hidden = true;
  form.append(button);
  const command = el("p", { class: "calc-command" });
  const result = el("div", { class: "calc-result" });
  body.append(form, status, formError, command, result);

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const values = {};
    for (const [flag, input] of inputs) {
      values[flag] = input.type === "checkbox" ? input.checked : input.value;
    }
    for (const error of errors.values()) error.hidden = true;
    formError.hidden = true;
    button.disabled = true;
    const first = !section.ownerDocument.calcStarted;
    section.ownerDocument.calcStarted = true;
    status.textContent = first ? words.calc_loading : words.calc_running;
    section.dataset.state = "running";
    const start = performance.now();
    const answer = await ask({
      base,
      wheel: section.dataset.wheel,
      kind: spec.kind,
      values,
      config: config ? config.value : "",
    });
    const seconds = ((performance.now() - start) / 1000).toFixed(1);
    button.disabled = false;
    if (answer.failure) {
      section.ownerDocument.calcStarted = false;
      status.textContent = fill(words.calc_failed, { error: answer.failure });
      section.dataset.state = "failed";
      return;
    }
    const r = answer.result;
    command.textContent = "";
    command.append(words.calc_command, " ", el("code", {}, ["aiinfra", ...r.argv].join(" ")));
    if (!r.ok) {
      status.textContent = "";
      const target = r.flag && errors.has(r.flag) ? errors.get(r.flag) : formError;
      target.textContent = `${words.calc_error} ${r.message}`;
      target.hidden = false;
      result.replaceChildren();
      section.dataset.state = "error";
      return;
    }
    status.textContent = fill(words.calc_done, { seconds });
    const table = el("table", { class: "calc-table table" });
    const head = el("tr");
    for (const c of r.columns) head.append(el("th", {}, word(c)));
    const thead = el("thead");
    thead.append(head);
    table.append(thead);
    const rows = el("tbody");
    r.rows.forEach((row, i) => {
      const tr = el("tr");
      row.forEach((cell, j) => {
        tr.append(el("td", {}, typeof cell === "string" ? word(cell) : r.cells[i][j]));
      });
      rows.append(tr);
    });
    table.append(rows);
    const wrap = el("div", { class: "calc-table-wrap" });
    wrap.append(table);
    const parts = [wrap];
    if (r.note) parts.push(el("p", { class: "calc-note" }, word(r.note)));
    parts.push(figure(spec, r, words));
    result.replaceChildren(...parts);
    section.dataset.state = "done";
    section.dataset.seconds = seconds;
  });
}

for (const section of document.querySelectorAll("section.aiinfra-calculator:not([data-ready])")) {
  section.dataset.ready = "1";
  setUp(section);
}
