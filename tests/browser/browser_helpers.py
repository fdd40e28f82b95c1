"""Helpers for the browser tests: start the app server, open pages, wait for Streamlit runs, screenshots.

Debian's Chromium is used (`/usr/bin/chromium`); no browser is ever downloaded. The
whole directory is skipped, with the reason, when that binary is missing.
Every server started here is stopped at the end of the session (or of its test).
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
START_TIMEOUT_S = 180          # the server answering /_stcore/health
MODEL_TIMEOUT_MS = 300_000     # a cold first load de-quantises the bundled model (~15 s alone, minutes on a busy CI)
STEP_TIMEOUT_MS = 120_000      # one rerun with a few forward passes, on a loaded 2-core machine

PAGES = ["step_by_step", "beam_tree", "compare", "expected_embedding", "teacher_forcing", "kv_cache", "structured",
         "speculative", "answers", "reproduce", "interview"]


def existing_pages() -> list:
    return [name for name in PAGES if (ROOT / "pages" / f"{name}.py").is_file()]


# ---- the server ----------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, proc: subprocess.Popen, port: int, log: Path):
        self.proc, self.port, self.log = proc, port, log
        self.url = f"http://127.0.0.1:{port}"
        self.started_for = 0.0          # seconds from starting the process to its first answer

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss / 2**20

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def _die_with_parent() -> None:
    """Run in the server's child process: Linux sends it SIGTERM when the test process dies,
    so a pytest killed by a timeout leaves no Streamlit server holding the model."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_server(log_dir: Path, env_extra: dict | None = None, early_load: bool = False,
                 script: Path | None = None) -> Server:
    """`streamlit run app.py` on a free port; with `early_load`, as `make run` starts it (python -m ui.serve:
    the first model loads as the server starts); `script`: another script than app.py (a benchmark's reference)."""
    port = free_port()
    log = log_dir / f"streamlit-{port}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.update(env_extra or {})
    start = ["-m", "ui.serve"] if early_load else ["-m", "streamlit", "run", str(script or ROOT / "app.py")]
    cmd = [sys.executable, *start, "--server.port", str(port),
           "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none", "--server.runOnSave", "false"]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT,
                                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    server = Server(proc, port, log)
    began = time.monotonic()
    deadline = began + START_TIMEOUT_S
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with {proc.returncode}:\n{server.log_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=5) as response:
                if response.status == 200:
                    server.started_for = time.monotonic() - began
                    return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"streamlit did not answer within {START_TIMEOUT_S} s:\n{server.log_text()[-3000:]}")
        time.sleep(0.5)


@contextmanager
def running_server(log_dir: Path, env_extra: dict | None = None, early_load: bool = False,
                   script: Path | None = None):
    server = start_server(log_dir, env_extra, early_load, script)
    try:
        yield server
    finally:
        server.stop()


# ---- the browser ---------------------------------------------------------------------
def new_context(browser, server=None):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True,
                                  locale="en-US")
    if server is not None:
        try:
            context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        except Exception:   # noqa: BLE001 - a Chromium without clipboard permissions still runs the rest
            pass
    context.set_default_timeout(STEP_TIMEOUT_MS)
    context.add_init_script(RUN_OBSERVER)
    return context


