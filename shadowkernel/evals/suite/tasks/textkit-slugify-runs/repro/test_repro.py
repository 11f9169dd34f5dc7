from textkit.slug import slugify


def test_punctuation():
    assert slugify("Hello, World!") == "hello-world"
