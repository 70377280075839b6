# Everything a fresh machine needs: `make demo` and `make test` create .venv and install first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
DEMO   ?= .demo

.PHONY: install test lint demo clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test,benchmark,s3]'
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/pytest

demo: install
	rm -rf $(DEMO)
	$(BIN)/python -m airflow_provider_acid.testing $(DEMO)/table
	$(BIN)/airflow-acid inspect $(DEMO)/table

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .ruff_cache .hypothesis
