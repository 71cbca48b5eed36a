"""Pack what the GPU run needs beside the tracked files, and unpack it there.

The GPU machine has no network and takes a working tree of at most 64 MiB; the
tracked repository is about 38 MB and the two real tokenizers the dummy members
use are not tracked (Gemma 3's ``tokenizer.json`` alone is 33 MB). They are read
from the tokenizer cache (``$WASH_CACHE_DIR/tokenizers``, built from the packaged
GGUF files on first use) and packed, xz-compressed, into an ignored folder that
the run carries::

    python tools/gpu_bundle.py pack .gpu            # here: prints the sizes
    python tools/gpu_bundle.py unpack .gpu CACHE    # there (tools/gpu_run.sh does it)

``unpack`` writes the tokenizers where the loader reads them (``CACHE/tokenizers``,
with ``WASH_CACHE_DIR=CACHE``) and checks their completeness markers. The shapes
are tracked (``wash/engine/shapes``), so nothing else is needed.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHIVE = "tokenizers.tar.xz"
TOKENIZERS = ("smollm2", "gemma3")
#: The working tree that travels may hold this much (the device's limit is 64 MiB).
BUDGET_MB = 60


def tracked_mb(root: Path = ROOT) -> float:
    """Size of the tracked files of the working tree, in MB."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / f.decode()).stat().st_size for f in files if f and (root / f.decode()).is_file()) / 1e6


def _without_pickles(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Leave out the loader's tokenizer pickles: they hold this machine's transformers and
    tokenizers versions (read past elsewhere), and Gemma 3's is 28 MB of the 60 MB budget."""
    return None if member.name.endswith(".pickle") else member


def pack(folder: Path) -> Path:
    """The tokenizers' cache folders, as one xz archive in ``folder``."""
    from wash.engine import cache_dir, marker_ok, load_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    target = folder / ARCHIVE
    with tarfile.open(target, "w:xz", preset=0) as tar:
        for name in TOKENIZERS:
            load_tokenizer(name)  # builds the cache entry from the packaged GGUF if it is missing
            source = cache_dir() / "tokenizers" / name
            if not marker_ok(source):
                raise SystemExit(f"tokenizer cache {source} is incomplete")
            tar.add(source, arcname=f"tokenizers/{name}", filter=_without_pickles)
    return target


def unpack(folder: Path, cache: Path) -> None:
    from wash.engine import marker_ok

    with tarfile.open(folder / ARCHIVE, "r:xz") as tar:
        tar.extractall(cache, filter="data")
    for name in TOKENIZERS:
        if not marker_ok(cache / "tokenizers" / name):
            raise SystemExit(f"unpacked tokenizer {name} is incomplete in {cache}")


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "pack":
        target = pack(Path(argv[1]))
        bundle, tracked = target.stat().st_size / 1e6, tracked_mb()
        print(f"{target}: {bundle:.1f} MB; tracked files {tracked:.1f} MB; together {bundle + tracked:.1f} MB "
              f"(budget {BUDGET_MB} MB)")
        return 0 if bundle + tracked <= BUDGET_MB else 1
    if len(argv) == 3 and argv[0] == "unpack":
        unpack(Path(argv[1]), Path(argv[2]))
        print(f"tokenizers unpacked into {argv[2]}")
        return 0
    print("usage: python tools/gpu_bundle.py pack FOLDER | unpack FOLDER CACHE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
