"""Live payments on EVM networks: deposit addresses, the JSON-RPC client, the chain watcher."""
