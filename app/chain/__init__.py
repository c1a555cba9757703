"""The service's chain work, built on app/evm: the chain watcher, the proofs of blocks on the chain
it keeps (proofs.py), refunds settled from the chain, collect and its records, the gasless relayer,
reconcile, the browser wallet's collections."""
