# Spark: `make demo` sets everything up and prints a real ghost-text suggestion; `make test` runs the suite.
# Both install what is missing: system build tools (apt-get, as root), the default model, the release build.

CARGO ?= cargo
BIN := target/release/spark-lsp
SPARK_LSP_BIN ?= $(CURDIR)/$(BIN)
export SPARK_LSP_BIN

.PHONY: all deps model tools mcp-client build llama-server demo test test-rust test-editors lint bench remote-bench fuzz-smoke eval soak

all: build

deps:
	@bash scripts/install-deps.sh

# MODEL=NAME installs another model (scripts/install-model.sh --list); the default model otherwise.
model:
	@bash scripts/install-model.sh $(MODEL)

# The pinned TypeScript compiler under target/tools, for the execution-check tests (tests/e2e/exec.rs).
tools: deps
	@bash scripts/install-tsc.sh

# The real MCP clients of tests/e2e/mcp.rs: the Python SDK in target/mcp-venv, the MCP Inspector in target/tools.
mcp-client: deps
	@bash scripts/install-mcp-client.sh

build: deps
	$(CARGO) build --release --workspace --bins

# llama.cpp's own OpenAI-compatible server, the real peer of the remote backend's tests (built once, minutes).
llama-server: deps
	@bash scripts/build-llama-server.sh

demo: deps model build
	@echo "== spark-lsp doctor"
	@./$(BIN) doctor
	@echo "== ghost text for examples/demo.rs at 18:5 (an empty line inside top_words)"
	@./$(BIN) complete examples/demo.rs --at 18:5
	@echo "== the same place with every checked suggestion shown (--min-confidence 0): what the gate held back, if anything"
	@./$(BIN) complete examples/demo.rs --at 18:5 --min-confidence 0

# Lint first (a gate), then every suite through scripts/test-all.sh: it runs each to its end and finishes with
# one line, `N passed, N failed`, over the cargo tests, the editor tests and the fuzz smoke run.
test: deps model tools mcp-client build llama-server lint
	@bash scripts/test-all.sh

test-rust:
	$(CARGO) test --release --workspace

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

test-editors:
	@bash tests/editors/run.sh

bench: deps model build llama-server
	$(CARGO) run --release -p spark-tests --bin spark-bench
	$(CARGO) run --release -p spark-tests --bin spark-eval -- --fetch-only
	$(CARGO) run --release -p spark-tests --bin spark-bench -- --pause
	$(CARGO) run --release -p spark-tests --bin remote-bench
	$(CARGO) run --release -p spark-tests --bin mcp-bench

# The execution-checked evaluation (docs/eval.md): about 35 minutes on 2 busy cores for the default model (the task budget, 12 s a case, dominates).
# EVAL_ARGS: --quick, --tasks ghost,fix,tests,regex,next-edit, --model PATH (repeatable), --all-models.
EVAL_ARGS ?=
eval: deps model build
	@bash scripts/install-eval-tools.sh
	$(CARGO) run --release -p spark-tests --bin spark-eval -- $(EVAL_ARGS)

remote-bench: deps model build llama-server
	$(CARGO) run --release -p spark-tests --bin remote-bench

# The soak test for longer than the 60 s it runs in `make test`.
SPARK_SOAK_SECS ?= 600
soak: deps model build
	SPARK_SOAK_SECS=$(SPARK_SOAK_SECS) $(CARGO) test --release -p spark-tests --test soak -- --nocapture

# Every cargo-fuzz target for FUZZ_SECS (20) seconds, built without llama.cpp; installs nightly and cargo-fuzz.
fuzz-smoke: deps
	@bash scripts/fuzz-smoke.sh
