from textkit.words import title_case


def test_small_words():
    assert title_case("the lord of the rings") == "The Lord of the Rings"


def test_mixed_case_input():
    assert title_case("A TALE OF TWO CITIES") == "A Tale of Two Cities"
