// The chain tests' node: `hardhat node` on loopback, automining, the default funded dev accounts
// ("test test ... junk"). Sources live in token/ (compiled by compile.js with solc-js), not in
// Hardhat's own contracts/, so the node compiles nothing and never downloads a compiler.
module.exports = {
  paths: {sources: "./hardhat-sources-unused"},
  networks: {
    hardhat: {
      chainId: 31337,
      loggingEnabled: false,
      mining: {auto: true, interval: 0},
    },
  },
};
