"""The gradio client these tools (and the tests) drive the app with."""

from __future__ import annotations

from typing import Any


def app_client(url: str, **kwargs: Any) -> Any:
    """``gradio_client.Client(url)``, quiet, checking certificates only where there are some (https).

    Why: the client opens a fresh httpx connection for each request, its stream and each file it
    fetches, and with verification on every one of them loads the CA bundle first (26 ms on a
    2-core machine, ``docs/BENCHMARKS.md``): a soak's or a latency run's client then spends its
    CPU on certificates instead of leaving it to the app it measures. The app these tools start
    answers over plain http on this machine, where there is no certificate to check; an https
    URL (a Space) keeps verification on."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=url.lower().startswith("https://"), **kwargs)
