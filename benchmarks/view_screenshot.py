"""A screenshot of a `robocompose view` recording in Rerun's web viewer, in headless Chromium.

    python benchmarks/view_screenshot.py RUN.rrd docs/view/recording.png [--wait-s 90]

Serves the recording with `rerun --serve-web`, opens the viewer in headless Chromium (WebGL on
SwiftShader: no GPU, no display; `apt-get install chromium`), waits for the WebAssembly viewer
to load it, and saves the page through the DevTools protocol (`websockets`, the `robot` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import websockets

VIEWER_PORT, GRPC_PORT, DEBUG_PORT = 9090, 9876, 9333


def _wait_for(url: str, seconds: float) -> bytes:
    deadline = time.monotonic() + seconds
    while True:
        try:
            return urllib.request.urlopen(url).read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


async def _capture(page_ws: str, url: str, wait_s: float, out: Path) -> None:
    async with websockets.connect(page_ws, max_size=2**28) as ws:
        calls = 0

        async def call(method: str, **params: object) -> dict:
            nonlocal calls
            calls += 1
            await ws.send(json.dumps({"id": calls, "method": method, "params": params}))
            while True:
                message = json.loads(await ws.recv())
                if message.get("id") == calls:
                    return message

        await call(
            "Emulation.setDeviceMetricsOverride",
            width=1600,
            height=1000,
            deviceScaleFactor=1,
            mobile=False,
        )
        await call("Page.navigate", url=url)
        await asyncio.sleep(wait_s)  # the viewer compiles its WebAssembly, then streams the data
        shot = await call("Page.captureScreenshot", format="png")
        out.write_bytes(base64.b64decode(shot["result"]["data"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("recording", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--wait-s", type=float, default=90.0)
    args = parser.parse_args()
    rerun = Path(sys.executable).with_name("rerun")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("needs Chromium: apt-get install chromium")
    server = subprocess.Popen(
        [str(rerun), "--serve-web", "--web-viewer-port", str(VIEWER_PORT)]
        + ["--port", str(GRPC_PORT), str(args.recording)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    browser = subprocess.Popen(
        [chromium, "--headless=new", "--no-sandbox", "--use-angle=swiftshader"]
        + ["--enable-unsafe-swiftshader", "--ignore-gpu-blocklist", "--window-size=1600,1000"]
        + [f"--remote-debugging-port={DEBUG_PORT}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(f"http://127.0.0.1:{VIEWER_PORT}/", 30)
        tabs = json.loads(_wait_for(f"http://127.0.0.1:{DEBUG_PORT}/json", 30))
        page = next(t["webSocketDebuggerUrl"] for t in tabs if t["type"] == "page")
        source = quote(f"rerun+http://localhost:{GRPC_PORT}/proxy", safe="")
        url = f"http://127.0.0.1:{VIEWER_PORT}?url={source}"
        args.out.parent.mkdir(parents=True, exist_ok=True)
        asyncio.run(_capture(page, url, args.wait_s, args.out))
    finally:
        browser.terminate()
        server.terminate()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