# ---- helpers the tests share ------------------------------------------------------------
# Streamlit marks the app element with the script state ("running" / "notRunning"); this
# observer, installed before any page script, counts runs and remembers the last change,
# so a test can wait for "the run my click started has finished and nothing followed".
RUN_OBSERVER = """
window.__dsRuns = 0; window.__dsState = null; window.__dsChanged = performance.now();
const isApp = (el) => el && el.getAttribute && el.getAttribute('data-testid') === 'stApp';
new MutationObserver((records) => {
  const app = document.querySelector('[data-testid="stApp"]');
  const now = app ? app.getAttribute('data-test-script-state') : null;
  // the callback runs after the changes: a fast run may already be over, so each change is read from the
  // records (a record's oldValue is the value before it; the next record's, or today's, the value after)
  const changes = records.filter(r => r.type === 'attributes' && isApp(r.target));
  changes.forEach((r, i) => {
    const after = i + 1 < changes.length ? changes[i + 1].oldValue : now;
    if (after === 'running' && r.oldValue !== 'running') window.__dsRuns++;
  });
  if (changes.length) { window.__dsState = now; window.__dsChanged = performance.now(); return; }
  if (app && now !== window.__dsState) {           // the app element itself was added or replaced
    if (now === 'running') window.__dsRuns++;
    window.__dsState = now; window.__dsChanged = performance.now();
  }
}).observe(document, {subtree: true, childList: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ['data-test-script-state']});
// what the server sends: a run whose start and end reach the page together is drawn in one go, its state
// attribute never changing, and only its messages say that the server answered
window.__dsMsgs = 0; window.__dsMsgAt = 0;
window.WebSocket = class extends window.WebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener('message', () => { window.__dsMsgs++; window.__dsMsgAt = performance.now(); });
  }
};
"""
SEEN_WITHIN_MS = 30_000   # a run starts at once after the click that asks for it (the work comes after)
# A run that ends and at once starts another (st.rerun, a fragment's whole-page rerun) is not "done": the server
# starts the next in the same thread, and Chromium sees it ~20 ms later (measured on every page); none of the
# app's widgets or charts sends a value on its own after drawing, so a short quiet time is enough.
QUIET_MS = 300
# A run seen only by its messages (its state attribute never changed) is over once they stop: a longer quiet
# time, as the page may still be drawing what the last one brought.
ANSWERED_QUIET_MS = 1000


def runs(page) -> int:
    return page.evaluate("window.__dsRuns || 0")


def messages(page) -> int:
    return page.evaluate("window.__dsMsgs || 0")


def wait_idle(page, timeout_ms: int = MODEL_TIMEOUT_MS, after: int | None = None, answered: int = -1) -> None:
    """Wait until no script run is in progress and none started for a moment.

    `after`: a run count taken before an action; then a new run must be seen, or, when none is seen
    within SEEN_WITHIN_MS, the app must be idle and quiet after that. `answered`: the count of the server's
    messages taken with it; more of them, then ANSWERED_QUIET_MS without one, also end the wait (a run too
    fast for its state to be drawn)."""
    need = -1 if after is None else after
    try:
        try:
            _wait_idle(page, need, min(timeout_ms, SEEN_WITHIN_MS) if need >= 0 else timeout_ms, answered)
        except Exception:
            if need < 0:
                raise
            # no new run seen, and the app idle: a run so fast that it ended between two observations
            # would leave the count where it was; what counts is that the app is idle and quiet now
            _note_slow_wait(page, need, answered)
            _wait_idle(page, -1, timeout_ms)
    except Exception as exc:
        state = page.evaluate("""() => { const a = document.querySelector('[data-testid="stApp"]');
            return {runs: window.__dsRuns, state: a && a.getAttribute('data-test-script-state'),
                    since_ms: Math.round(performance.now() - (window.__dsChanged || 0)), url: location.href}; }""")
        try:
            shot = screenshot(page, "timeout_" + re.sub(r"\W+", "_", page.url.split("?")[0].rsplit("/", 1)[-1]))
        except Exception:   # noqa: BLE001
            shot = None
        raise AssertionError(f"the app did not settle within {timeout_ms / 1000:.0f} s: {state} (screenshot {shot})") \
            from exc


def _note_slow_wait(page, need: int, answered: int) -> None:
    """With DECODESCOPE_WAIT_LOG set to a file: append the test and the address where a wait saw no run and no
    answer within SEEN_WITHIN_MS (time lost waiting for what never came; a run seen but longer than that is
    not noted)."""
    log = os.environ.get("DECODESCOPE_WAIT_LOG")
    floor = need if page.evaluate("!!window.__dsActing") else 0      # a new document counts from 0
    if log and runs(page) <= floor and (answered < 0 or messages(page) <= answered):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?')}\t{page.url}\n")


