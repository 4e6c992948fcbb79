"""All configuration, read from the environment once, by the CLI (`Settings.from_env()`);
nothing else reads the environment: everything downstream receives the resulting object.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from typing import Literal

from pydantic import BaseModel
from pydantic import ConfigDict
from pydantic import Field
from pydantic import SecretStr
from pydantic import ValidationError
from pydantic import field_validator
from pydantic import model_validator

from adapters.base import DEFAULT_PREFIX

MIB = 1024 * 1024
# Variables an earlier version read, with what replaces them: set, they stop the start
# rather than being ignored in silence.
REPLACED = {
    "MEMORY_PLUGIN_QUEUE_CAPACITY": "admission weighs the requests in flight in seconds; "
    "set MEMORY_PLUGIN_ADMISSION_BUDGET instead (docs/settings.md)",
}


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the variable."""


def parse_listen_addr(value: str) -> tuple[str, int]:
    """`host:port` or `[v6]:port` to (host, port)."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:9100 or [::1]:9100")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        ipaddress.IPv6Address(host)
    elif ":" in host:
        raise ValueError("put an IPv6 address in brackets, e.g. [::1]:9100")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError("port must be 1..65535")
    return host, port


class Settings(BaseModel):
    """Environment variables, each documented in docs/settings.md."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    listen_addr: str = Field("127.0.0.1:9100", alias="MEMORY_PLUGIN_LISTEN_ADDR")
    backend: Literal["embedded", "qdrant", "pinecone"] = Field(
        "embedded", alias="MEMORY_PLUGIN_BACKEND"
    )
    data_dir: Path = Field(Path("./data"), alias="MEMORY_PLUGIN_DATA_DIR")
    # adapters/engine/log_sync.py: a write answered once on disk (`sync`) or in the kernel
    durability: Literal["sync", "async"] = Field("sync", alias="MEMORY_PLUGIN_DURABILITY")
    # plugin/backends.py: unset, one per two of `cpus` where declared, else the store's own split
    engine_workers: int | None = Field(None, ge=1, le=16, alias="MEMORY_PLUGIN_ENGINE_WORKERS")
    # plugin/sizing.py: the CPUs the plugin sizes itself for (the chart: the pod's request)
    cpus: int | None = Field(None, ge=1, le=4096, alias="MEMORY_PLUGIN_CPUS")
    qdrant_url: str | None = Field(None, alias="QDRANT_URL")
    qdrant_layout: Literal["shared", "collections"] = Field(
        "shared", alias="MEMORY_PLUGIN_QDRANT_LAYOUT"
    )
    qdrant_api_key: SecretStr | None = Field(None, alias="QDRANT_API_KEY")
    pinecone_api_key: SecretStr | None = Field(None, alias="PINECONE_API_KEY")
    pinecone_index: str | None = Field(None, alias="PINECONE_INDEX")
    pinecone_host: str | None = Field(None, alias="PINECONE_HOST")
    freshness_window_s: float = Field(
        30.0, gt=0, le=3600, alias="MEMORY_PLUGIN_PINECONE_FRESHNESS_WINDOW"
    )
    overlay_max_entries: int = Field(
        5000, ge=100, le=1_000_000, alias="MEMORY_PLUGIN_PINECONE_OVERLAY_MAX"
    )
    collection_prefix: str = Field(DEFAULT_PREFIX, alias="MEMORY_PLUGIN_COLLECTION_PREFIX")
    embedding_model: Path | None = Field(None, alias="MEMORY_PLUGIN_EMBEDDING_MODEL")
    # docs/embedding.md: the default is chosen by measurement.
    embedding_backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx", alias="MEMORY_PLUGIN_EMBEDDING_BACKEND"
    )
    onnx_dir: Path | None = Field(None, alias="MEMORY_PLUGIN_ONNX_DIR")
    # ONNX Runtime sessions side by side; unset: one per CPU the plugin sizes itself for, at most 4
    embedding_sessions: int | None = Field(
        None, ge=1, le=64, alias="MEMORY_PLUGIN_EMBEDDING_SESSIONS"
    )
    # plugin/core/search_mode.py: unset, the rerank dimmer's choice; a value forces one ranking
    search: Literal["rerank", "feedback", "hybrid", "dense", "keyword"] | None = Field(
        None, alias="MEMORY_PLUGIN_SEARCH"
    )
    janitor_interval_s: float = Field(60.0, gt=0, alias="MEMORY_PLUGIN_JANITOR_INTERVAL")
    max_body_bytes: int = Field(MIB, ge=1024, alias="MEMORY_PLUGIN_MAX_BODY_BYTES")
    backend_timeout_s: float = Field(1.5, gt=0, le=10, alias="MEMORY_PLUGIN_BACKEND_TIMEOUT")
    # plugin/http/connections.py: a client's time for a request's head, its body, or nothing
    # between requests; the connections open at once (beyond it a new one is closed)
    header_timeout_s: float = Field(5.0, gt=0, le=300, alias="MEMORY_PLUGIN_HEADER_TIMEOUT")
    body_timeout_s: float = Field(10.0, gt=0, le=300, alias="MEMORY_PLUGIN_BODY_TIMEOUT")
    keepalive_timeout_s: float = Field(
        120.0, gt=0, le=3600, alias="MEMORY_PLUGIN_KEEPALIVE_TIMEOUT"
    )
    max_connections: int = Field(1000, ge=1, le=1_000_000, alias="MEMORY_PLUGIN_MAX_CONNECTIONS")
    # plugin/scheduling/admission.py: the wait the requests in flight may make before each
    # namespace is held to an equal share, and a cap on one namespace's (tenant_max_in_flight)
    admission_budget_s: float = Field(0.75, gt=0, le=60, alias="MEMORY_PLUGIN_ADMISSION_BUDGET")
    # plugin/scheduling/dimmer.py: the queue searches may find and all still be reranked
    rerank_queue: float = Field(2.5, gt=0, le=1000, alias="MEMORY_PLUGIN_RERANK_QUEUE")
    tenant_max_in_flight: int | None = Field(
        None, ge=1, le=100_000, alias="MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT"
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO", alias="MEMORY_PLUGIN_LOG_LEVEL"
    )

    @field_validator("listen_addr")
    @classmethod
    def _listen_addr(cls, value: str) -> str:
        parse_listen_addr(value)
        return value

    @field_validator(
        "qdrant_url",
        "pinecone_index",
        "pinecone_host",
        "search",
        "embedding_sessions",
        "tenant_max_in_flight",
        "engine_workers",
        "cpus",
        mode="before",
    )
    @classmethod
    def _blank_means_unset(cls, value: Any) -> Any:
        return (value.strip() or None) if isinstance(value, str) else value

    @field_validator("qdrant_url")
    @classmethod
    def _qdrant_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @field_validator("engine_workers")
    @classmethod
    def _even_split(cls, value: int | None) -> int | None:
        if value is not None and 16 % value:
            raise ValueError("must be 1, 2, 4, 8 or 16: the store's 16 shards split evenly")
        return value

    @model_validator(mode="before")
    @classmethod
    def _default_backend(cls, data: Any) -> Any:
        """No MEMORY_PLUGIN_BACKEND: a Qdrant server when QDRANT_URL is set, else embedded."""
        if not isinstance(data, dict):
            return data
        keys = ("MEMORY_PLUGIN_BACKEND", "backend")
        if any(str(data.get(key) or "").strip() for key in keys):
            return data
        url = str(data.get("QDRANT_URL", data.get("qdrant_url")) or "").strip()
        rest = {key: value for key, value in data.items() if key not in keys}
        return {**rest, "backend": "qdrant" if url else "embedded"}

    @model_validator(mode="after")
    def _backend_needs(self) -> Settings:
        if self.backend == "qdrant" and self.qdrant_url is None:
            raise ValueError(
                "MEMORY_PLUGIN_BACKEND=qdrant needs QDRANT_URL"
                " (the embedded store is MEMORY_PLUGIN_BACKEND=embedded)"
            )
        if self.backend == "embedded" and self.qdrant_url is not None:
            raise ValueError(
                "QDRANT_URL is set but MEMORY_PLUGIN_BACKEND=embedded: unset one of them"
            )
        if self.backend == "pinecone":
            if self.pinecone_api_key is None or not self.pinecone_api_key.get_secret_value():
                raise ValueError("PINECONE_API_KEY is required when MEMORY_PLUGIN_BACKEND=pinecone")
            if self.pinecone_index is None and self.pinecone_host is None:
                raise ValueError(
                    "PINECONE_INDEX or PINECONE_HOST is required"
                    " when MEMORY_PLUGIN_BACKEND=pinecone"
                )
        return self

    @field_validator("collection_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        allowed = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
        if not value or len(value) > 64 or not set(value) <= allowed:
            raise ValueError("1..64 characters from A-Z a-z 0-9 - _ .")
        return value

    @field_validator("embedding_model")
    @classmethod
    def _model_dir(cls, value: Path | None) -> Path | None:
        if value is not None and not (value / "modules.json").is_file():
            raise ValueError("must be a sentence-transformers model directory (modules.json)")
        return value

    @property
    def listen(self) -> tuple[str, int]:
        return parse_listen_addr(self.listen_addr)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Build from `environ`; raise `SettingsError` with one readable line."""
        for old, new in REPLACED.items():
            if old in environ:
                raise SettingsError(f"{old} is no longer read: {new}")
        known = {f.alias for f in cls.model_fields.values() if f.alias}
        values = {key: value for key, value in environ.items() if key in known}
        try:
            return cls.model_validate(values)
        except ValidationError as error:
            first = error.errors()[0]
            message = first["msg"].removeprefix("Value error, ")
            if not first["loc"]:
                raise SettingsError(f"invalid settings: {message}") from None
            field = str(first["loc"][0])
            raw = values.get(field)
            shown = "" if raw is None or "KEY" in field else f"={raw!r}"
            raise SettingsError(f"invalid setting {field}{shown}: {message}") from None
