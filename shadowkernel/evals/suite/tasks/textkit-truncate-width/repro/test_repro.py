from textkit.words import truncate


def test_width_respected():
    assert len(truncate("abcdefghij", 6)) <= 6
