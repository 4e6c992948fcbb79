"""The export file: JSON Lines; gzip written for a `.gz` name, read by its magic bytes.

A header, the namespaces, the memories with their exact vectors and an end line, read and
written as a stream; docs/export-format.md is the reference.
"""

from __future__ import annotations

import base64
import gzip
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import IO
from typing import cast

import numpy as np

from adapters.times import format_optional_time
from adapters.times import format_time
from adapters.times import parse_optional_time
from adapters.times import parse_time
from adapters.values import JsonObject
from adapters.values import MemoryRecord
from adapters.values import NamespaceRecord

FORMAT = "memory-plugin-vector-export"
VERSION = 1
VECTOR_ENCODING = "float32-le-base64"


class FormatError(ValueError):
    """The file is not an export this version can read, or is damaged (names the line)."""


@dataclass(frozen=True, slots=True)
class Header:
    """What made the vectors (`fingerprint`, `dimension`) and when the export began."""

    fingerprint: str
    dimension: int
    exported_at: datetime
    source: str

    def to_json(self) -> JsonObject:
        return {
            "type": "header",
            "format": FORMAT,
            "version": VERSION,
            "fingerprint": self.fingerprint,
            "dimension": self.dimension,
            "vector_encoding": VECTOR_ENCODING,
            "exported_at": format_time(self.exported_at),
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class Trailer:
    namespaces: int
    memories: int
    finished_at: datetime

    def to_json(self) -> JsonObject:
        return {
            "type": "end",
            "namespaces": self.namespaces,
            "memories": self.memories,
            "finished_at": format_time(self.finished_at),
        }


Line = Header | NamespaceRecord | tuple[MemoryRecord, list[float]] | Trailer


def encode_vector(vector: list[float]) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def decode_vector(text: str) -> list[float]:
    values: list[float] = np.frombuffer(base64.b64decode(text), dtype="<f4").tolist()
    return values


def namespace_line(record: NamespaceRecord) -> JsonObject:
    return {"type": "namespace", **record.to_json_object()}


def memory_line(memory: MemoryRecord, vector: list[float]) -> JsonObject:
    return {
        "type": "memory",
        "namespace": memory.namespace,
        "id": memory.id,
        "content": memory.content,
        "kind": memory.kind,
        "source": memory.source,
        "created_at": format_time(memory.created_at),
        "pin": memory.pin,
        "expires_at": format_optional_time(memory.expires_at),
        "propagation": memory.propagation,
        "position": memory.position,
        "vector": encode_vector(vector),
    }


def dumps(line: JsonObject) -> bytes:
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _parse(data: JsonObject) -> Line:
    kind = data.get("type")
    if kind == "namespace":
        return NamespaceRecord.from_json_object(data)
    if kind == "memory":
        memory = MemoryRecord(
            id=data["id"],
            namespace=data["namespace"],
            content=data["content"],
            kind=data["kind"],
            source=data["source"],
            created_at=parse_time(data["created_at"]),
            pin=bool(data.get("pin", False)),
            expires_at=parse_optional_time(data.get("expires_at")),
            propagation=data.get("propagation"),
            position=_position(data.get("position")),
        )
        vector = data.get("vector")
        return memory, decode_vector(vector) if isinstance(vector, str) else []
    if kind == "end":
        return Trailer(
            int(data["namespaces"]), int(data["memories"]), parse_time(data["finished_at"])
        )
    if kind == "header":
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise FormatError(f"not a {FORMAT} version {VERSION} file")
        if data.get("vector_encoding", VECTOR_ENCODING) != VECTOR_ENCODING:
            raise FormatError(f"unknown vector encoding {data.get('vector_encoding')!r}")
        return Header(
            fingerprint=str(data["fingerprint"]),
            dimension=int(data["dimension"]),
            exported_at=parse_time(data["exported_at"]),
            source=str(data.get("source", "")),
        )
    raise FormatError(f"unknown line type {kind!r}")


def _position(value: object) -> int | None:
    """A memory's place in its namespace's write order: a whole number, or absent."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise FormatError(f"position {value!r} is not a whole number")


def parse_lines(raw: Iterator[bytes]) -> Iterator[Line]:
    """Lines of an export, checked: a header first, nothing after `end`, `end` present."""
    number, header_seen, ended = 0, False, False
    counts = {NamespaceRecord: 0, tuple: 0}
    for number, text in enumerate(raw, start=1):
        if not text.strip():
            continue
        if ended:
            raise FormatError(f"line {number}: data after the end line")
        try:
            line = _parse(json.loads(text))
        except FormatError as error:
            raise FormatError(f"line {number}: {error}") from None
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise FormatError(f"line {number}: unreadable ({error!r})") from None
        if isinstance(line, Header) == header_seen:
            raise FormatError(f"line {number}: the header must be the first line, once")
        header_seen = True
        if isinstance(line, Trailer):
            ended = True
            found = (counts[NamespaceRecord], counts[tuple])
            if found != (line.namespaces, line.memories):
                raise FormatError(
                    f"line {number}: the end line counts {line.namespaces} namespaces and"
                    f" {line.memories} memories, the file holds {found[0]} and {found[1]}"
                )
        elif not isinstance(line, Header):
            counts[type(line)] += 1
        yield line
    if not ended:
        raise FormatError(f"the file ends at line {number} without its end line (cut short?)")


def open_out(path: str) -> IO[bytes]:
    """`-` is stdout; a name ending in `.gz` is gzip (level 6: most of the gain, fast)."""
    if path == "-":
        return sys.stdout.buffer
    if path.endswith(".gz"):
        return cast(IO[bytes], gzip.open(path, "wb", compresslevel=6))
    return open(path, "wb")


def open_in(path: str) -> IO[bytes]:
    """`-` is stdin; gzip is recognised by its magic bytes, whatever the name."""
    if path == "-":
        return sys.stdin.buffer
    with open(path, "rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return cast(IO[bytes], gzip.open(path, "rb"))
    return open(path, "rb")
