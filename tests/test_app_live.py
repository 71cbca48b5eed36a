"""The running app, end to end: its API through gradio_client, its page through Chromium.

A module fixture starts ``app.py`` in a subprocess on a free localhost port with
the tiny models (``WASH_APP_MODELS=tiny-smollm2,tiny-gemma3``) and stops it at
the end. API tests check that the app generates exactly what the engine does and
that concurrent sessions do not mix; browser tests (``-m browser``) drive the page
in Debian's headless Chromium; one more (``-m "browser and e2e"``) starts a
second server on the real offline models and takes the screenshot.

Set ``WASH_APP_SCREENSHOT=assets/screenshot.png`` (and optionally
``WASH_APP_E2E_TOKENS``) to write the real-model screenshot into the repository;
otherwise it goes to pytest's temporary directory.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
TINY_ROWS = [["tiny-smollm2", "kgw", "1", ""], ["tiny-gemma3", "aar", "2", ""],
             ["tiny-smollm2", "dipmark", "3", ""]]
#: Index of each output of /generate in the API's answer (gr.State is not part of it).
OUT_STATUS, OUT_TEXT, OUT_DETECTION, OUT_PLAIN = 0, 1, 7, 11


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AppServer:
    """``python app.py`` in its own process group, answering on ``url``."""

    def __init__(self, models: str | None, log_path: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ, GRADIO_SERVER_PORT=str(self.port), GRADIO_SERVER_NAME="127.0.0.1",
                   GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
        env.pop("WASH_APP_MODELS", None)
        if models:
            env["WASH_APP_MODELS"] = models
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url + "/", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"app not answering on {self.url}:\n{self.log_tail()}")

    def log_tail(self, n: int = 40) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=15)
        self._log.close()


def _serve(models: str | None, log_path: Path) -> Iterator[AppServer]:
    server = AppServer(models, log_path)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tiny_app(tmp_path_factory) -> Iterator[AppServer]:
    yield from _serve("tiny-smollm2,tiny-gemma3", tmp_path_factory.mktemp("app") / "tiny-app.log")


# -- API ------------------------------------------------------------------------------
def _table(rows: list[list[str]]) -> dict:
    return {"headers": ["model", "scheme", "key", "params"], "data": rows, "metadata": None}


def _api_generate(url: str, prompt: str, seed: int, max_new: int = 10, rows=TINY_ROWS, mode: str = "wash"):
    from gradio_client import Client

    client = Client(url, verbose=False)
    return client.predict(_table(rows), prompt, max_new, 1.0, seed, mode, False, api_name="/generate")


def _engine_generate(prompt: str, seed: int, max_new: int = 10, rows=TINY_ROWS, mode: str = "wash"):
    from wash.config import GenerationConfig, ProviderSpec
    from wash.ensemble import generate

    specs = [ProviderSpec.parse(f"{m}:{s}:{k}") for m, s, k, _ in rows]
    return generate(GenerationConfig(providers=specs, prompt=prompt, mode=mode, max_new_tokens=max_new,
                                     temperature=1.0, seed=seed))


def test_api_generation_equals_the_engine(tiny_app, tiny_smollm2, tiny_gemma3):
    prompt = "The committee met on Friday to"
    out = _api_generate(tiny_app.url, prompt, seed=7)
    expected = _engine_generate(prompt, seed=7)
    assert out[OUT_PLAIN] == expected.text
    assert "".join(seg["token"] for seg in out[OUT_TEXT]) == expected.text
    assert out[OUT_STATUS].startswith("**Done**")
    z_column = [row[6] for row in out[OUT_DETECTION]["data"]]
    assert z_column == pytest.approx([round(d.z, 3) for d in expected.detection])


def test_two_concurrent_clients_get_their_own_results(tiny_app, tiny_smollm2, tiny_gemma3):
    jobs = {"a": ("Once upon a time, in a quiet village", 11), "b": ("The quarterly report shows that", 23)}
    answers: dict[str, object] = {}
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            prompt, seed = jobs[name]
            answers[name] = _api_generate(tiny_app.url, prompt, seed, max_new=12)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert not errors, errors
    for name, (prompt, seed) in jobs.items():
        assert answers[name][OUT_PLAIN] == _engine_generate(prompt, seed, max_new=12).text, name
    assert answers["a"][OUT_PLAIN] != answers["b"][OUT_PLAIN]


@pytest.mark.parametrize("change, fragment", [
    ({"prompt": ""}, "the prompt is empty"),
    ({"rows": []}, "no provider given"),
    ({"rows": TINY_ROWS * 3}, "at most 8"),
    ({"rows": [["tiny-smollm2", "kgw", "seven", ""]]}, "not an integer"),
    ({"rows": [["no-such-model", "kgw", "1", ""]]}, "unknown model 'no-such-model'"),
    ({"max_new": 401}, "400"),
    ({"prompt": "long " * 1000}, "the prompt is too long"),
])
def test_api_bad_input_is_refused_by_name_and_the_app_keeps_serving(tiny_app, change, fragment):
    from gradio_client import Client
    from gradio_client.exceptions import AppError

    args = {"prompt": "Hello", "max_new": 4, "rows": TINY_ROWS}
    args.update(change)
    with pytest.raises(AppError) as err:
        _api_generate(tiny_app.url, args["prompt"], 0, args["max_new"], args["rows"])
    assert fragment in str(err.value)
    figure, text = Client(tiny_app.url, verbose=False).predict(500, 0.5, 8, 1, ["independent"],
                                                               api_name="/theory")
    assert "independent" in text


def test_api_detect_scores_text(tiny_app):
    from gradio_client import Client

    table, _, segments = Client(tiny_app.url, verbose=False).predict(
        "Some text to be scored by every detector, long enough to hold a few tokens.",
        _table(TINY_ROWS), 4.0, api_name="/detect")
    assert [row[0] for row in table["data"]] == ["P1 tiny-smollm2/kgw#1", "P2 tiny-gemma3/aar#2",
                                                 "P3 tiny-smollm2/dipmark#3"]
    assert len(segments) > 5


# -- browser ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is not installed: apt-get install chromium (make test does it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.set_default_timeout(60_000)
    page.goto(url, wait_until="load")
    page.wait_for_selector("#generate-btn")
    page.wait_for_selector("#max-new-tokens input[type=number]")
    return page


def _set_number(page, elem_id: str, value: int) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def _wait_finished(page, timeout_ms: int = 180_000) -> str:
    page.wait_for_function("() => { const s = document.querySelector('#status');"
                           " return s && /^(Done|Stopped)/.test(s.innerText.trim()); }", timeout=timeout_ms)
    return page.locator("#status").inner_text()


def _plot_data(page, elem_id: str) -> list[dict]:
    """Name and number of non-null points of every trace plotly drew in a gr.Plot."""
    return page.evaluate(
        "(id) => { const gd = document.querySelector('#' + id + ' .js-plotly-plot');"
        " if (!gd || !gd.data) return [];"
        " return gd.data.map(t => ({name: t.name, type: t.type,"
        "   points: (t.y || []).filter(v => v !== null && v !== undefined).length})); }", elem_id)


def _table_text(page, elem_id: str) -> str:
    """A gr.Dataframe's visible text (its rows live in a virtualised table, not one tbody)."""
    return page.locator(f"#{elem_id}").inner_text()


