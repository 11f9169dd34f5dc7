from textkit.slug import slugify
from textkit.words import count_words, truncate


def test_slugify_single_word():
    assert slugify("Hello") == "hello"


def test_count_words_simple():
    assert count_words("one two three") == 3


def test_truncate_short_text_unchanged():
    assert truncate("abc", 10) == "abc"
