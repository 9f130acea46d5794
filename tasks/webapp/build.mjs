// Builds the task UI: dist/local/ holds what `empeval serve` sends to annotators; dist/mephisto/task.js is
// the single bundle Mephisto's StaticReactBlueprint serves (its router brings its own index.html, so the
// stylesheet is inlined into the bundle).
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const flavours = { local: "src/local.jsx", mephisto: "src/mephisto.jsx" };
for (const [name, entry] of Object.entries(flavours)) {
  const out = `dist/${name}`;
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    sourcemap: false,
    target: ["chrome100", "firefox100", "safari15"],
    jsx: "automatic",
    outfile: `${out}/task.js`,
    define: { "process.env.NODE_ENV": '"production"' },
    loader: { ".css": "text" },
    logLevel: "warning",
  });
  if (name === "mephisto") {
    console.log(`built ${out}`);
    continue;
  }
  copyFileSync("src/task.css", `${out}/task.css`);
  copyFileSync(`src/${name}.html`, `${out}/index.html`);
  console.log(`built ${out}`);
}
