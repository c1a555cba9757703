// Compiles the test contracts of token/ (TestUSD.sol, the 6-decimal ERC-20 every chain test uses;
// TestUSDC.sol, the ERC-3009 token of gasless payments; TestToken.sol, of any name, symbol and
// decimals; the attack tests' odd tokens) with the pinned
// solc-js (the npm `solc` package: no compiler download) and compares each with its committed build,
// token/<Contract>.json {abi, bytecode}: exit status 1 and the names of those that differ.
// `--write` writes the builds instead (after changing a source). The tests and `make demo-onchain`
// deploy the committed builds. (The forwarder factory, which ships with the service:
// compile-forwarder.js.)
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const folder = path.join(__dirname, "token");
const sources = fs.readdirSync(folder).filter((f) => f.endsWith(".sol")).sort();

const input = {
  language: "Solidity",
  sources: Object.fromEntries(sources.map((f) => [f, {content: fs.readFileSync(path.join(folder, f), "utf8")}])),
  settings: {optimizer: {enabled: true, runs: 200}, evmVersion: "paris",
             outputSelection: {"*": {"*": ["abi", "evm.bytecode.object"]}}},
};
function findImports(name) {
  try {
    return {contents: fs.readFileSync(path.join(__dirname, "node_modules", name), "utf8")};
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
const differing = [];
for (const f of sources) {
  const name = f.replace(/\.sol$/, "");
  const contract = output.contracts[f][name];
  const text = JSON.stringify({abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object}) + "\n";
  const committed = path.join(folder, name + ".json");
  if (process.argv.includes("--write")) fs.writeFileSync(committed, text);
  else if (!fs.existsSync(committed) || fs.readFileSync(committed, "utf8") !== text) differing.push(name);
}
if (differing.length) {
  console.error(`not what solc-js ${solc.version()} makes of token/: ${differing.join(", ")} (node compile.js --write)`);
  process.exit(1);
}
