# Two commands on a fresh machine: `make run` and `make test`. Everything else is a detail.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
FLASK  := $(BIN)/flask --app app
HOST   ?= 127.0.0.1
PORT   ?= 5000

.PHONY: run test fuzz install install-test clean

## run: create .venv, install, initialise the database, create the demo merchant, start the service
run: $(VENV)/.installed
	$(FLASK) init-db
	$(FLASK) demo-merchant
	@echo "Service on http://$(HOST):$(PORT)  (Ctrl-C stops it)"
	$(FLASK) run --host $(HOST) --port $(PORT)

## test: create or update .venv with the test extra and run the whole suite
test: $(VENV)/.installed-test
	$(BIN)/pytest

## fuzz: schemathesis over every operation of app/openapi.json, FUZZ_EXAMPLES cases per operation,
## and the property tests with 1,000 examples each, all with fresh randomness; prints the
## schemathesis totals (operations, cases, failures)
FUZZ_EXAMPLES ?= 1000
fuzz: $(VENV)/.installed-test
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) HYPOTHESIS_PROFILE=fuzz \
		$(BIN)/pytest -q -p no:cacheprovider tests/test_fuzz.py tests/test_properties.py

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e .
	touch $@

$(VENV)/.installed-test: setup.cfg pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@ $(VENV)/.installed

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache tests/artifacts