def _wait_idle(page, need: int, timeout_ms: int, answered: int = -1) -> None:
    page.wait_for_function(
        """([need, quiet, answered, answeredQuiet]) => {
            const app = document.querySelector('[data-testid="stApp"]');
            if (!app || window.__dsRuns === undefined) return false;
            const state = app.getAttribute('data-test-script-state');
            const conn = app.getAttribute('data-test-connection-state');
            // a new document (the action followed a link) counts its runs from 0: any run of its own will do
            const floor = need >= 0 && !window.__dsActing ? 0 : need;
            const seen = window.__dsRuns > floor
                || (answered >= 0 && window.__dsActing && window.__dsMsgs > answered
                    && performance.now() - window.__dsMsgAt > answeredQuiet);
            return seen && state === 'notRunning' && conn === 'CONNECTED'
                && performance.now() - Math.max(window.__dsChanged, window.__dsMsgAt) > quiet
                && !document.querySelector('[data-stale="true"]');
        }""", arg=[need, QUIET_MS, answered, ANSWERED_QUIET_MS], timeout=timeout_ms, polling=50)


def begin_action(page) -> int:
    """Mark the page as acted on and return its run count: `wait_idle(page, after=...)` then waits for a run
    that starts after this (a page that loads a new document forgets the mark and counts its runs from 0)."""
    before = runs(page)
    page.evaluate("window.__dsActing = true")
    return before


def act(page, action, timeout_ms: int = MODEL_TIMEOUT_MS) -> None:
    """Do something that makes the app rerun, and wait for that rerun (and any it triggers) to end."""
    wait_idle(page, timeout_ms)           # never act on a page in the middle of a run (stale copies, inert parts)
    sent = messages(page)
    before = begin_action(page)
    action()
    wait_idle(page, timeout_ms, after=before, answered=sent)


def _is_upload(response) -> bool:
    return "/_stcore/upload_file" in response.url and response.request.method == "PUT"


def upload(page, key: str, path_or_payload, shows=None, sent: bool = True) -> None:
    """Open the 'Open a trace file' expander and give the uploader with this key a file.

    sent: False for a file the uploader refuses in the browser (over its size limit): no run follows, so none
    is waited for (waiting for one would wait SEEN_WITHIN_MS in vain); `shows` then says when it is done.

    shows: a locator for what the page shows once it has read this file (its message). Replacing a file is two
    runs, the old file taken away and then the new one read, with the new file's transfer between them; on a
    busy machine that gap can pass for the end, so a test that reads the message waits for it."""
    box = page.locator(f".st-key-{key}")
    if not box.is_visible():
        page.get_by_text("Open a trace file").first.click()
    target = page.locator(f".st-key-{key} input[type=file]")
    if sent:
        # the file goes up by HTTP first, and only then does the page ask for a run: the server's messages are
        # counted from the transfer's end (a message still arriving from before would pass for the answer while
        # a busy server is still receiving the file)
        wait_idle(page)
        before = begin_action(page)
        with page.expect_response(_is_upload, timeout=STEP_TIMEOUT_MS):
            target.set_input_files(path_or_payload)
        wait_idle(page, after=before, answered=messages(page))
    else:
        wait_idle(page)
        target.set_input_files(path_or_payload)
    if shows is not None:
        try:
            shows.first.wait_for(state="attached", timeout=SEEN_WITHIN_MS)
        except Exception:   # noqa: BLE001  the test's own assertion names what is missing
            pass
        wait_idle(page)


def open_page(page, server, name: str, query: str = "", timeout_ms: int = MODEL_TIMEOUT_MS) -> None:
    page.goto(f"{server.url}/{name}{('?' + query) if query else ''}", wait_until="domcontentloaded")
    wait_idle(page, timeout_ms)


