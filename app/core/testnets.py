"""Which networks are test networks. Test-mode merchants are offered test networks only and live
merchants live networks only, and the watcher credits a payment only on a network of its merchant's
mode: free test tokens never pay a live process (docs/payments.md, "Test and live networks").

A network is a test network when the operator added it with `networks add --testnet` (or set it so
with `networks set-mode`), or when its chain id is one of TEST_CHAIN_IDS, whatever the flag: an
operator cannot turn a well-known test chain into a live one by forgetting it. LIVE_CHAIN_IDS are
the well-known live chains: a database upgraded from a release without modes keeps a network of
any other chain id out of live mode (app/data/schema.py) until the operator says.
"""

# EIP-155 chain ids of well-known development chains and public testnets (chainlist.org). Extend
# it when a new testnet becomes common; networks already added follow at once (the rule is applied
# when a network is read, not stored).
TEST_CHAIN_IDS = frozenset({
    31337,     # Hardhat, Anvil (Foundry): local development nodes
    1337,      # Ganache, Geth --dev: local development nodes
    11155111,  # Ethereum Sepolia
    17000,     # Ethereum Holesky
    560048,    # Ethereum Hoodi
    5,         # Ethereum Goerli (retired)
    80002,     # Polygon Amoy
    80001,     # Polygon Mumbai (retired)
    84532,     # Base Sepolia
    421614,    # Arbitrum Sepolia
    11155420,  # OP (Optimism) Sepolia
    97,        # BNB Smart Chain testnet
    43113,     # Avalanche Fuji
    44787,     # Celo Alfajores
    300,       # zkSync Sepolia
    59141,     # Linea Sepolia
    534351,    # Scroll Sepolia
    10200,     # Gnosis Chiado
})


# EIP-155 chain ids of well-known live networks (chainlist.org), whose tokens are real money.
LIVE_CHAIN_IDS = frozenset({
    1,       # Ethereum
    10,      # OP Mainnet (Optimism)
    25,      # Cronos
    56,      # BNB Smart Chain
    100,     # Gnosis
    137,     # Polygon PoS
    250,     # Fantom Opera
    324,     # zkSync Era
    1101,    # Polygon zkEVM
    1284,    # Moonbeam
    5000,    # Mantle
    8453,    # Base
    42161,   # Arbitrum One
    42170,   # Arbitrum Nova
    42220,   # Celo
    43114,   # Avalanche C-Chain
    59144,   # Linea
    81457,   # Blast
    534352,  # Scroll
})


def is_test_network(chain_id: int, testnet_flag) -> bool:
    """A network given with --testnet, or on a well-known test chain."""
    return bool(testnet_flag) or chain_id in TEST_CHAIN_IDS
