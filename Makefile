# Two commands on a fresh machine: `make run` and `make test`. Everything else is a detail.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
FLASK  := $(BIN)/flask --app app
HOST   ?= 127.0.0.1
PORT   ?= 5000
CHAIN  := tests/chain

.PHONY: run demo-onchain demo-live test lint fuzz bench install install-test clean

## run: create .venv, install, initialise the database, create the demo merchant, start the service
##      and the webhook delivery worker next to it (Ctrl-C stops both)
# The worker is a background job of the recipe's shell, so it ignores the terminal's Ctrl-C; when the
# shell exits, however that happens, its EXIT trap sends the worker one SIGTERM and waits while the
# worker finishes the attempts in flight.
run: $(VENV)/.installed
	$(FLASK) init-db
	$(FLASK) demo-merchant --webhook-url http://127.0.0.1:$(PORT)/demo/webhooks --console-login --base-url http://$(HOST):$(PORT)
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

## lint: ruff over the Python tree, its settings in pyproject.toml (CI runs it before the tests)
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .

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

## demo-onchain: the demo shop taking on-chain stablecoin payments on this machine, in test mode
##      (docs/payment-button.md): a local Hardhat node with a test token, set up with the operator
##      CLI, the chain watcher and the webhook worker alongside (scripts/demo-onchain.sh says what it
##      does). A fresh chain and database (in DEMO_DIR, with the demo merchant's keys file) each time;
##      Ctrl-C stops everything. `make demo-live` is its former name.
DEMO_DIR           ?= $(CURDIR)/instance/demo-onchain
DEMO_RPC_PORT      ?= 8545
DEMO_CONFIRMATIONS ?= 3
DEMO_BLOCK_SECONDS ?= 5
demo-onchain: $(VENV)/.installed $(CHAIN)/node_modules/.installed
	@BIN=$(BIN) CHAIN=$(CHAIN) HOST=$(HOST) PORT=$(PORT) DEMO_DIR=$(DEMO_DIR) DEMO_RPC_PORT=$(DEMO_RPC_PORT) \
		DEMO_CONFIRMATIONS=$(DEMO_CONFIRMATIONS) DEMO_BLOCK_SECONDS=$(DEMO_BLOCK_SECONDS) scripts/demo-onchain.sh
demo-live: demo-onchain

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# The versions installed are constraints.txt's: the set the whole suite passed with.
$(VENV)/.installed: setup.cfg pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	touch $@

$(VENV)/.installed-test: setup.cfg pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[test]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache tests/artifacts $(CHAIN)/node_modules
