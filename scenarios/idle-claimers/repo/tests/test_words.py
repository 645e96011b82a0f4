from textkit.words import words


def test_words_split_on_punctuation_and_spaces() -> None:
    assert words("Hello, world! It's 2024.") == ["Hello", "world", "It's", "2024"]


def test_no_words_in_blank_text() -> None:
    assert words("  ...  ") == []
