"""Properties of the namespace-to-collection mapping in adapters/qdrant/names.py.

The mapping must give every valid namespace name a collection name that a
Qdrant server accepts and that is safe in a URL path, and must never send two
namespaces to one collection. The validator is tested on its own so that a
too-lenient rule cannot make the mapping's tests pass vacuously.
"""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import strategies as st

from adapters.qdrant.names import DEFAULT_PREFIX
from adapters.qdrant.names import MAX_COLLECTION_NAME
from adapters.qdrant.names import collection_name
from adapters.qdrant.names import is_valid_collection_name

NAMESPACE_RE = re.compile(r"^[a-z]+:[A-Za-z0-9_:.\-]+$")
URL_SAFE = re.compile(r"^[A-Za-z0-9._~-]+$")
TAIL_CHARS = string.ascii_letters + string.digits + "_:.-"
MAX_NAMESPACE = 256
PREFIXES = st.sampled_from([DEFAULT_PREFIX, "mp_", "memory.", "m"])


@st.composite
def long_namespaces(draw: st.DrawFn, min_size: int = 3) -> str:
    """Names built part by part, so lengths up to 256 are as likely as short ones."""
    kind = draw(st.text(string.ascii_lowercase, min_size=1, max_size=12))
    room = MAX_NAMESPACE - len(kind) - 1
    tail_min = max(1, min_size - len(kind) - 1)
    size = draw(st.integers(tail_min, room) | st.just(room))
    tail = draw(st.text(TAIL_CHARS, min_size=size, max_size=size))
    return f"{kind}:{tail}"


namespaces = (
    st.from_regex(NAMESPACE_RE, fullmatch=True).filter(lambda n: 3 <= len(n) <= MAX_NAMESPACE)
    | long_namespaces()
)


@st.composite
def colon_dot_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two names that differ only in one ':' versus '.' after the kind."""
    name = draw(namespaces)
    kind, tail = name.split(":", 1)
    index = draw(st.integers(0, len(tail) - 1))
    left = f"{kind}:{tail[:index]}:{tail[index + 1 :]}"
    right = f"{kind}:{tail[:index]}.{tail[index + 1 :]}"
    return left, right


def test_strategies_produce_only_valid_namespace_names() -> None:
    @given(namespaces)
    def check(name: str) -> None:
        assert NAMESPACE_RE.fullmatch(name)
        assert 3 <= len(name) <= MAX_NAMESPACE

    check()


@given(namespaces, PREFIXES)
def test_every_name_maps_to_a_valid_url_safe_collection(name: str, prefix: str) -> None:
    mapped = collection_name(name, prefix)
    assert is_valid_collection_name(mapped)
    assert len(mapped) <= MAX_COLLECTION_NAME
    assert URL_SAFE.fullmatch(mapped)
    assert mapped.startswith(prefix)


@given(namespaces, namespaces, PREFIXES)
def test_distinct_names_map_to_distinct_collections(a: str, b: str, prefix: str) -> None:
    assume(a != b)
    assert collection_name(a, prefix) != collection_name(b, prefix)


@given(st.lists(long_namespaces(min_size=240), min_size=2, max_size=20, unique=True))
def test_long_names_map_injectively(names: list[str]) -> None:
    assert len({collection_name(n) for n in names}) == len(names)


@given(colon_dot_pairs(), PREFIXES)
def test_colon_and_dot_never_collide(pair: tuple[str, str], prefix: str) -> None:
    left, right = pair
    assert collection_name(left, prefix) != collection_name(right, prefix)


@given(namespaces)
def test_short_and_long_forms_are_told_apart(name: str) -> None:
    mapped = collection_name(name)
    is_long = len(DEFAULT_PREFIX) + len(name) > MAX_COLLECTION_NAME
    assert (mapped[len(DEFAULT_PREFIX)] == "~") is is_long
    if not is_long:
        assert mapped == DEFAULT_PREFIX + name.replace(":", "~")


def test_examples_at_the_length_boundary() -> None:
    fits = "custom:" + "a" * (MAX_COLLECTION_NAME - len(DEFAULT_PREFIX) - len("custom:"))
    too_long = fits + "a"
    assert collection_name(fits) == DEFAULT_PREFIX + fits.replace(":", "~")
    assert len(collection_name(fits)) == MAX_COLLECTION_NAME
    assert collection_name(too_long).startswith(DEFAULT_PREFIX + "~")
    longest_a = "custom:" + "a" * 249
    longest_b = "custom:" + "a" * 248 + "b"
    assert len(longest_a) == MAX_NAMESPACE
    assert collection_name(longest_a) != collection_name(longest_b)
    assert collection_name("org:a:b") != collection_name("org:a.b")


def test_short_form_is_readable() -> None:
    assert collection_name("workspace:abc") == "memory-workspace~abc"
    assert collection_name("team:a:b.c", "mp_") == "mp_team~a~b.c"


@pytest.mark.parametrize("char", list('<>:"/\\|?*'))
def test_validator_rejects_forbidden_characters(char: str) -> None:
    assert is_valid_collection_name("memory-ok")
    assert not is_valid_collection_name(f"memory-{char}x")
    assert not is_valid_collection_name(char)


@pytest.mark.parametrize("code", [*range(0x20), 0x7F])
def test_validator_rejects_control_characters(code: int) -> None:
    assert not is_valid_collection_name(f"memory-{chr(code)}x")


def test_validator_enforces_length() -> None:
    assert not is_valid_collection_name("")
    assert is_valid_collection_name("a" * MAX_COLLECTION_NAME)
    assert not is_valid_collection_name("a" * (MAX_COLLECTION_NAME + 1))
    assert not is_valid_collection_name("a" * 256)
