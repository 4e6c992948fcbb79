"""The command-line tools behind `plugin/cli.py`, one module per command.

Each command writes its lines through a `Print` (`print`, or a test's `list.append`) and
returns its exit status.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

PROG = "memory-plugin-vector"
Print = Callable[[str], None]  # where a command's lines go


def failing_in_one_line(command: str, body: Callable[[], int]) -> int:
    """`body()`'s exit status; any failure is one line on stderr and exit 1."""
    try:
        return body()
    except Exception as error:  # a bad file, an unreachable store or database, ...
        print(f"{PROG} {command}: failed: {error}", file=sys.stderr)
        return 1
