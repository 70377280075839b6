# The Airflow image of the docker-compose demo: the official image plus this provider with its
# s3 extra (s3fs). Every Airflow service uses it, the triggerer too (AcidDeltaTrigger runs there).
#
#   docker compose build            # or: docker build -t airflow-provider-acid:dev .
ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11
FROM ${AIRFLOW_IMAGE}

# Only what the package build needs: the build context also holds .venv, .git and caches.
COPY --chown=airflow:root pyproject.toml README.md /opt/provider/
COPY --chown=airflow:root airflow_provider_acid /opt/provider/airflow_provider_acid

# As the image's own user (the official image refuses pip as root). Naming the image's Airflow
# version keeps pip from upgrading or downgrading Airflow itself while resolving the provider.
USER airflow
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" "/opt/provider[s3]" \
    && python -c "import airflow_provider_acid.acid.snapshot, s3fs" \
    && airflow-acid --help > /dev/null
