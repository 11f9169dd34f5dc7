from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from overlay_helpers import HAS_FUSE, make_project


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


@pytest.fixture
def shadow(project: Path) -> Iterator[object]:
    if not HAS_FUSE:
        pytest.skip("needs /dev/fuse and fusermount3 (apt-get install fuse3)")
    from shadowkernel.overlay.shadow import Shadow

    with Shadow(project) as sh:
        yield sh
