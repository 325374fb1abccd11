# The two commands a newcomer needs (`make serve`, `make test`), each installing first
# what the build and the tests need: libclang (RocksDB's bindgen) and a third-party
# SPARQL client for the server tests.

CARGO ?= cargo

.PHONY: deps demo serve test lint

# bindgen (used by the bundled RocksDB build) needs libclang.
deps:
	@if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then \
		echo "installing libclang-dev (needed to build the bundled RocksDB)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libclang-dev; \
	fi
	@if ! python3 -c 'import SPARQLWrapper, rdflib' 2>/dev/null; then \
		echo "installing SPARQLWrapper and rdflib (the server tests' third-party client)"; \
		python3 -m pip install --quiet --disable-pip-version-check sparqlwrapper rdflib; \
	fi

serve: deps
	$(CARGO) run --release -- serve --demo

demo: deps
	$(CARGO) run --release -- demo

test: deps
	$(CARGO) test

lint: deps
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
