"""The command-line tools behind `plugin/cli.py`, one module per command."""