class PagePool:
    """Pages opened once and read by several tests of a module: one page load instead of one per test.

    Only for tests that look (read boxes, colours, texts; hover, resize or move the focus): a test that clicks,
    types or uploads changes the page for the next one, and takes a page of its own (`take`: the pool's own,
    once the tests that look at it have run)."""

    def __init__(self, context, server):
        self.context, self.server, self.pages = context, server, {}

    def get(self, name: str, query: str, size: tuple = (1400, 1000)):
        key = (name, query, size)
        if key not in self.pages:
            page = self.context.new_page()
            page.set_viewport_size({"width": size[0], "height": size[1]})      # before the page is drawn
            open_page(page, self.server, name, query)
            self.pages[key] = page
        return self.pages[key]

    def take(self, name: str, query: str, size: tuple = (1400, 1000)):
        """The page, out of the pool, for a test that then changes it (and closes it): the one the looking tests
        used when they came first, else a fresh one."""
        page = self.get(name, query, size)
        del self.pages[(name, query, size)]
        return page

    def close(self) -> None:
        for page in self.pages.values():
            page.close()
        self.pages.clear()


def exception_texts(page) -> list:
    return page.locator('[data-testid="stException"]').all_inner_texts()


def assert_no_exception(page, server=None) -> None:
    texts = exception_texts(page)
    log = ("\n--- server log ---\n" + server.log_text()[-3000:]) if (texts and server is not None) else ""
    assert not texts, "Streamlit exception on the page:\n" + "\n".join(texts) + log


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    # Streamlit scrolls inside its main container, so grow the viewport to the content for the shot
    size = page.viewport_size or {"width": 1400, "height": 1000}
    height = page.evaluate("""() => { const m = document.querySelector('[data-testid="stMain"]');
                                      return m ? m.scrollHeight : document.body.scrollHeight; }""")
    tall = min(max(int(height) + 40, size["height"]), 8000)
    try:
        if tall != size["height"]:
            page.set_viewport_size({"width": size["width"], "height": tall})
            page.wait_for_timeout(300)   # let Plotly redraw at the new size (a repaint, not a wait for the app)
        page.screenshot(path=str(path), full_page=True)
    finally:
        if tall != size["height"]:
            page.set_viewport_size(size)
    return path


def sidebar_text_area(page):
    return page.locator('[data-testid="stSidebar"] .st-key-prompt textarea').first


def set_prompt(page, text: str) -> None:
    """Type a prompt into the sidebar and commit it (Ctrl+Enter), then wait for the rerun."""
    wait_idle(page)                       # parts of the page are inert while a run is in progress
    area = sidebar_text_area(page)
    area.fill(text)
    act(page, lambda: area.press("Control+Enter"))


def click_key(page, key: str) -> None:
    """Click the button of the widget with this Streamlit key, and wait for the rerun."""
    act(page, lambda: page.locator(f".st-key-{key} button").first.click())


def chart_texts(page, wanted: str, chart: int = 0, timeout_ms: int = 30_000) -> list:
    """The texts of a drawn Plotly chart, once one of them contains `wanted`.

    Plotly draws its SVG after the script run has ended, so a chart read right after a run can
    still be empty; wait for the text asked about, then return them all (for the assertion message)."""
    plot = page.locator(".js-plotly-plot").nth(chart)
    plot.scroll_into_view_if_needed()
    try:
        plot.locator("text").filter(has_text=wanted).first.wait_for(state="attached", timeout=timeout_ms)
    except Exception:   # noqa: BLE001  the caller's assertion says what is missing, with every text seen
        pass
    return plot.locator("text").evaluate_all("els => els.map(e => e.textContent)")


# ---- what the pages show ------------------------------------------------------------------------
TOKEN_SPANS = "span[title^='step ']"          # one span per generated token in the coloured text views


def shown_tokens(page, scope: str = "") -> list:
    """The visible text of each generated token in the coloured text view(s) under `scope`, from the hovers."""
    titles = page.locator(f"{scope} {TOKEN_SPANS}".strip()).evaluate_all("els => els.map(e => e.title)")
    out = []
    for title in titles:
        m = re.match(r"step (\d+): (.*?)(?: · p = [0-9.]+)?(?: · rank \d+)?(?: · forced)?"
                     r"(?: · flagged in What happened\?)?$", title, re.S)
        assert m, title
        out.append((int(m.group(1)), m.group(2)))
    return out


def wait_chart(page, scope: str = "", timeout_ms: int = MODEL_TIMEOUT_MS):
    page.locator(f"{scope} [data-testid='stPlotlyChart'] .main-svg".strip()).first.wait_for(
        state="attached", timeout=timeout_ms)
