# Every target creates .venv when missing, so each works on a fresh machine.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup system-tools demo test test-fast lint bench clean

setup: $(STAMP) system-tools

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# perf (software events; counters where the machine has them), valgrind and objdump feed the
# profiler. Best effort: without root or apt the profiler reports them as unavailable.
system-tools:
	@missing=""; \
	command -v perf >/dev/null || missing="$$missing linux-perf"; \
	command -v valgrind >/dev/null || missing="$$missing valgrind"; \
	command -v objdump >/dev/null || missing="$$missing binutils"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || echo "warning: could not install$$missing; the profiler will report them unavailable"; \
	  else echo "warning: missing$$missing (install them for full profiles)"; fi; \
	fi

demo: setup
	$(BIN)/pragma optimize eval/suites/examples/relu.py --out pragma-out/demo

test: setup
	$(BIN)/pytest -q

test-fast: setup
	$(BIN)/pytest -q -m "not slow"

lint: setup
	$(BIN)/ruff check graph nodes tools knowledge eval tests

bench: setup
	$(BIN)/python -m pragma.eval.bench_compile

clean:
	rm -rf $(VENV) pragma-out .pytest_cache
