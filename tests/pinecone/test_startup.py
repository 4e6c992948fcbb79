"""`memory-plugin-vector serve` on Pinecone: a misconfigured index ends start-up in one line.

The CLI runs in this process (Pinecone is the HTTP-level fake, which a child
process could not see) and stops before binding, so no port is needed.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from harness.pinecone_fake import FakePinecone
from plugin.cli import main
from plugin.observability.logs import CHATTY_LIBRARIES


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """`serve` configures logging for the process; give the next tests theirs back."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    muted = {name: logging.getLogger(name).level for name in CHATTY_LIBRARIES}
    yield
    root.handlers[:], root.level = handlers, level
    for name, previous in muted.items():
        logging.getLogger(name).setLevel(previous)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (
            {"api_key": "rotated-key"},
            "refused the API key (describe_index): Invalid API Key (check PINECONE_API_KEY)",
        ),
        ({"dimension": 768}, "dimension 768 but the embedding model produces 384"),
    ],
)
def test_serve_exits_1_with_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    breakage: dict[str, object],
    expected: str,
) -> None:
    for name, value in {
        "MEMORY_PLUGIN_BACKEND": "pinecone",
        "PINECONE_API_KEY": "test-api-key",
        "PINECONE_INDEX": "memories",
        "MEMORY_PLUGIN_LISTEN_ADDR": f"127.0.0.1:{_free_port()}",
    }.items():
        monkeypatch.setenv(name, value)
    with FakePinecone(dimension=384).mocked() as fake:
        for key, value in breakage.items():
            setattr(fake, key, value)
        status = main(["serve"])
    err = capsys.readouterr().err.strip().splitlines()
    lines = [line for line in err if not line.startswith("{")]  # JSON log lines aside
    assert not [line for line in err if '"logger": "pinecone' in line]  # SDK INFO lines muted
    assert status == 1
    assert len(lines) == 1, err
    assert lines[0].startswith("memory-plugin-vector: cannot start: ")
    assert expected in lines[0]
