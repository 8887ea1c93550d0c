// Bundle each view's entry (widgets/src/<view>.js, every name not starting with
// "_") into labkit/views/static/<view>.js (ESM, its _*.js helpers and uPlot
// inside) and write static/manifest.json listing each bundle with its size and
// sha256. Helpers (_*.js) are never bundles of their own: Python loads views
// only (labkit.views.bundle_path). labkit/views/_assets.py checks the
// bundles against this manifest; `labkit doctor` reports the result.
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rm, writeFile, rename } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const srcDir = join(here, "src");
const outDir = resolve(here, process.env.LABKIT_WIDGETS_OUT ?? "../labkit/views/static");

// a view is an entry; a helper (_name.js) is bundled into the views that import it
const entries = (await readdir(srcDir)).filter((f) => f.endsWith(".js") && !f.startsWith("_")).sort();
if (entries.length === 0) {
  console.error(`no view entries in ${srcDir}: add a widgets/src/<name>.js`);
  process.exit(1);
}

await rm(outDir, { recursive: true, force: true });
await mkdir(outDir, { recursive: true });
// the graph view's layout worker: bundled to text and inlined where LABKIT_GRAPH_WORKER
// is read (_graph_runner.js starts it from a Blob URL; unbundled, e.g. in node, it is unset)
const worker = await esbuild.build({
  entryPoints: [join(srcDir, "_graph_worker.js")],
  bundle: true,
  format: "iife",
  minify: true,
  target: "es2020",
  write: false,
  logLevel: "warning",
});
await esbuild.build({
  define: { LABKIT_GRAPH_WORKER: JSON.stringify(worker.outputFiles[0].text) },
  entryPoints: entries.map((f) => join(srcDir, f)),
  outdir: outDir,
  bundle: true,
  format: "esm",
  minify: true,
  target: "es2020",
  loader: { ".css": "text" }, // uPlot's stylesheet, injected by _charts.js
  logLevel: "warning",
});

const bundles = [];
for (const entry of entries) {
  const file = entry;
  const bytes = await readFile(join(outDir, file));
  bundles.push({
    name: basename(entry, ".js"),
    file,
    bytes: bytes.length,
    sha256: createHash("sha256").update(bytes).digest("hex"),
  });
}
const manifest = join(outDir, "manifest.json");
await writeFile(`${manifest}.tmp`, `${JSON.stringify({ version: 1, bundles }, null, 2)}\n`);
await rename(`${manifest}.tmp`, manifest);
for (const b of bundles) console.log(`built ${join(outDir, b.file)} (${b.bytes} bytes)`);
