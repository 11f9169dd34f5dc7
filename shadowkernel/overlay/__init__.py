"""The folder proxy: a FUSE shadow of the user's folder that never writes it, and the
override store that says what a branch changes on top of that folder. `store.py` holds the
overrides as plain data; `tree.py` answers filesystem operations over them (with its parts:
`layer`, `inodes`, `merged`, `attributes`, `content`, `links`), `fuse.py` is the thin pyfuse3
adapter, `server.py` the child process that serves the mount, `shadow.py` its handle in the
kernel, and `upper/` the store's second translation, to and from kernel overlayfs upper
layers. Only `lower.py` touches the user's folder, and only to read it. It may import the
bottom of the package (`paths`, `errors`, the text core) and nothing else of shadowkernel:
run/, sched/, workspace and the faces import it, never the reverse.
"""
