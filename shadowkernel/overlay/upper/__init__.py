"""A manifest as a kernel-overlayfs upper layer, and an upper layer back as overrides.

Why this lives in overlay/ although only run/ uses it: it is the override store's second
translation (the FUSE tree is the first), and both must follow one resolution rule,
`store.lower_source`; it imports nothing above overlay/, and run/ only mounts what it
writes. Kept beside the store, a change to what an override can hold is made, and tested
against kernel overlayfs (tests/test_upper.py), in one folder.

Heavy runs use the kernel's overlayfs (lower: the user's folder, upper: this translation of
the branch's manifest) instead of the FUSE mount, because every FUSE access is a Python round
trip. The translation follows `store.lower_source`, the one resolution rule both views share:

- `File(blob)`: a regular file with the bytes, mode and mtime;
- `File(origin=X)` without a blob (renamed or metadata-only): with `redirects`, an empty
  *metacopy* file (`trusted.overlay.metacopy`, plus `trusted.overlay.redirect=/X` when X is
  not the path the file would show anyway), so a renamed 1 GB file costs nothing; without,
  a copy of X's bytes;
- `Dir(origin=None)`: an opaque directory (`trusted.overlay.opaque=y`);
- `Dir(origin=X)` elsewhere (a renamed directory): with `redirects`, a directory with
  `trusted.overlay.redirect=/X`; without, an opaque directory holding a copy of X's tree;
- `Symlink`: a symlink; `Special`: the FIFO, socket node or device node (mknod);
  `WHITEOUT`: a 0/0 character device;
- every entry with its owner (the folder's where it records none) and its atime; the names
  of one link group are hard links to the first one written (a linked `File(origin=X)` is
  a copy of X's bytes: a metacopy is not shared by names).

`redirects` needs the mount options `redirect_dir=on,metacopy=on` (privileged overlayfs; the
kernel refuses both with `userxattr`). An overlayfs a normal user mounts in a user namespace
(`userxattr`, kernels >= 5.11) reads `user.overlay.*` instead of `trusted.overlay.*`: both
directions take `xattrs=USER` for it (and `redirects=False`). `read_upper` reads redirects
back the same way, so a directory or file the run renamed comes back as a recorded rename,
not a copy.

`read_upper` gives the names of one upper inode one override with one link group, and
records owners that differ from the folder's.

Caveats: a directory's mtime is not harvested (overlayfs bumps it on every child change, the
FUSE view keeps it); ctimes are the kernel's and not carried either way; an owner the writer
cannot give (no CAP_CHOWN, or a user namespace that does not map the uid) is left as the
writer's.
"""

from .read import read_upper
from .resolve import TRUSTED, USER, Xattrs, mount_options, natural, reachable
from .write import write_upper

__all__ = ["TRUSTED", "USER", "Xattrs", "mount_options", "natural", "reachable", "read_upper",
           "write_upper"]  # fmt: skip
