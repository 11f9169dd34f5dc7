"""Link confinement: what a symlink's target must read as inside the shadow.

Pure code on bytes. A link in the user's folder may name the folder by its absolute path,
or climb out of the shadow with `..` and back into the folder; read as stored, either
would lead a program in the shadow to the user's real files, and a write there would
escape the shadow. `confine_link` redirects such targets to the same place in the shadow.
"""

from __future__ import annotations

import os

from ..paths import RelPath, is_within


def confine_link(target: bytes, directory: RelPath, root: str, alias: str) -> bytes:
    """A link target as programs in the shadow must see it.

    A target that resolves into the user's folder is redirected to the same place in the
    shadow, so nothing reached through a link writes the user's files; a relative target
    that stays inside is returned unchanged; one that leaves resolves where it did.
    """
    if root == alias:
        return target
    broot, balias = os.fsencode(root), os.fsencode(alias)
    here = os.fsencode(directory)
    if target.startswith(b"/"):
        where = os.path.normpath(target)
        return balias + where[len(broot) :] if is_within(where, broot) else target
    lexical = os.path.normpath(os.path.join(here, target))
    if lexical != b".." and not lexical.startswith(b"../"):
        return target
    where = os.path.normpath(os.path.join(broot, lexical))
    if is_within(where, broot):
        return os.path.relpath(balias + where[len(broot) :], os.path.join(balias, here))
    return where
