#!/bin/sh
# The local on-chain demo (`make demo-onchain`, docs/payment-button.md): the demo shop, in test
# mode, taking on-chain stablecoin payments on this machine.
#
# A local Hardhat node with a test token (TUSDC, ERC-3009: payable without gas) and a EUR / USD
# price feed (so a euro order is paid in dollar tokens at its rate), added with the operator CLI
# (networks add, assets add --eip3009, rates add, networks deploy-factory, merchants set-payout:
# the payout mode, the payout wallet being the node's dev account #1, the operator's gas key dev
# account #2's, the relayer's (RELAYER_KEY_FILE) #3's, all published Hardhat test keys), the chain
# watcher and the webhook worker alongside; the shop's "Test wallet" panel pays, is announced to the
# button as a browser wallet ("Pay with Test wallet", "Pay without gas"), and collects to the
# payout wallet (or run the `collect` command it prints). A fresh chain and database (in DEMO_DIR)
# each time.
#
# Stopping: the node, the worker and the watcher are background jobs, so they ignore the terminal's
# Ctrl-C; when this shell exits, however that happens, its EXIT trap sends the watcher and the
# worker one SIGTERM each and waits while they finish what is in flight, then stops the node.
#
# Settings (the Makefile passes its own): HOST, PORT (the shop), DEMO_DIR, DEMO_RPC_PORT,
# DEMO_CONFIRMATIONS, DEMO_BLOCK_SECONDS; BIN (the virtualenv's bin), CHAIN (tests/chain, with its
# npm packages installed). Run from the repository's root.
BIN=${BIN:-.venv/bin}
CHAIN=${CHAIN:-tests/chain}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-5000}
DEMO_DIR=${DEMO_DIR:-$PWD/instance/demo-onchain}
DEMO_RPC_PORT=${DEMO_RPC_PORT:-8545}
DEMO_CONFIRMATIONS=${DEMO_CONFIRMATIONS:-3}
DEMO_BLOCK_SECONDS=${DEMO_BLOCK_SECONDS:-5}
FLASK="$BIN/flask --app app"

rm -rf "$DEMO_DIR" && mkdir -p "$DEMO_DIR" || exit 1
export FLASK_DATABASE="$DEMO_DIR/preorder.sqlite3"  # its demo merchant's keys file sits beside it
rpc=http://127.0.0.1:$DEMO_RPC_PORT
worker=
watcher=
(cd "$CHAIN" && HARDHAT_DISABLE_TELEMETRY_PROMPT=true exec node node_modules/hardhat/internal/cli/cli.js \
    node --hostname 127.0.0.1 --port "$DEMO_RPC_PORT") >"$DEMO_DIR/node.log" 2>&1 &
node=$!
trap 'for p in $watcher $worker; do kill -TERM $p; done 2>/dev/null; for p in $watcher $worker; do wait $p; done;
    kill -TERM $node 2>/dev/null; wait $node' EXIT
trap 'exit 130' INT TERM
set -e

# The chain, the token and the operator's setup.
$FLASK init-db
set -- $($FLASK demo-chain --rpc-url "$rpc" --token-build "$CHAIN/token/TestUSDC.json" \
    --feed-build "$CHAIN/token/TestPriceFeed.json" --block-seconds "$DEMO_BLOCK_SECONDS")
token=$1 feed=$2
$FLASK networks add local --name "Local Hardhat" --chain-id 31337 --testnet --rpc-url "$rpc" \
    --confirmations "$DEMO_CONFIRMATIONS"
$FLASK assets add tusd --network local --symbol TUSDC --name "Test USD Coin" --contract "$token" --decimals 6 --eip3009
$FLASK rates add EUR/USD --network local --feed "$feed"
$FLASK demo-merchant --webhook-url "http://$HOST:$PORT/demo/webhooks" --console-login --base-url "http://$HOST:$PORT"
merchant=$($FLASK demo-merchant --json | "$BIN/python" -c 'import json, sys; print(json.load(sys.stdin)["merchantId"])')
demo_value() {  # a published Hardhat test value of app/demo/merchant.py
    "$BIN/python" -c "from app.demo.merchant import $1; print($1)"
}
(umask 077 && demo_value DEMO_OPERATOR_KEY >"$DEMO_DIR/operator.key")
(umask 077 && demo_value DEMO_RELAYER_KEY >"$DEMO_DIR/relayer.key")
$FLASK networks deploy-factory local --key-file "$DEMO_DIR/operator.key"
$FLASK merchants set-payout "$merchant" "$(demo_value DEMO_PAYOUT_ADDRESS)"

# The loops, then the shop in the foreground.
$FLASK deliver-webhooks & worker=$!
$FLASK watch-payments --poll-interval 1 & watcher=$!
echo "On-chain demo shop (test mode): http://$HOST:$PORT/  (local node $rpc; Ctrl-C stops everything)"
echo "Collect the payments to the payout wallet: FLASK_DATABASE=$FLASK_DATABASE $FLASK collect local --key-file $DEMO_DIR/operator.key"
echo "Merchant console: http://$HOST:$PORT/dashboard/  (the console login is printed above)"
echo "This demo has its own database (and its demo merchant's keys file beside it, $DEMO_DIR/demo-merchant.json):"
echo "  give every flask command FLASK_DATABASE=$FLASK_DATABASE; make run keeps its own"
echo "  e.g. FLASK_DATABASE=$FLASK_DATABASE $FLASK users create EMAIL --merchant $merchant"
FLASK_DEMO_SHOP=1 FLASK_DEMO_WALLET_RPC_URL=$rpc FLASK_DEMO_COLLECT_KEY_FILE=$DEMO_DIR/operator.key \
    FLASK_RELAYER_KEY_FILE=$DEMO_DIR/relayer.key \
    $FLASK run --host "$HOST" --port "$PORT"
