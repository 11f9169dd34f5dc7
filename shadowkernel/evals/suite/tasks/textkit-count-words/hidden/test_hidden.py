from textkit.words import count_words


def test_empty_and_blank():
    assert count_words("") == 0
    assert count_words("   ") == 0


def test_mixed_whitespace():
    assert count_words("one  two\tthree\nfour") == 4
