"""Airflow plugins of the provider: the API server's pruning-report app (:mod:`.reports`)."""
