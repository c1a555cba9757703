// The chain tests' node: `hardhat node` on loopback, automining, the default funded dev accounts
// ("test test ... junk"). Sources live in token/ (compiled by compile.js with solc-js), not in
// Hardhat's own contracts/, so the node compiles nothing and never downloads a compiler.
// TEST_CHAIN_ID: the chain id it answers for (tests/support/chain_node.py starts a second node with 137, a
// live network's id).
module.exports = {
  paths: {sources: "./hardhat-sources-unused"},
  networks: {
    hardhat: {
      chainId: Number(process.env.TEST_CHAIN_ID || 31337),
      loggingEnabled: false,
      mining: {auto: true, interval: 0},
    },
  },
};
