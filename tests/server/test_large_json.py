"""large_json: the same values as json.loads, in calls no longer than the window."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audiocore_server.wire import large_json, strict_json

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=8), inner, max_size=6)
    ),
    max_leaves=60,
)


@pytest.fixture
def tiny_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every text is large and most containers overflow the window: the walk
    is what runs."""
    monkeypatch.setattr(large_json, "SMALL", 0)
    monkeypatch.setattr(large_json, "WINDOW", 24)


@settings(max_examples=300, deadline=None)
@given(value=values, indent=st.sampled_from([None, 0, 2]))
def test_equals_json_loads(value, indent) -> None:
    text = json.dumps(value, indent=indent)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(large_json, "SMALL", 0)
        patch.setattr(large_json, "WINDOW", 24)
        assert large_json.loads(text, 100) == json.loads(text)
        assert large_json.loads(text.encode(), 100) == json.loads(text)


def test_no_call_reads_past_the_window(monkeypatch: pytest.MonkeyPatch, tiny_window) -> None:
    """Every call into the C scanner that reads a container reads at most
    WINDOW characters; only scalars (one scan each) read further."""
    calls: list[tuple[str, int, int]] = []
    real = strict_json.DECODER.raw_decode

    def counted(text: str, idx: int = 0):
        value, end = real(text, idx)
        calls.append((text[idx], len(text) - idx, end - idx))
        return value, end

    monkeypatch.setattr(strict_json.DECODER, "raw_decode", counted)
    doc = {
        "events": [
            {"id": f"e{i}", "parts": [{"text": "x" * 30}, [1, 2, {"k": None}]]} for i in range(200)
        ]
    }
    text = json.dumps(doc)
    assert large_json.loads(text, 64) == doc
    containers = [c for c in calls if c[0] in "[{"]
    assert containers and all(available <= 24 for _, available, _ in containers)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": [1, 2',  # truncated
        '{"a": [1, 2]} x',  # extra data
        '{"a" [1]}',  # no colon
        '{"a": [1 2]}',  # no comma
        "{a: 1}",  # unquoted key
        '{"a": [1, 2,]}',  # trailing comma
        "",
        "   ",
        '[1, "unterminated]',
    ],
)
def test_not_json_is_refused_like_json_loads(text: str, tiny_window) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        large_json.loads(text, 64)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_are_refused(constant: str, tiny_window) -> None:
    with pytest.raises(strict_json.NonFiniteNumber):
        large_json.loads(f'{{"a": [1, {{"b": {constant}}}, "padding padding padding"]}}', 64)


def test_depth_is_bounded_where_it_walks(tiny_window) -> None:
    """Every level holds more than the window, so every level is walked (a
    container inside one window is left to the C scanner's own limit, and
    to the caller's check of the tree)."""
    deep = "[" * 50 + "1" + ', "longer than the window of 24"]' * 50
    assert large_json.loads(deep, 64) == json.loads(deep)
    with pytest.raises(large_json.TooDeep):
        large_json.loads(deep, 40)


def test_bytes_that_are_not_utf8_are_refused(tiny_window) -> None:
    with pytest.raises(UnicodeDecodeError):
        large_json.loads(b'{"a": "\xff\xfe padding padding padding"}', 64)


def test_the_real_window_on_a_large_body() -> None:
    doc = {"events": [{"id": f"e{i}", "text": "word " * 40, "n": i / 3} for i in range(5000)]}
    text = json.dumps(doc)
    assert len(text) > large_json.SMALL
    assert large_json.loads(text, 64) == doc


def test_dumps_list_is_json() -> None:
    items = [{"a": 1}, [1.5, None], "é", {"x": math.inf}]
    assert json.loads(large_json.dumps_list(items)) == [{"a": 1}, [1.5, None], "é", {"x": None}]
    assert large_json.dumps_list([]) == "[]"


def _text_of_length(length: int) -> str:
    """A JSON text of exactly ``length`` characters: a list of small
    objects (larger than the window, so the windowed path walks it), the
    last one's string padded to fit."""
    items = [{"id": f"e{i}", "n": i / 7, "ok": i % 2 == 0} for i in range(1200)]
    bare = json.dumps([*items, {"pad": ""}])
    assert large_json.WINDOW < len(bare) <= length
    text = json.dumps([*items, {"pad": "x" * (length - len(bare))}])
    assert len(text) == length
    return text


@pytest.mark.parametrize("length", [large_json.SMALL, large_json.SMALL + 1])
def test_the_boundary_of_the_fast_path(length: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A text of SMALL characters is one ``strict_json.loads``; one of
    SMALL+1 is read in windows; both equal ``json.loads``, as str and as
    bytes."""
    whole: list[int] = []
    real = strict_json.loads

    def counted(text: str | bytes | bytearray) -> object:
        whole.append(len(text))
        return real(text)

    monkeypatch.setattr(strict_json, "loads", counted)
    text = _text_of_length(length)
    for form in (text, text.encode()):
        assert large_json.loads(form, 64) == json.loads(text)
    assert whole == ([length, length] if length <= large_json.SMALL else [])


MARK = "\ufeff"  # the byte order mark, U+FEFF
UTF8_MARK = MARK.encode()


def _texts_around_small(mark_length: int) -> list[object]:
    """Texts for every path once a mark of ``mark_length`` (bytes or
    characters) is put before them: small, SMALL and SMALL+1 long, large."""
    return [
        pytest.param('{"a": [1, "é"]}', id="small"),
        pytest.param(_text_of_length(large_json.SMALL - mark_length), id="SMALL"),
        pytest.param(_text_of_length(large_json.SMALL + 1 - mark_length), id="SMALL+1"),
        pytest.param(_text_of_length(4 * large_json.SMALL), id="large"),
    ]


@pytest.mark.parametrize("text", _texts_around_small(len(UTF8_MARK)))
def test_bytes_with_a_utf8_byte_order_mark_are_read_as_json_loads_reads_them(text: str) -> None:
    """``json.loads`` drops a UTF-8 byte order mark at the start of bytes
    (RFC 8259 lets a parser ignore it): so does every path here."""
    marked = UTF8_MARK + text.encode()
    assert large_json.loads(marked, 64) == json.loads(marked) == json.loads(text)


@pytest.mark.parametrize("text", _texts_around_small(len(MARK)))
def test_a_str_with_a_byte_order_mark_is_refused_as_json_loads_refuses_it(text: str) -> None:
    """In a str the mark is a character, which JSON does not allow there."""
    with pytest.raises(ValueError, match="Unexpected UTF-8 BOM"):
        json.loads(MARK + text)
    with pytest.raises(ValueError, match="Unexpected UTF-8 BOM"):
        large_json.loads(MARK + text, 64)
