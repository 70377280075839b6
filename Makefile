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
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test,benchmark,s3,iceberg,delta,openlineage,readers]'
	@# Bytecode for the installed libraries, once: where PYTHONDONTWRITEBYTECODE is set, every
	@# Airflow task or CLI process would otherwise compile them again (an import of airflow.sdk,
	@# pyiceberg and the operators: 8.0 s without, 4.1 s with, measured here)
	$(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true
	touch $(STAMP)

install: $(STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint chromium strace
	$(BIN)/pytest

demo: install
	$(BIN)/python scripts/demo.py

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .ruff_cache .hypothesis

# Kill -9 and SIGTERM at random points of a CLI compaction, a mapped compaction task
# (`airflow tasks test`, temporary AIRFLOW_HOME on SQLite) and a commit, then check the output
# folder (scripts/chaos.py; README "Reliability"). CHAOS_N trials; CHAOS_MODES a subset of
# cli,task,commit (CI runs cli,commit: a task trial spends a minute starting Airflow).
.PHONY: chaos
CHAOS_N ?= 100
CHAOS_MODES ?= cli,task,commit

chaos: install
	$(BIN)/python scripts/chaos.py --trials $(CHAOS_N) --modes $(CHAOS_MODES)

# End-to-end runs of a real Airflow 3 on 127.0.0.1 (scripts/e2e*.py; see the README).
# E2E_ARGS passes arguments, e.g. `make e2e E2E_ARGS=--probe` runs the self-check DAG.
.PHONY: e2e e2e-distributed
E2E_ARGS ?=

e2e: install
	$(BIN)/python scripts/e2e.py $(E2E_ARGS)

e2e-distributed: install
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e '.[test,benchmark,s3,e2e]'
	$(BIN)/python scripts/e2e_distributed.py $(E2E_ARGS)

# Validates docker-compose.yaml against Compose's own schema (no Docker engine needed): Debian's
# docker-compose (v1.29) is installed when absent. tests/test_docker_compose.py checks the rest.
.PHONY: compose-check chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

# Debian's chromium, for the pruning report's browser test (tests/provider/test_report_browser.py):
# installed when absent; the test skips, saying why, only if this could not install it.
chromium:
	command -v chromium >/dev/null || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends chromium; } \
	  || echo "chromium could not be installed: the browser test will skip"

# Debian's strace, for the directory-read count of a one-partition manifest
# (tests/acid/test_partition_listing.py): installed when absent; the test skips without it.
.PHONY: strace
strace:
	command -v strace >/dev/null || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends strace; } \
	  || echo "strace could not be installed: the getdents64 test will skip"

compose-check:
	command -v docker-compose >/dev/null || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends docker-compose; }
	docker-compose --file docker-compose.yaml config --quiet
	@echo "docker-compose.yaml: valid ($$(docker-compose --file docker-compose.yaml config --services | wc -l) services)"

# A real Hive standalone metastore 4.0.1 on 127.0.0.1 with embedded Derby (scripts/metastore.py):
# fetched through Maven into .cache/hive-metastore/ on first use, reused while it runs. The last
# line `make metastore` prints is its URI (thrift://127.0.0.1:PORT). METASTORE_ARGS passes
# arguments, e.g. METASTORE_ARGS='--home .cache/hive-metastore/sasl --auth config --user u
# --password p'; scripts/metastore_smoke.py checks a running one.
.PHONY: metastore metastore-stop
METASTORE_ARGS ?=

metastore: install
	@$(BIN)/python scripts/metastore.py start $(METASTORE_ARGS)

metastore-stop:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/metastore.py stop $(METASTORE_ARGS)

# A real S3-compatible server (S3Proxy 4.1.0, filesystem backend) on 127.0.0.1
# (scripts/s3.py): fetched through Maven into .cache/s3proxy/ on first use, reused while it
# runs; data in .cache/s3proxy/run/data (a folder a bucket). The last line `make s3` prints is
# its endpoint URL (key testing-access-key, secret testing-secret-key, bucket warehouse).
.PHONY: s3 s3-stop

s3: install
	@$(BIN)/python scripts/s3.py start

s3-stop:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/s3.py stop
