"""Real libraries from PyPI: an sdist fetched once, checked against its digest, cached, unpacked.

Benchmarks, suites and tests run on real projects (a library with its own tests), not only on
files written for them. `sdist(name, version)` downloads the source archive named by PyPI's JSON
API into a cache (`$XDG_CACHE_HOME/shadowkernel/sdists`, else `~/.cache/...`) the first time and
verifies its sha256; `unpack(name, version, into)` gives a fresh, writable copy of the tree.
Standard library only, so it works before any extra is installed.
"""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from .. import userdirs
from ..errors import ArgumentError, NotFound
from ..paths import extract_tar

INDEX = "https://pypi.org/pypi"


def cache_dir() -> Path:
    return userdirs.cache_home() / "sdists"


def sdist(name: str, version: str, cache: Path | None = None) -> Path:
    """The path of `name==version`'s sdist, downloaded into the cache on first use."""
    folder = cache or cache_dir()
    known = sorted(folder.glob(f"{_normal(name)}-{version}.*")) if folder.exists() else []
    archives = [p for p in known if p.name.endswith((".tar.gz", ".zip"))]
    if archives:
        return archives[0]
    url, sha256, filename = _sdist_entry(name, version)
    folder.mkdir(parents=True, exist_ok=True)
    return _download(url, sha256, folder / filename)


def unpack(name: str, version: str, into: Path, cache: Path | None = None) -> Path:
    """A fresh copy of the sdist's tree under `into`; returns the project's top folder."""
    return unpack_archive(sdist(name, version, cache), into)


def unpack_archive(archive: Path, into: Path) -> Path:
    """An sdist's tree (.tar.gz or .zip) under `into`, nothing outside it; returns the
    project's top folder."""
    into.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(into)
            top = z.namelist()[0].split("/")[0]
    else:
        with tarfile.open(archive) as t:
            extract_tar(t, into)
            top = t.getnames()[0].split("/")[0]
    return into / top


def _normal(name: str) -> str:
    """The file-name spelling sdists use (PEP 625): lower case, runs of -_. as one _."""
    out, last = [], ""
    for ch in name.lower():
        ch = "_" if ch in "-_." else ch
        if not (ch == "_" and last == "_"):
            out.append(ch)
        last = ch
    return "".join(out)


def _sdist_entry(name: str, version: str) -> tuple[str, str, str]:
    try:
        with urllib.request.urlopen(index := f"{INDEX}/{name}/json", timeout=60) as reply:
            releases = json.load(reply).get("releases", {})
    except OSError as error:
        raise NotFound(f"PyPI has no project {name!r} (or cannot be reached): {error}") from None
    if version not in releases:
        raise NotFound(f"PyPI has no {name}=={version}")
    for entry in releases[version]:
        if entry.get("packagetype") == "sdist":
            url = urllib.parse.urljoin(index, entry["url"])  # a mirror may answer relative URLs
            return url, entry["digests"]["sha256"], entry["filename"]
    raise ArgumentError(f"{name}=={version} has no sdist on PyPI, only wheels")


def _download(url: str, sha256: str, target: Path) -> Path:
    """Download to a temporary name, check the digest, then rename: never a torn archive."""
    with (
        tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as part,
        urllib.request.urlopen(url, timeout=300) as reply,
    ):
        digest = hashlib.sha256()
        while chunk := reply.read(1 << 20):
            digest.update(chunk)
            part.write(chunk)
    if digest.hexdigest() != sha256:
        os.unlink(part.name)
        raise NotFound(f"{url}: sha256 differs from PyPI's ({digest.hexdigest()} != {sha256})")
    os.replace(part.name, target)
    return target
