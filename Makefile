# Two commands on a fresh machine: `make run` and `make test`. Everything else is a detail.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
FLASK  := $(BIN)/flask --app app
HOST   ?= 127.0.0.1
PORT   ?= 5000
CHAIN  := tests/chain

.PHONY: run demo-live test fuzz bench install install-test clean

## run: create .venv, install, initialise the database, create the demo merchant, start the service
##      and the webhook delivery worker next to it (Ctrl-C stops both)
# The worker is a background job of the recipe's shell, so it ignores the terminal's Ctrl-C; when the
# shell exits, however that happens, its EXIT trap sends the worker one SIGTERM and waits while the
# worker finishes the attempts in flight.
run: $(VENV)/.installed
	$(FLASK) init-db
	$(FLASK) demo-merchant --webhook-url http://127.0.0.1:$(PORT)/demo/webhooks --console-login
	@echo "Service on http://$(HOST):$(PORT), webhook worker alongside  (Ctrl-C stops both)"
	@echo "Demo shop: http://$(HOST):$(PORT)/  (webhooks received: http://$(HOST):$(PORT)/demo/webhooks)"
	@echo "Merchant console: http://$(HOST):$(PORT)/dashboard/  (the console login is printed above)"
	@$(FLASK) deliver-webhooks & worker=$$!; \
	trap 'kill -TERM $$worker 2>/dev/null; wait $$worker' EXIT; \
	trap 'exit 130' INT TERM; \
	FLASK_DEMO_SHOP=1 $(FLASK) run --host $(HOST) --port $(PORT)

## test: create or update .venv with the test extra, install the test chain's npm packages (Hardhat,
##       solc-js, OpenZeppelin: tests/chain), and run the whole suite on SQLite, then again what
##       differs between backends on PostgreSQL (a server the tests start from Debian's postgresql
##       package; docs/storage.md)
test: $(VENV)/.installed-test $(CHAIN)/node_modules/.installed
	TEST_DATABASE=sqlite $(BIN)/pytest
	TEST_DATABASE=postgresql $(BIN)/pytest

## fuzz: schemathesis over every operation of app/openapi.json, FUZZ_EXAMPLES cases per operation,
## and the property tests with 1,000 examples each, all with fresh randomness; prints the
## schemathesis totals (operations, cases, failures)
FUZZ_EXAMPLES ?= 1000
fuzz: $(VENV)/.installed-test
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) HYPOTHESIS_PROFILE=fuzz \
		$(BIN)/pytest -q -p no:cacheprovider tests/api/test_fuzz.py tests/api/test_properties.py

## bench: the benchmarks of bench/README.md (needs Debian's wrk); BENCH_ARGS="--quick" for a smoke run
bench: $(VENV)/.installed-test
	@command -v wrk >/dev/null 2>&1 || { echo "wrk is not installed: apt-get install wrk" >&2; exit 1; }
	$(BIN)/python -m bench.run $(BENCH_ARGS)

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

# The chain tests run a real EVM node (Hardhat 2, Node.js >= 18): `npm ci` from the lock file,
# again whenever it changes. Without Node the chain tests would fail: say so here, loudly.
$(CHAIN)/node_modules/.installed: $(CHAIN)/package.json $(CHAIN)/package-lock.json
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
		echo "*** The chain tests need Node.js >= 18 and npm (Debian: apt-get install nodejs npm)." >&2; \
		echo "*** Without them they FAIL: install them and run make test again." >&2; exit 1; }
	cd $(CHAIN) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

