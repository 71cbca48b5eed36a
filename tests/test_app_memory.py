"""What keeps the app's memory bounded while it serves: per-session state, and glibc's malloc arenas.

Sessions: the app served in this process with the tiny models takes several Generate
runs from one API client; afterwards that session holds none of the component copies
Gradio would otherwise file under new ids on every run (``wash.ui.sessions``), and no
stop flag. Arenas, checked in child processes (a cap, once set, stays for the process):
eight threads alive at once and allocating get eight arenas under glibc's default and
at most the cap with it, as glibc's own ``malloc_info`` report counts them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.app_client import app_client

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
    from wash.core.errors import WashInputError
    from wash.ui.settings import limit_malloc_arenas

    monkeypatch.setenv("WASH_MALLOC_ARENAS", "two")
    with pytest.raises(WashInputError, match="WASH_MALLOC_ARENAS must be a whole number, got 'two'"):
        limit_malloc_arenas()


# -- per-session state ----------------------------------------------------------------------


def test_generate_runs_leave_no_component_copies_or_stop_flags_in_the_session(served_tiny_app):
    from wash.ui.handlers import STOPS
    from wash.ui.providers import HEADERS

    url, demo = served_tiny_app
    rows = [["tiny-smollm2", "kgw", "1", ""], ["tiny-gemma3", "aar", "2", ""]]
    table = {"headers": HEADERS, "data": rows, "metadata": None}
    client = app_client(url)
    for seed in range(3):  # each run sends plots now and then and gr.update()s several outputs
        out = client.predict(table, "The harbour was quiet until", 6, 1.0, seed, "wash", "off", "eager",
                             api_name="/generate")
        assert out[0].startswith("**Done**"), out[0]
    session = demo.server_app.state_holder.session_data[client.session_hash]
    page = set(demo.blocks)
    assert set(session.blocks_config.blocks) <= page
    assert set(session.config_values) <= page
    assert client.session_hash not in STOPS


def test_only_unrendered_components_off_the_page_are_stray():
    import gradio as gr
    from gradio.state_holder import SessionState

    from wash.ui.sessions import drop_stray_components

    with gr.Blocks() as demo:
        plot = gr.Plot()
    with gr.Blocks():
        rendered = gr.Markdown("rendered elsewhere, as gr.render adds to a session")
    session = SessionState(demo)
    copy = gr.Plot(render=False)  # what Gradio builds for an update, filed also under its own id
    for block in (copy, rendered):
        session.blocks_config.blocks[block._id] = block
        session.config_values[block._id] = {"props": {}}
    assert drop_stray_components(session, demo.blocks) == 1
    assert copy._id not in session.blocks_config.blocks and copy._id not in session.config_values
    assert rendered._id in session.blocks_config.blocks and plot._id in session.blocks_config.blocks


# -- free heap memory handed back ------------------------------------------------------------
_HOLES = """
import ctypes
from tools.arena_growth import rss_anon_mb
from wash.ui.settings import release_free_memory

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
chunks = [libc.malloc(100_000) for _ in range(3000)]  # 300 MB under the mmap threshold: in the heap
for c in chunks:
    ctypes.memset(c, 1, 100_000)
for i, c in enumerate(chunks):
    if i % 20:  # every 20th stays: the heap cannot shrink from its top, the holes stay resident
        libc.free(c)
before = rss_anon_mb()
released = release_free_memory()
print(released, round(before - rss_anon_mb()))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
@pytest.mark.parametrize("setting, released", [("1", True), ("0", False)])
def test_free_heap_memory_goes_back_to_the_system_after_a_run_unless_turned_off(setting, released):
    env = dict(os.environ, PYTHONPATH=str(ROOT), WASH_MALLOC_TRIM=setting)
    out = subprocess.run([sys.executable, "-c", _HOLES], env=env, capture_output=True, text=True, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    said, freed_mb = out.stdout.split()
    assert said == str(released)
    # 285 MB of holes: nearly all of it goes back with the trim, none without
    assert (int(freed_mb) > 200) if released else (int(freed_mb) < 20)
