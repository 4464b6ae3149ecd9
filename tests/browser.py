"""Headless Chromium driven over the DevTools protocol (aiohttp's websocket client, which
Ray's default extras already install): load a page, evaluate JavaScript, take screenshots.

``Browser(url)`` starts ``chromium --headless`` with a fresh profile and an ephemeral
DevTools port (the one its "DevTools listening on" line names), attaches to the page
target and keeps one websocket.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import re
import tempfile
import threading
import time
import urllib.request
from pathlib import Path


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class Browser:
    def __init__(self, url: str, width: int = 1440, height: int = 900, timeout: float = 30.0):
        self._id = 0
        self.profile = tempfile.mkdtemp(prefix="rayrm-chromium-")
        self.proc = subprocess.Popen(
            [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
             f"--window-size={width},{height}", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
             url], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        listening, found = threading.Event(), []

        def pump():                     # Chromium names its DevTools port on stderr once it listens
            for line in self.proc.stderr:
                m = re.search(rb"DevTools listening on ws://[^:/]+:(\d+)/", line)
                if m and not found:
                    found.append(int(m.group(1)))
                    listening.set()

        threading.Thread(target=pump, daemon=True).start()
        if not listening.wait(timeout):
            self.close()
            raise RuntimeError("chromium did not open its DevTools port")
        port = found[0]
        targets = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t["type"] == "page")
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(self._connect(page["webSocketDebuggerUrl"]))

    async def _connect(self, ws_url: str) -> None:
        import aiohttp
        self.session = aiohttp.ClientSession()
        self.ws = await self.session.ws_connect(ws_url, max_msg_size=0)

    async def _call(self, method: str, params: dict) -> dict:
        self._id += 1
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = json.loads((await self.ws.receive()).data)
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg["result"]

    def call(self, method: str, params: dict | None = None, timeout: float = 30.0) -> dict:
        return self.loop.run_until_complete(asyncio.wait_for(self._call(method, params or {}), timeout))

    def evaluate(self, expression: str, timeout: float = 30.0):
        """The value of a JavaScript expression (a promise is awaited, up to ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                        "returnByValue": True}, max(0.1, deadline - time.monotonic()))
                break
            except RuntimeError as e:
                # the page's first load replaced the document the expression ran in: run it
                # again in the new one
                if "Execution context was destroyed" not in str(e) or time.monotonic() >= deadline:
                    raise
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait_until(self, condition: str, timeout: float = 30.0) -> None:
        """Wait until the JavaScript ``condition`` holds, polled in the page every 50 ms (a
        condition run in a document the first load replaces is run again in the new one)."""
        self.evaluate("new Promise((resolve) => { const tick = setInterval(() => { if (%s) "
                      "{ clearInterval(tick); resolve(true); } }, 50); })" % condition, timeout=timeout)

    def screenshot(self, path: str | Path) -> None:
        Path(path).write_bytes(base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"]))

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.loop.run_until_complete(self.ws.close())
            self.loop.run_until_complete(self.session.close())
            self.loop.close()
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)
