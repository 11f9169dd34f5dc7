"""The FUSE edge translates once: an OSError keeps its errno, a ShadowError answers its family's
errno, anything else is logged and answers EIO (a bug must not take the mount down)."""

from __future__ import annotations

import errno

import pyfuse3
import pytest
import trio

from shadowkernel.errors import NotFound, PathError, ShadowError
from shadowkernel.overlay.fuse import _errors_as_fuse


def answer(error: BaseException) -> int:
    @_errors_as_fuse
    async def handler() -> None:
        raise error

    with pytest.raises(pyfuse3.FUSEError) as caught:
        trio.run(handler)
    return caught.value.errno


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (FileNotFoundError(errno.ENOENT, "gone"), errno.ENOENT),
        (OSError(errno.ENOSPC, "full"), errno.ENOSPC),
        (NotFound("no such path"), errno.ENOENT),
        (PathError("a name with a NUL"), errno.EINVAL),
        (ShadowError("anything else of ours"), errno.EIO),
        (KeyError("a bug"), errno.EIO),
    ],
)
def test_each_error_answers_one_errno(error: BaseException, expected: int) -> None:
    assert answer(error) == expected


def test_a_fuse_error_passes_through() -> None:
    assert answer(pyfuse3.FUSEError(errno.EXDEV)) == errno.EXDEV
