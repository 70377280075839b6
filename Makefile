# Everything a fresh machine needs: `make demo` and `make test` create .venv and install first.
# `make demo` installs only what the demo needs (the `demo` extra); `make install` (and so
# `make test`) everything the tests, benchmarks and readers need.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
UV     := $(BIN)/uv pip install --quiet --python $(BIN)/python
BASE_STAMP := $(VENV)/.base-stamp
STAMP  := $(VENV)/.installed-stamp
DEMO_STAMP := $(VENV)/.demo-stamp
DOCS_STAMP := $(VENV)/.docs-stamp
ALL_EXTRAS := test,benchmark,s3,demo,delta,openlineage,readers,kerberos
DEMO   ?= .demo

.PHONY: install install-demo test lint demo docs clean

$(BASE_STAMP):
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	touch $@

# Bytecode for the installed libraries, once: where PYTHONDONTWRITEBYTECODE is set, every
# Airflow task or CLI process would otherwise compile them again (an import of airflow.sdk,
# pyiceberg and the operators: 8.0 s without, 4.1 s with, measured here)
COMPILE := $(BIN)/python -m compileall -q -j 0 $(VENV)/lib > /dev/null || true

$(STAMP): pyproject.toml $(BASE_STAMP) | krb5-dev
	$(UV) -e '.[$(ALL_EXTRAS)]'
	$(COMPILE)
	touch $(STAMP) $(DEMO_STAMP)

$(DEMO_STAMP): pyproject.toml $(BASE_STAMP)
	$(UV) -e '.[demo]'
	$(COMPILE)
	touch $@

install: $(STAMP)

install-demo: $(DEMO_STAMP)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint chromium strace kdc-packages
	$(BIN)/pytest

demo: $(DEMO_STAMP)
	$(BIN)/python scripts/demo.py

# The docs site (mkdocs.yml; pages under docs/, the API reference generated from the
# docstrings by scripts/docs_pages.py) into site/, every warning an error.
$(DOCS_STAMP): pyproject.toml $(BASE_STAMP)
	$(UV) -e '.[docs]'
	touch $@

docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict
	@echo "docs: site/index.html ($$(find site -name '*.html' | wc -l) pages)"

clean:
	rm -rf $(VENV) $(DEMO) site dist .pytest_cache .ruff_cache .hypothesis

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

# A real Trino 476 server, one node on 127.0.0.1 (scripts/trino.py): fetched through Maven into
# .cache/trino/ on first use (about 800 MB), on Java 25, with the catalogs hive (ACID writes),
# iceberg, delta_lake and tpch over a metastore of its own (.cache/hive-metastore/trino, metadata
# transformer off), reused while it runs. The last line `make trino` prints is its URL;
# TRINO_ARGS passes arguments, e.g. TRINO_ARGS='--xmx 4G'. tests/trino and benchmarks/trino.py
# use it.
.PHONY: trino trino-stop
TRINO_ARGS ?=

trino: install
	@$(BIN)/python scripts/trino.py start $(TRINO_ARGS)

trino-stop:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/trino.py stop $(TRINO_ARGS)

# A live local Airflow 3 on 127.0.0.1 with the project's DAGs and a demo table, to click around
# in (scripts/airflow_local.py): api-server, scheduler, dag-processor, triggerer; prints the URL,
# user and password, stops on Ctrl-C or `make airflow-stop`. AIRFLOW_PORT picks the port.
.PHONY: airflow airflow-stop airflow-versions dist
AIRFLOW_PORT ?=

airflow: install
	$(BIN)/python scripts/airflow_local.py start $(if $(AIRFLOW_PORT),--port $(AIRFLOW_PORT))

airflow-stop:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/airflow_local.py stop

# The smoke subset (provider loads, DAGs parse, one dag.test() of the main DAG) under the oldest
# supported Airflow 3 (pyproject's lower bound) and the newest on the index, each in its own
# venv under .cache/airflow-versions/ made with uv (scripts/airflow_versions.py).
airflow-versions: $(BASE_STAMP)
	$(BIN)/python scripts/airflow_versions.py

# sdist and wheel into dist/, checked by twine (tests/test_packaging.py checks the same in CI)
dist: install
	rm -rf dist
	$(BIN)/python -m build --installer uv --outdir dist .
	$(BIN)/twine check --strict dist/*

# MIT Kerberos from Debian's packages: libkrb5-dev, which the gssapi wheel builds against (the
# kerberos extra; before make install), and the KDC the kerberos/hdfs tests start
# (scripts/kdc.py: krb5-kdc, krb5-admin-server for kadmin.local, krb5-user for kinit/klist),
# and faketime (libfaketime: the clock-skew test runs the CLI with its clock an hour ahead).
# Installed when absent, as chromium and strace are.
.PHONY: krb5-dev kdc-packages kdc kdc-stop hdfs hdfs-stop
KDC_PACKAGES := krb5-kdc krb5-admin-server krb5-user libkrb5-dev faketime

krb5-dev:
	@command -v krb5-config >/dev/null || { $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends \
	  libkrb5-dev; }

kdc-packages:
	@{ command -v krb5kdc || test -x /usr/sbin/krb5kdc; } >/dev/null && \
	  { command -v kadmin.local || test -x /usr/sbin/kadmin.local; } >/dev/null && \
	  command -v kinit >/dev/null && command -v krb5-config >/dev/null && \
	  command -v faketime >/dev/null || \
	  { $(SUDO) apt-get update -q && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install \
	  -y -q --no-install-recommends $(KDC_PACKAGES); }

# A real KDC on 127.0.0.1 (realm ACID.TEST in .cache/kdc/run, scripts/kdc.py); prints what a
# user exports, KRB5_CONFIG last. Then: make metastore METASTORE_ARGS='--auth kerberos'.
kdc: kdc-packages
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/kdc.py start

kdc-stop:
	@$(PYTHON) scripts/kdc.py stop

# A real HDFS (MiniDFSCluster, WebHDFS) on 127.0.0.1, scripts/hdfs.py; HDFS_ARGS=--kerberos
# secures it with the KDC above. The last line is its hdfs:// URI.
HDFS_ARGS ?=

hdfs:
	@$(PYTHON) scripts/hdfs.py start $(HDFS_ARGS)

hdfs-stop:
	@$(PYTHON) scripts/hdfs.py stop $(HDFS_ARGS)

# A real S3-compatible server (S3Proxy 4.1.0, filesystem backend) on 127.0.0.1
# (scripts/s3.py): fetched through Maven into .cache/s3proxy/ on first use, reused while it
# runs; data in .cache/s3proxy/run/data (a folder a bucket). The last line `make s3` prints is
# its endpoint URL (key testing-access-key, secret testing-secret-key, bucket warehouse).
.PHONY: s3 s3-stop

s3: install
	@$(BIN)/python scripts/s3.py start

s3-stop:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/s3.py stop
