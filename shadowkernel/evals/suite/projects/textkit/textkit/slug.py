import re
import string


def slugify(text, sep="-"):
    """Lowercase `text`, replace each run of non-alphanumerics by `sep`, no `sep` at the ends."""
    words = re.split(r"[^a-z0-9]", text.lower())
    return sep.join(words)
