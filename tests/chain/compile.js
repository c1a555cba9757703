// Compiles the test contracts of token/ (TestUSD.sol, the 6-decimal ERC-20 every chain test uses,
// and the attack tests' odd tokens) with solc-js (the npm `solc` package: no compiler download) and
// writes build/<Contract>.json {abi, bytecode} for each. Skips the work when the builds are newer
// than the sources. (The forwarder factory, which ships with the service: compile-forwarder.js.)
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const here = __dirname;
const sources = fs.readdirSync(path.join(here, "token")).filter((f) => f.endsWith(".sol")).sort();
const build = path.join(here, "build");
const lock = path.join(here, "package-lock.json");
const outputs = sources.map((f) => path.join(build, f.replace(/\.sol$/, ".json")));

const newest = Math.max(fs.statSync(lock).mtimeMs, fs.statSync(__filename).mtimeMs,
                        ...sources.map((f) => fs.statSync(path.join(here, "token", f)).mtimeMs));
if (outputs.every((out) => fs.existsSync(out) && fs.statSync(out).mtimeMs >= newest)) process.exit(0);

const input = {
  language: "Solidity",
  sources: Object.fromEntries(sources.map((f) => [f, {content: fs.readFileSync(path.join(here, "token", f), "utf8")}])),
  settings: {optimizer: {enabled: true, runs: 200}, evmVersion: "paris",
             outputSelection: {"*": {"*": ["abi", "evm.bytecode.object"]}}},
};
function findImports(name) {
  try {
    return {contents: fs.readFileSync(path.join(here, "node_modules", name), "utf8")};
  } catch (e) {
    return {error: `not found: ${name}`};
  }
}
const output = JSON.parse(solc.compile(JSON.stringify(input), {import: findImports}));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  console.error(errors.map((e) => e.formattedMessage).join("\n"));
  process.exit(1);
}
fs.mkdirSync(build, {recursive: true});
for (const [i, f] of sources.entries()) {
  const name = f.replace(/\.sol$/, "");
  const contract = output.contracts[f][name];
  fs.writeFileSync(outputs[i] + ".tmp", JSON.stringify({abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object}));
  fs.renameSync(outputs[i] + ".tmp", outputs[i]);
}