def _tokens(page, elem_id: str) -> list[str]:
    return page.locator(f"#{elem_id} .token").all_inner_texts()


@pytest.mark.browser
def test_browser_generation_shows_text_z_chart_and_distributions(tiny_app, browser):
    page = _open(browser, tiny_app.url)
    _set_number(page, "max-new-tokens", 12)
    page.click("#generate-btn")
    status = _wait_finished(page)
    assert status.startswith("Done") and "12 tokens" in status
    assert len(_tokens(page, "wash-text")) == 12
    z = _plot_data(page, "z-plot")
    assert [t["name"] for t in z] == ["P1 tiny-smollm2/kgw#15485863", "P2 tiny-gemma3/aar#42",
                                      "P3 tiny-smollm2/dipmark#7"]  # the page opens on the paper preset
    assert all(t["points"] >= 10 for t in z)
    assert page.locator("#z-plot .scatterlayer .trace").count() == 3
    dist = _plot_data(page, "dist-plot")
    assert any(t["name"].startswith("p̄") for t in dist) and all(t["points"] > 0 for t in dist)
    table = _table_text(page, "detection-table")
    assert all(name in table for name in (t["name"] for t in z)) and "detected (z > 4)" in table
    assert "tokens/s" in page.locator("#routing").inner_text()
    # clicking a token shows its own distribution and origin
    page.locator("#wash-text .token").nth(2).click()
    page.wait_for_function("() => document.querySelector('#token-info').innerText.includes('Token 3')")
    page.wait_for_function("() => { const gd = document.querySelector('#dist-plot .js-plotly-plot');"
                           " return gd && gd.layout.title.text.startsWith('Token 3'); }")
    assert page.locator("#download-json").is_enabled()
    page.close()


