from textkit import words


def test_exists():
    assert words.title_case("war and peace") == "War and Peace"
