# The two commands a newcomer needs (`make demo`, `make test`), each installing the one
# system package the RocksDB build needs first.

CARGO ?= cargo

.PHONY: deps demo test lint

# bindgen (used by the bundled RocksDB build) needs libclang.
deps:
	@if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then \
		echo "installing libclang-dev (needed to build the bundled RocksDB)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq libclang-dev; \
	fi

demo: deps
	$(CARGO) run --release -- demo

test: deps
	$(CARGO) test

lint: deps
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
