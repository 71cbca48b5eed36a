"""The app's process caps glibc's malloc arenas, so its memory stops climbing one server thread at a time.

Checked in child processes (a cap, once set, stays for the process): eight threads alive
at once and allocating get eight arenas under glibc's default and at most the cap with it,
as glibc's own ``malloc_info`` report counts them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_COUNT_ARENAS = """
import ctypes, sys, tempfile, threading
import torch
from wash.ui.settings import limit_malloc_arenas

cap = limit_malloc_arenas()
together = threading.Barrier(8)

def work():
    together.wait()  # all eight alive and allocating at once
    for _ in range(20):
        keep = [torch.empty(50_000) for _ in range(4)] + [bytearray(2_000) for _ in range(200)]
        del keep
    together.wait()

threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
path = tempfile.mktemp()
stream = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(stream))
libc.fclose(ctypes.c_void_p(stream))
print(cap, open(path).read().count("<heap nr="))
"""


def _arenas(setting: str) -> tuple[str, int]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), WASH_MALLOC_ARENAS=setting, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", _COUNT_ARENAS], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    cap, heaps = out.stdout.split()
    return cap, int(heaps)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_cap_keeps_eight_busy_threads_to_two_arenas():
    cap, heaps = _arenas("0")  # glibc's default: the main arena and one per thread (at most 8 per core)
    assert cap == "None" and heaps >= min(9, 8 * (os.cpu_count() or 1))
    cap, heaps = _arenas("2")
    assert cap == "2" and heaps <= 2


def test_a_bad_arena_setting_is_refused_by_name(monkeypatch):
    from wash.errors import WashInputError
    from wash.ui.settings import limit_malloc_arenas

    monkeypatch.setenv("WASH_MALLOC_ARENAS", "two")
    with pytest.raises(WashInputError, match="WASH_MALLOC_ARENAS must be a whole number, got 'two'"):
        limit_malloc_arenas()
