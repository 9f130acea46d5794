// Builds the task UI: dist/local/ holds what `empeval serve` sends to annotators.
import { build } from "esbuild";
import { copyFileSync, mkdirSync } from "node:fs";

const flavours = { local: "src/local.jsx" };
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
    logLevel: "warning",
  });
  copyFileSync("src/task.css", `${out}/task.css`);
  copyFileSync(`src/${name}.html`, `${out}/index.html`);
  console.log(`built ${out}`);
}
