"""Unified diffs (text.patches): parse, apply, render."""

from __future__ import annotations

import random

import pytest

from shadowkernel.errors import PathError, StagingError
from shadowkernel.text.patches import apply_patch, parse_patch, render_diff


def reader(files: dict[str, str]):
    return lambda path: files.get(path)


# -- unified diffs ------------------------------------------------------------------------------------


def random_text(rng: random.Random) -> str:
    words = ["alpha", "beta", "", "gamma", "x = 1", "def f():", "    return 2"]
    lines = [rng.choice(words) for _ in range(rng.randint(0, 12))]
    text = "\n".join(lines)
    return text + "\n" if rng.random() < 0.7 and text else text


def mutate(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(lines))
        if rng.random() < 0.5 and lines and at < len(lines):
            del lines[at]
        else:
            lines.insert(at, f"new {rng.randint(0, 99)}\n")
    out = "".join(lines)
    return out.rstrip("\n") if rng.random() < 0.2 else out


@pytest.mark.parametrize("seed", range(200))
def test_render_then_apply_round_trips(seed: int) -> None:
    rng = random.Random(seed)
    old = random_text(rng)
    new = mutate(rng, old)
    patch = render_diff("m.py", old.encode(), new.encode(), context=rng.randint(0, 3))
    if old == new:
        assert patch == ""
        return
    assert apply_patch(patch, reader({"m.py": old})) == {"m.py": new}


def test_patch_creates_and_deletes_files() -> None:
    patch = render_diff("new.py", None, b"x = 1\n") + render_diff("old.py", b"y\n", None)
    assert apply_patch(patch, reader({"old.py": "y\n"})) == {"new.py": "x = 1\n", "old.py": None}


def test_plain_diff_without_git_prefixes() -> None:
    patch = "--- m.py\n+++ m.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert apply_patch(patch, reader({"m.py": "a\n"})) == {"m.py": "b\n"}


def test_hunk_applies_where_its_context_moved() -> None:
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n x\n-y\n+z\n"
    text = "top\nmore\nx\ny\n"
    assert apply_patch(patch, reader({"m.py": text})) == {"m.py": "top\nmore\nx\nz\n"}


def test_crlf_files_keep_their_line_ends() -> None:
    patch = "--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"
    assert apply_patch(patch, reader({"m.py": "a\r\nb\r\n"})) == {"m.py": "a\r\nc\r\n"}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ("just prose", "no file headers"),
        ("--- a/m.py\nnot a plus line\n", "without a '\\+\\+\\+'"),
        ("--- a/m.py\n+++ b/m.py\n", "no hunks"),
        ("--- a/m.py\n+++ b/m.py\n@@ bogus @@\n", "malformed hunk header"),
        ("--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n a\n", "ends early"),
        ("--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-nope\n+b\n", "does not apply to m.py"),
        ("--- a/gone.py\n+++ b/gone.py\n@@ -1 +1 @@\n-a\n+b\n", "does not exist"),
        ("--- /dev/null\n+++ b/m.py\n@@ -0,0 +1 @@\n+b\n", "already exists"),
    ],
)
def test_malformed_patches_are_refused(patch: str, message: str) -> None:
    with pytest.raises(StagingError, match=message):
        apply_patch(patch, reader({"m.py": "a\nb\n"}))


def test_patch_path_outside_the_workspace_is_a_path_error() -> None:
    with pytest.raises(PathError, match="leaves the workspace"):
        parse_patch("--- a/../x.py\n+++ b/../x.py\n@@ -1 +1 @@\n-a\n+b\n")


def test_render_diff_of_binary_content_says_so() -> None:
    assert "Binary files" in render_diff("f.bin", b"\xff", b"\xfe")


def test_mode_lines_render_parse_and_apply() -> None:
    from shadowkernel.text.patches import LINK, apply_files, modes

    patch = (render_diff("run.sh", b"x\n", b"y\n", old_mode=0o644, new_mode=0o755)
             + render_diff("only.sh", b"z\n", b"z\n", old_mode=0o644, new_mode=0o700)
             + render_diff("new.sh", None, b"w\n", new_mode=0o755)
             + render_diff("link", None, b"target", new_mode=LINK))  # fmt: skip
    assert "old mode 100644\nnew mode 100755\n--- a/run.sh" in patch
    assert "diff --git a/only.sh b/only.sh\nold mode 100644\nnew mode 100755\n" in patch
    assert "new file mode 100755\n--- /dev/null\n+++ b/new.sh" in patch
    assert "new file mode 120000" in patch
    files = parse_patch(patch)
    assert modes(files) == {"run.sh": 0o755, "only.sh": 0o755, "new.sh": 0o755, "link": LINK}
    texts = {"run.sh": "x\n", "only.sh": "z\n"}
    assert apply_files(files, texts.get) == {  # type: ignore[arg-type]
        "run.sh": "y\n", "only.sh": "z\n", "new.sh": "w\n", "link": "target"}  # fmt: skip
    assert render_diff("same", b"a\n", b"a\n", old_mode=0o644, new_mode=0o600) == ""


def test_binary_diffs_say_sizes_and_binary_patches_are_refused() -> None:
    assert render_diff("x.bin", b"\0ab", b"\0abc") == (
        "diff --git a/x.bin b/x.bin\nBinary files a/x.bin and b/x.bin differ (3 bytes -> 4 bytes)\n"
    )
    with pytest.raises(StagingError, match="binary patch"):
        parse_patch("diff --git a/x b/x\nindex 1..2 100644\nGIT binary patch\nliteral 1\n")
    with pytest.raises(StagingError, match="mode 040000"):
        parse_patch("diff --git a/x b/x\nold mode 100644\nnew mode 040000\n")


def test_gits_own_diffs_of_renames_and_empty_files_apply(tmp_path) -> None:
    """What `git diff -M` writes for a pure rename (no hunks, `rename from`/`rename to`), a
    rename with an edit, and an empty file created and deleted (headers only), applied to the
    files before give the files after, as git has them."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True,
                              capture_output=True, text=True).stdout  # fmt: skip

    before = {"old.py": "x = 1\n", "moved.py": "a\nb\nc\nd\ne\nf\n", "gone.txt": ""}
    git("init", "-q")
    for path, text in before.items():
        (tmp_path / path).write_text(text)
    git("add", ".")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "before")
    git("mv", "old.py", "new.py")
    git("mv", "moved.py", "there.py")
    (tmp_path / "there.py").write_text("a\nb\nc\nd\ne\nF\n")
    git("rm", "-q", "gone.txt")
    (tmp_path / "empty.txt").write_text("")
    git("add", ".")
    renames = git("diff", "--cached", "-M", "--", "old.py", "new.py", "moved.py", "there.py")
    patch = renames + git("diff", "--cached", "--no-renames", "--", "gone.txt", "empty.txt")
    assert "rename from old.py\nrename to new.py\n" in patch and "deleted file mode" in patch
    after = apply_patch(patch, reader(before))
    assert after == {"old.py": None, "new.py": "x = 1\n", "moved.py": None,
                     "there.py": "a\nb\nc\nd\ne\nF\n", "gone.txt": None, "empty.txt": ""}  # fmt: skip
    with pytest.raises(StagingError, match="does not exist"):
        apply_patch("diff --git a/nope.py b/new.py\nrename from nope.py\nrename to new.py\n",
                    reader(before))  # fmt: skip
