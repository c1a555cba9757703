"""Talking to EVM nodes: the JSON-RPC client and the values of its answers (rpc.py), ERC-20
Transfer logs (logs.py), a step's pinned blocks (pins.py), how a block links to a kept one
(canonical.py), addresses and keys, signing, the forwarder contracts, what tokens say of themselves.
It knows no process or merchant, and needs neither a database nor the app's settings: app/chain/
builds the service's chain work on it."""