@pytest.mark.browser
def test_browser_compare_switch_shows_both_traces(tiny_app, browser):
    page = _open(browser, tiny_app.url)
    _set_number(page, "max-new-tokens", 6)
    page.locator("#compare input[type=checkbox]").check()
    page.click("#generate-btn")
    _wait_finished(page)
    assert len(_tokens(page, "single-text")) == 6
    names = [t["name"] for t in _plot_data(page, "z-plot")]
    assert len(names) == 4 and names[-1] == "P1 alone (single mode)"
    assert "single (P1 alone)" in _table_text(page, "detection-table")
    page.close()


@pytest.mark.browser
def test_browser_stop_ends_a_long_run(tiny_app, browser):
    page = _open(browser, tiny_app.url)
    _set_number(page, "max-new-tokens", 400)
    page.click("#generate-btn")
    page.wait_for_function("() => document.querySelectorAll('#wash-text .token').length >= 3")
    page.click("#stop-btn")
    status = _wait_finished(page, timeout_ms=30_000)
    assert status.startswith("Stopped")
    # The page lags the engine under load (throttled redraws), so only "well before the
    # 400-token end" is asserted here; stopping within one step is tested on the driver.
    assert len(_tokens(page, "wash-text")) < 400
    page.close()


@pytest.mark.browser
def test_browser_send_to_detect_and_score(tiny_app, browser):
    page = _open(browser, tiny_app.url)
    _set_number(page, "max-new-tokens", 8)
    page.click("#generate-btn")
    _wait_finished(page)
    page.click("#send-to-detect")
    page.wait_for_selector("#detect-btn", state="visible")
    assert page.locator("#detect-text textarea").input_value().strip()
    page.click("#detect-btn")
    page.wait_for_function("() => document.querySelector('#detect-table').innerText.includes('P3 ')")
    assert all(f"P{i} tiny-" in _table_text(page, "detect-table") for i in (1, 2, 3))
    page.wait_for_function("() => document.querySelectorAll('#detect-tokens .token').length > 0")
    page.close()


@pytest.mark.browser
def test_browser_bad_input_shows_an_error_and_the_app_keeps_answering(tiny_app, browser):
    page = _open(browser, tiny_app.url)
    page.locator("#prompt textarea").fill("")
    page.click("#generate-btn")
    page.get_by_text("the prompt is empty").first.wait_for(state="visible")
    page.locator("#prompt textarea").fill("A second try at")
    _set_number(page, "max-new-tokens", 3)
    page.click("#generate-btn")
    assert _wait_finished(page).startswith("Done")
    assert len(_tokens(page, "wash-text")) == 3
    page.close()


@pytest.mark.browser
def test_browser_theory_tab_plots_the_simulation(tiny_app, browser):
    page = _open(browser, tiny_app.url)
    page.get_by_role("tab", name="Theory").click()
    page.wait_for_function("() => { const gd = document.querySelector('#theory-plot .js-plotly-plot');"
                           " return gd && gd.data && gd.data.length >= 4; }")
    names = [t["name"] for t in _plot_data(page, "theory-plot")]
    assert {"independent", "coordinated", "biased"} <= set(names)
    page.close()


@pytest.mark.browser
@pytest.mark.e2e
def test_browser_real_models_paper_preset(browser, tmp_path):
    tokens = int(os.environ.get("WASH_APP_E2E_TOKENS", "6"))
    shot = Path(os.environ.get("WASH_APP_SCREENSHOT") or tmp_path / "screenshot.png")
    server_gen = _serve(None, tmp_path / "real-app.log")
    server = next(server_gen)
    try:
        page = _open(browser, server.url)
        page.click("#preset-0")
        page.wait_for_function("() => document.querySelector('#providers').innerText.includes('gemma3')")
        _set_number(page, "max-new-tokens", tokens)
        page.locator("#compare input[type=checkbox]").check()  # P1 alone runs alongside
        started = time.monotonic()
        page.click("#generate-btn")
        page.wait_for_selector("#wash-text .token", timeout=300_000)
        first_token_s = time.monotonic() - started
        assert _wait_finished(page, timeout_ms=400_000).startswith("Done")
        print(f"\nreal models: first token {first_token_s:.1f} s after the click (cold process)")
        z = _plot_data(page, "z-plot")
        assert len(z) == 4 and all(t["points"] >= min(tokens, 4) for t in z)
        assert len(_tokens(page, "single-text")) > 0
        assert all(t["name"] in _table_text(page, "detection-table") for t in z[:3])
        page.locator("#wash-text .token").nth(tokens // 2).click()
        page.wait_for_function(f"() => document.querySelector('#token-info').innerText"
                               f".includes('Token {tokens // 2 + 1}')")
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000
        page.close()
    finally:
        server_gen.close()
