# Two commands on a fresh machine with Python 3.11: `make demo` and `make test`.
# Both create .venv; nothing relies on packages installed by hand. `make demo` (and
# `make install`) installs what a user installs: the engine with the LangChain and
# LlamaIndex integrations. `make test` adds the test tools, the linters, the backend
# clients, the LangGraph store (langgraph-palace) and palace-markitdown (`make install-dev`).
#
# torch is installed first, pinned to a CPU build (TORCH_SPEC): a bare `torch`
# requirement, pulled in by sentence-transformers, would fetch a multi-GB CUDA build.
# Elsewhere, point TORCH_PIP_ARGS at PyTorch's CPU wheel index:
#   make demo TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
TORCH_SPEC ?= torch==2.13.0
TORCH_PIP_ARGS ?=
PIP := $(BIN)/python -m pip --disable-pip-version-check

.PHONY: install install-dev test test-slow lint demo clean

# The integrations install from their own folders, as their users install them, in the
# same pip call as the engine so that their dependency on palace-retrievers is this tree.
USER_INTEGRATIONS := integrations/langchain-palace integrations/llama-index-palace
INTEGRATIONS := $(USER_INTEGRATIONS) integrations/langgraph-palace integrations/palace-markitdown
PYPROJECTS := pyproject.toml Makefile $(INTEGRATIONS:%=%/pyproject.toml)

$(VENV)/.torch: Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet $(TORCH_PIP_ARGS) "$(TORCH_SPEC)"
	touch $@

$(VENV)/.installed: $(VENV)/.torch $(PYPROJECTS)
	$(PIP) install --quiet -e . $(USER_INTEGRATIONS:%=-e %)
	touch $@

$(VENV)/.installed-dev: $(VENV)/.torch $(PYPROJECTS)
	$(PIP) install --quiet -e ".[dev]" $(INTEGRATIONS:%=-e "%[test]")
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	for dir in $(INTEGRATIONS); do (cd $$dir && $(CURDIR)/$(BIN)/mypy) || exit 1; done

# Each integration's tests run with that package's own pytest settings (asyncio_mode = auto);
# then every notebook is executed top to bottom (nbmake).
test: lint
	$(BIN)/python -m pytest -q
	for dir in $(INTEGRATIONS); do $(BIN)/python -m pytest -q $$dir || exit 1; done
	$(BIN)/python -m pytest -q --nbmake notebooks

# What takes minutes, left out of `make test`: the tests marked `long` (a mine killed at 20
# random points...), then the property and fuzz tests again with 5 times their examples.
test-slow: install-dev
	$(BIN)/python -m pytest -q -m long
	HYPOTHESIS_EXAMPLES_FACTOR=5 $(BIN)/python -m pytest -q tests/test_properties.py tests/test_fuzz_sources.py

demo: install
	$(BIN)/python examples/demo.py

clean:
	rm -rf $(VENV) .palace-demo .mypy_cache .ruff_cache .pytest_cache