## demo-live: the demo shop taking live stablecoin payments on this machine (docs/payment-button.md):
##      a local Hardhat node with a test token (TUSD, ERC-3009: payable without gas), added with the
##      operator CLI (networks add, assets add --eip3009, networks deploy-factory, merchants
##      set-payout: the payout mode, the payout wallet being the node's dev account #1, the
##      operator's gas key dev account #2's, the relayer's (RELAYER_KEY_FILE) #3's, all published
##      Hardhat test keys), the chain watcher and the webhook worker alongside; the shop's "Test
##      wallet" panel pays, is announced to the button as a browser wallet ("Pay with Demo test
##      wallet", "Pay without gas"), and collects to the payout wallet (or run the `collect` command
##      it prints). A fresh chain and database (in DEMO_DIR) each time; Ctrl-C stops everything.
DEMO_DIR           ?= $(CURDIR)/instance/demo-live
DEMO_RPC_PORT      ?= 8545
DEMO_CONFIRMATIONS ?= 3
DEMO_BLOCK_SECONDS ?= 5
demo-live: $(VENV)/.installed $(CHAIN)/node_modules/.installed
	rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	@export FLASK_DATABASE=$(DEMO_DIR)/preorder.sqlite3 FLASK_DEMO_MERCHANT_FILE=$(DEMO_DIR)/merchant.json; \
	rpc=http://127.0.0.1:$(DEMO_RPC_PORT); worker=; watcher=; \
	(cd $(CHAIN) && HARDHAT_DISABLE_TELEMETRY_PROMPT=true exec node node_modules/hardhat/internal/cli/cli.js \
		node --hostname 127.0.0.1 --port $(DEMO_RPC_PORT)) >$(DEMO_DIR)/node.log 2>&1 & node=$$!; \
	trap 'for p in $$watcher $$worker; do kill -TERM $$p; done 2>/dev/null; for p in $$watcher $$worker; do wait $$p; done; \
		kill -TERM $$node 2>/dev/null; wait $$node' EXIT; \
	trap 'exit 130' INT TERM; \
	set -e; \
	$(FLASK) init-db; \
	token=$$($(FLASK) demo-chain --rpc-url $$rpc --token-build $(CHAIN)/token/TestUSDC.json \
		--block-seconds $(DEMO_BLOCK_SECONDS)); \
	$(FLASK) networks add local --name "Local Hardhat" --chain-id 31337 --testnet --rpc-url $$rpc \
		--confirmations $(DEMO_CONFIRMATIONS); \
	$(FLASK) assets add tusd --network local --symbol TUSD --name "Test USD" --contract $$token --decimals 6 --eip3009; \
	$(FLASK) demo-merchant --webhook-url http://$(HOST):$(PORT)/demo/webhooks --console-login; \
	merchant=$$($(FLASK) demo-merchant --json | $(BIN)/python -c 'import json, sys; print(json.load(sys.stdin)["merchantId"])'); \
	(umask 077 && $(BIN)/python -c 'from app.demo.merchant import DEMO_OPERATOR_KEY; print(DEMO_OPERATOR_KEY)' \
		>$(DEMO_DIR)/operator.key); \
	(umask 077 && $(BIN)/python -c 'from app.demo.merchant import DEMO_RELAYER_KEY; print(DEMO_RELAYER_KEY)' \
		>$(DEMO_DIR)/relayer.key); \
	$(FLASK) networks deploy-factory local --key-file $(DEMO_DIR)/operator.key; \
	$(FLASK) merchants set-payout $$merchant $$($(BIN)/python -c 'from app.demo.merchant import DEMO_PAYOUT_ADDRESS; print(DEMO_PAYOUT_ADDRESS)'); \
	$(FLASK) deliver-webhooks & worker=$$!; \
	$(FLASK) watch-payments --poll-interval 1 & watcher=$$!; \
	echo "Live demo shop: http://$(HOST):$(PORT)/  (local node $$rpc; Ctrl-C stops everything)"; \
	echo "Collect the payments to the payout wallet: FLASK_DATABASE=$$FLASK_DATABASE $(FLASK) collect local --key-file $(DEMO_DIR)/operator.key"; \
	echo "Merchant console: http://$(HOST):$(PORT)/dashboard/  (the console login is printed above)"; \
	echo "This demo has its own database: give every flask command FLASK_DATABASE=$$FLASK_DATABASE"; \
	echo "  e.g. FLASK_DATABASE=$$FLASK_DATABASE $(FLASK) users create EMAIL --merchant $$merchant"; \
	FLASK_DEMO_SHOP=1 FLASK_DEMO_WALLET_RPC_URL=$$rpc FLASK_DEMO_COLLECT_KEY_FILE=$(DEMO_DIR)/operator.key \
		FLASK_RELAYER_KEY_FILE=$(DEMO_DIR)/relayer.key \
		$(FLASK) run --host $(HOST) --port $(PORT)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache tests/artifacts $(CHAIN)/node_modules
