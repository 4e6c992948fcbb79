"""Metrics, logs and the instrumented backend."""
