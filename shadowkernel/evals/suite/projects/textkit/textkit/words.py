def count_words(text):
    """The number of words in `text`, separated by any whitespace."""
    return len(text.split(" "))


def truncate(text, width, ellipsis="..."):
    """`text` shortened to at most `width` characters, ending in `ellipsis` when shortened."""
    if len(text) <= width:
        return text
    return text[:width] + ellipsis
