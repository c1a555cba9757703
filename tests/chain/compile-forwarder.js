// Compiles a forwarder factory of app/evm/contracts with the pinned solc-js (package.json) and the
// settings below, and prints {"compiler", "settings", "ForwarderFactory": {abi, bytecode,
// deployedBytecode}, "Forwarder": {abi, bytecode}} as JSON: what the .json beside the source must
// hold byte for byte (tests/chain/test_forwarder_contract.py checks it). The first argument names
// the source: ForwarderFactory (the default, the current factory) or ForwarderFactory-v1 (the first
// release's, kept for the deposit addresses it made). `--write` updates the .json.
// The settings are part of the deposit addresses (the Forwarder's creation code is hashed into each):
// the CBOR metadata is left out so that a comment or a path does not change the bytes.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const contracts = path.resolve(__dirname, "..", "..", "app", "evm", "contracts");
const name = process.argv.slice(2).find((arg) => !arg.startsWith("--")) || "ForwarderFactory";
if (!/^ForwarderFactory(-v\d+)?$/.test(name)) {
  console.error(`unknown source ${name}`);
  process.exit(2);
}
const SETTINGS = {
  optimizer: {enabled: true, runs: 200},
  evmVersion: "cancun",
  metadata: {appendCBOR: false},
  outputSelection: {"*": {"*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"]}},
};
const input = {
  language: "Solidity",
  // one source unit name for every version: the bytes never depend on the file's name
  sources: {"ForwarderFactory.sol": {content: fs.readFileSync(path.join(contracts, name + ".sol"), "utf8")}},
  settings: SETTINGS,
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  console.error(errors.map((e) => e.formattedMessage).join("\n"));
  process.exit(1);
}
const built = output.contracts["ForwarderFactory.sol"];
const result = {
  compiler: "solc-js " + solc.version(),
  settings: {optimizer: SETTINGS.optimizer, evmVersion: SETTINGS.evmVersion, metadata: SETTINGS.metadata},
  ForwarderFactory: {
    abi: built.ForwarderFactory.abi,
    bytecode: "0x" + built.ForwarderFactory.evm.bytecode.object,
    deployedBytecode: "0x" + built.ForwarderFactory.evm.deployedBytecode.object,
  },
  Forwarder: {abi: built.Forwarder.abi, bytecode: "0x" + built.Forwarder.evm.bytecode.object},
};
const text = JSON.stringify(result, null, 1) + "\n";
if (process.argv.includes("--write")) fs.writeFileSync(path.join(contracts, name + ".json"), text);
else process.stdout.write(text);
