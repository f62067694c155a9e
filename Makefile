# graymq — `make demo` runs a scripted gray release on a local cluster, `make test` the suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PG_BIN := $(firstword $(wildcard /usr/lib/postgresql/*/bin))
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test unit lint proto demo system-deps clean bench

test: $(STAMP) system-deps
	$(BIN)/pytest

unit: $(STAMP)
	$(BIN)/pytest -m unit

demo: $(STAMP)
	$(BIN)/python -m gray_controller.demo

# Benchmarks: graymq vs Redis Streams vs NATS JetStream; `python -m bench` installs the Debian packages
# it needs (redis-server, nats-server, postgresql) when missing. BENCH_ARGS="latency --repeat 3" etc.
bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[server,bench]'
	$(BIN)/python -m bench $(BENCH_ARGS)

# Reinstall only when the project's dependency list changes.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[server,spark,dev]'
	touch $(STAMP)

# PostgreSQL server binaries for the test fixtures, Java for Spark: installed when missing.
system-deps:
	@if [ -z "$(PG_BIN)" ] || [ ! -x "$(PG_BIN)/initdb" ]; then \
		echo "installing PostgreSQL server binaries"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql >/dev/null; \
	fi
	@if ! command -v java >/dev/null 2>&1; then \
		echo "installing Java for Spark"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	fi

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy protocol broker_ext client nameserver gray_controller

proto: $(STAMP)
	$(BIN)/python -m protocol.codegen

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
