import pytest
from hypothesis import given
from hypothesis import strategies as st

from holctl.lsp.positions import column as bridge_column
from holsrv.errors import PositionOutOfRange
from holsrv.text.positions import Text, chars_for_units, column, units

LINE = "  ∀x. x ⇒ ‘a’ ∧ 𝔸"


def test_columns_count_characters_and_convert_to_utf8_bytes():
    text = Text("first\n" + LINE + "\n")
    col = LINE.index("x ⇒") + 1
    assert text.to_lsp(2, col, "utf-8") == {"line": 1, "character": len(LINE[: col - 1].encode())}


def test_columns_convert_to_utf16_units_including_astral_characters():
    text = Text(LINE)
    end = len(LINE) + 1
    # 𝔸 is one character but two UTF-16 units.
    assert text.to_lsp(1, end, "utf-16")["character"] == len(LINE) + 1


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_round_trip_every_column(encoding):
    text = Text(LINE)
    for col in range(1, len(LINE) + 2):
        assert text.from_lsp(text.to_lsp(1, col, encoding), encoding) == (1, col)


def test_line_past_the_end_is_a_clear_error():
    with pytest.raises(PositionOutOfRange, match="line 5 is out of range: the file has 2 lines"):
        Text("a\nb").to_lsp(5, 1, "utf-8")


def test_column_past_the_end_of_the_line_is_a_clear_error():
    with pytest.raises(PositionOutOfRange, match="column 9 is out of range: line 1 has 3 characters"):
        Text("abc").to_lsp(1, 9, "utf-8")


def test_zero_is_not_a_position():
    with pytest.raises(PositionOutOfRange):
        Text("abc").to_lsp(0, 1, "utf-8")


ENCODINGS = st.sampled_from(["utf-8", "utf-16", "utf-32"])


@given(st.text(max_size=40), ENCODINGS, st.integers(min_value=-3, max_value=200))
def test_a_count_inside_a_character_rounds_up_past_it(line, encoding, count):
    """The one rounding (`chars_for_units`), the daemon's and the editor bridge's: a count that lands
    inside a character (a byte in the middle of `∀`, half a surrogate pair) reaches past that
    character, never short of the count and never a whole character past it; past the line, its end."""
    chars = chars_for_units(line, count, encoding)
    assert 0 <= chars <= len(line)
    if max(count, 0) >= units(line, encoding):
        assert chars == len(line)
    else:
        end = units(line[:chars], encoding)
        assert end >= max(count, 0) and (chars == 0 or units(line[:chars - 1], encoding) < max(count, 0))


@given(st.text(max_size=40), ENCODINGS, ENCODINGS)
def test_every_character_boundary_converts_exactly_between_encodings(line, source, target):
    for i in range(len(line) + 1):
        assert column(line, units(line[:i], source), source, target) == units(line[:i], target)


def test_the_editor_bridge_converts_with_the_daemons_codec():
    assert bridge_column is column
