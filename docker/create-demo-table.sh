#!/usr/bin/env bash
# The docker-compose job that puts the demo Hive ACID table into MinIO, once.
#
# Runs in the provider image. s3fs finds MinIO and the credentials in the standard AWS
# variables the compose file sets (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID,
# AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION), so the generator and `airflow-acid inspect` take
# the plain s3:// URL. A table already there (a second `docker compose up`) is kept as it is.
set -euo pipefail

table_uri="${1:-${ACID_DEMO_TABLE_URI:?give the table URI as argument or ACID_DEMO_TABLE_URI}}"
# With a metastore (ACID_METASTORE_URI) the table is also registered there under this name and
# written under its transactions (one write aborted, one left open, as on a live warehouse).
table_name="${2:-${ACID_TABLE:-}}"
by_name=()
if [[ -n "${ACID_METASTORE_URI:-}" && -n "${table_name}" ]]; then
    by_name=(--metastore "${ACID_METASTORE_URI}" --table "${table_name}")
fi

# Exit status 0: the table has files; 3: nothing there yet; anything else: storage error.
set +e
python - "${table_uri}" <<'PY'
import sys

import fsspec

fs, path = fsspec.core.url_to_fs(sys.argv[1])
sys.exit(0 if fs.find(path) else 3)
PY
status=$?
set -e

case "${status}" in
    0) echo "The demo table is already at ${table_uri}; keeping it." ;;
    3)
        echo "Writing the demo table to ${table_uri}"
        python -m airflow_provider_acid.testing "${table_uri}" "${by_name[@]}"
        ;;
    *)
        echo "Cannot list ${table_uri} (exit status ${status}); is MinIO up?" >&2
        exit "${status}"
        ;;
esac
if [[ ${#by_name[@]} -gt 0 ]]; then
    airflow-acid inspect "${by_name[@]}"
else
    airflow-acid inspect "${table_uri}"
fi
