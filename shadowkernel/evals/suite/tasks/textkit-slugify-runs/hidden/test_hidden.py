from textkit.slug import slugify


def test_runs_collapse():
    assert slugify("a  --  b") == "a-b"


def test_no_separator_at_ends():
    assert slugify("  Rock & Roll!  ") == "rock-roll"


def test_custom_separator():
    assert slugify("Hello, World", sep="_") == "hello_world"
