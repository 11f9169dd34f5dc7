"""The lower watch: what the user changes in their folder, as inotify reports it (no mount),
and what the tree makes the kernel forget for it."""

from __future__ import annotations

import os
from pathlib import Path

from overlay_helpers import make_project

from shadowkernel.overlay.lower import Lower
from shadowkernel.overlay.lower_watch import LowerWatch
from shadowkernel.overlay.store import BlobStore
from shadowkernel.overlay.tree import ROOT_INO, Tree


def test_the_watch_reports_edits_and_listing_changes(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    watch = LowerWatch(str(project))
    try:
        watch.watch("")
        watch.watch("docs")
        watch.watch("README.md")  # not a directory: remembered as unwatchable, no error
        assert watch.watched["README.md"] is None
        (project / "docs/guide.txt").write_text("edited\n")
        (project / "new.txt").write_text("new\n")
        os.chmod(project / "README.md", 0o600)
        changes = watch.changes()
        assert ("docs/guide.txt", False) in changes
        assert ("new.txt", True) in changes and ("README.md", False) in changes
        assert watch.changes() == []  # each change is reported once

        (project / "docs/guide.txt").unlink()
        (project / "docs").rmdir()
        changes = watch.changes()
        assert ("docs/guide.txt", True) in changes and ("docs", True) in changes
        assert "docs" not in watch.watched  # a new docs/ would be watched afresh
    finally:
        watch.close()


def test_the_tree_turns_changes_into_exactly_what_the_kernel_must_forget(tmp_path: Path) -> None:
    project = make_project(tmp_path / "project")
    watched: list[str] = []
    tree = Tree(Lower(str(project)), BlobStore(), alias="/mnt", watch=watched.append)
    docs, _ = tree.lookup(ROOT_INO, "docs")
    guide, _ = tree.lookup(docs, "guide.txt")
    assert watched == ["", "docs"]  # every directory the kernel looks into
    edited = tree.lower_changed([("docs/guide.txt", False)])
    assert edited.inodes == (guide,) and edited.entries == ()
    created = tree.lower_changed([("docs/new.txt", True), ("never/seen.txt", True)])
    assert created.entries == ((docs, "new.txt"),) and created.inodes == (docs,)


def test_without_inotify_the_watch_does_nothing_and_says_so(
    tmp_path: Path, monkeypatch, caplog
) -> None:
    def no_instances() -> None:
        raise OSError(24, "Too many open files")  # fs.inotify.max_user_instances reached

    monkeypatch.setattr("shadowkernel.overlay.lower_watch.INotify", no_instances)
    watch = LowerWatch(str(make_project(tmp_path / "project")))
    watch.watch("docs")
    assert watch.fileno() is None and watch.changes() == [] and watch.watched == {}
    assert "no inotify" in caplog.text
    watch.close()
