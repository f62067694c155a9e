# graymq — `make demo` runs a scripted gray release on a local cluster, `make test` the suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Each target installs only what it needs: the demo the server extra, the tests everything.
DEMO_STAMP := $(VENV)/.installed-server
TEST_STAMP := $(VENV)/.installed-test
PG_BIN := $(firstword $(wildcard /usr/lib/postgresql/*/bin))
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: test unit lint proto demo system-deps node-sdk clean bench chaos soak fuzz

# The suite on TEST_WORKERS pytest-xdist workers, each with its own PostgreSQL and scratch directories: most tests
# wait on servers' timers rather than the cores, so more workers than CI's 2 cores pay. --dist loadgroup keeps a
# group on one worker (tests/conftest.py: the README's fixed ports, Spark's JVM, the chaos cases, a module's shared
# cluster); the 30 slowest tests are listed at the end.
TEST_WORKERS ?= 4
test: $(TEST_STAMP) system-deps node-sdk
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup --durations=30

unit: $(TEST_STAMP)
	$(BIN)/pytest -m unit

# Chaos suite (tests/chaos): faults injected by PID (kill -9, SIGTERM, SIGSTOP of broker and name server, a flipped
# byte, a cut commit log) and network partitions (every node in its own network namespace on a bridge, links cut by
# nftables; root only, skipped otherwise) under load, each case checked for lost / duplicated / reordered messages,
# gray isolation, recovery time and how long writes and reads were down; the table prints at the end. Plain `pytest`
# (`make test`) runs a subset (SUBSET in tests/chaos/conftest.py: one case on the pure path, the sync leader cut, the
# gray consumer cuts during a promote); selecting the `chaos` marker runs the whole matrix.
# `make soak` runs it with CHAOS_SOAK_S (default 60) seconds of load a case; CHAOS_FLAP_S (default 60) is how long
# the flapping partition lasts.
CHAOS_SOAK_S ?= 60
chaos: $(TEST_STAMP) system-deps
	$(BIN)/pytest tests/chaos -m chaos

soak: $(TEST_STAMP) system-deps
	CHAOS_SOAK_S=$(CHAOS_SOAK_S) $(BIN)/pytest tests/chaos -m chaos

# Schemathesis over the name server's OpenAPI (a real process on PostgreSQL, admin token): fails on any 500.
# `make test` runs it bounded (10 examples an operation, seed 1); this runs FUZZ_EXAMPLES with a fresh seed.
FUZZ_EXAMPLES ?= 200
fuzz: $(TEST_STAMP) system-deps
	GRAYMQ_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) GRAYMQ_FUZZ_SEED=$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ') \
		$(BIN)/pytest tests/fuzz -s

demo: $(DEMO_STAMP)
	$(BIN)/python -m graymq.gray_controller.demo

# Benchmarks: graymq vs Redis Streams vs NATS JetStream; `python -m graymq.bench` installs the Debian packages
# it needs (redis-server, nats-server, postgresql) when missing. BENCH_ARGS="latency --repeat 3" etc.
bench: $(DEMO_STAMP)
	$(BIN)/pip install --quiet -e '.[server,bench,spark]'
	$(BIN)/python -m graymq.bench $(BENCH_ARGS)

# Reinstall only when the project's dependency list or the compiled hot path changes. The install builds
# graymq.protocol._speedups (setup.py, Cython + gcc); without a compiler it says so loudly and the pure-Python
# path runs (GRAYMQ_PURE=1 selects that path on purpose).
$(DEMO_STAMP): EXTRAS := server
$(TEST_STAMP): EXTRAS := server,spark,dev
$(DEMO_STAMP) $(TEST_STAMP): pyproject.toml setup.py protocol/_speedups.pyx protocol/_client_speedups.pyx
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]'
	touch $@

# PostgreSQL server binaries for the test fixtures, Java for Spark, Node.js and npm for the Node.js SDK, Chromium for
# the console's browser tests (driven by Playwright at /usr/bin/chromium; Playwright's own browser downloads are never
# used), nftables for the partition cases' faults (tests/chaos/test_partitions.py): installed when missing.
system-deps:
	@if [ -z "$(PG_BIN)" ] || [ ! -x "$(PG_BIN)/initdb" ]; then \
		echo "installing PostgreSQL server binaries"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq postgresql >/dev/null; \
	fi
	@if ! command -v java >/dev/null 2>&1; then \
		echo "installing Java for Spark"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	fi
	@if ! command -v npm >/dev/null 2>&1; then \
		echo "installing Node.js and npm for the Node.js SDK tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nodejs npm >/dev/null; \
	fi
	@if [ ! -x /usr/bin/chromium ]; then \
		echo "installing Chromium for the browser tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null; \
	fi
	@if ! command -v nft >/dev/null 2>&1 && [ ! -x /usr/sbin/nft ]; then \
		echo "installing nftables for the partition tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq nftables >/dev/null; \
	fi

# The stock RocketMQ 5 Node.js SDK the gRPC endpoint's tests drive: `npm ci` of tests/support/stock_sdk_node's lock
# file into .venv/stock-sdk-node, skipped while its stamp matches the lock (the tests install it so when run alone).
node-sdk: $(TEST_STAMP) system-deps
	$(BIN)/python -c 'from tests.support.node_sdk import install; install()'

lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy protocol core nameserver_api broker_ext client nameserver gray_controller runbooks migrations

proto: $(TEST_STAMP)
	$(BIN)/python -m graymq.protocol.codegen

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
