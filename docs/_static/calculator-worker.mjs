// The book's calculators, off the page's thread: Pyodide runs the aiinfra package
// (a wheel built with the site) and answers each form with
// aiinfra.calculator.forms.run, which runs `aiinfra <command> --json`.
// Everything is loaded from the site itself (../_static/pyodide/), never a CDN.
let ready = null;

async function start(base, wheel) {
  const { loadPyodide } = await import(new URL("pyodide/pyodide.mjs", base).href);
  const py = await loadPyodide({ indexURL: new URL("pyodide/", base).href });
  const response = await fetch(new URL(wheel, base).href);
  if (!response.ok) throw new Error(`${wheel}: HTTP ${response.status}`);
  py.unpackArchive(await response.arrayBuffer(), "wheel");
  py.runPython("import aiinfra.calculator.forms");
  return py;
}

onmessage = async (event) => {
  const { id, base, wheel, kind, values, config } = event.data;
  try {
    ready ??= start(base, wheel);
    const py = await ready;
    const run = py.pyimport("aiinfra.calculator.forms").run;
    const dumps = py.pyimport("json").dumps;
    const args = py.toPy(values);
    const answer = dumps(run(kind, args, config));
    args.destroy();
    postMessage({ id, result: JSON.parse(answer) });
  } catch (error) {
    ready = null; // the next try starts again
    postMessage({ id, failure: String(error && error.message ? error.message : error) });
  }
};
