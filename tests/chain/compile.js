// Compiles token/TestUSD.sol with solc-js (the npm `solc` package: no compiler download) and writes
// build/TestUSD.json {abi, bytecode}. Skips the work when the build is newer than the sources.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const here = __dirname;
const source = path.join(here, "token", "TestUSD.sol");
const out = path.join(here, "build", "TestUSD.json");
const lock = path.join(here, "package-lock.json");

const newest = Math.max(fs.statSync(source).mtimeMs, fs.statSync(lock).mtimeMs);
if (fs.existsSync(out) && fs.statSync(out).mtimeMs >= newest) process.exit(0);

const input = {
  language: "Solidity",
  sources: {"TestUSD.sol": {content: fs.readFileSync(source, "utf8")}},
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
const contract = output.contracts["TestUSD.sol"].TestUSD;
fs.mkdirSync(path.dirname(out), {recursive: true});
fs.writeFileSync(out + ".tmp", JSON.stringify({abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object}));
fs.renameSync(out + ".tmp", out);
