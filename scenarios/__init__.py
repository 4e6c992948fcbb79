"""Fault scenarios against the real server process: one line per case, `ok` or `FAIL`.

`python -m scenarios [--repo DIR] [CASE ...]` runs the numbered cases (hostile input,
connections, a full disk, a damaged store, pairs of faults) against this checkout or
another (before/after); `python -m scenarios.fault_matrix` runs every pair of store
faults. The tests hold the same cases as assertions; these show an operator, or a
closing note, what the plugin answers. Not benchmarks: they print verdicts, not figures.
"""
