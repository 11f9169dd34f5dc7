from textkit.words import truncate


def test_shortened():
    assert truncate("abcdefghij", 6) == "abc..."


def test_custom_ellipsis():
    assert truncate("abcdefghij", 5, ellipsis="~") == "abcd~"


def test_exact_fit_unchanged():
    assert truncate("abcdef", 6) == "abcdef"
