"""Talking to EVM nodes: the JSON-RPC client and its proofs of the canonical chain,
addresses and keys, signing, the forwarder contracts, what tokens say of themselves.
It knows no process or merchant; app/chain/ builds the service's chain work on it."""
