"""Render a day's capacity review to PNG in headless Chromium, to see what a reader sees before scrolling.

    python -m tools.screenshot --home .home --day 2026-11-16 [--out FILE] [--width 1400] [--height 900]

    python -m tools.screenshot --home .home --ui [--asset core/gateway_requests] [--port 3111] [--out FILE]

(`make review-png` does it for the demo's first day.) With `--ui` it starts `tokenledger ui` for the home, shows
the asset's check list in the Dagster UI (each check's status for the latest day) and stops the UI again.
For a review, it prints where the PNG is and whether the verdict table is
above the fold: the verdict table's header is the only place the review paints its colour (`VERDICT_HEADER`), so
finding that colour in a viewport-sized screenshot means the table starts inside the first screen. Needs a Chromium
binary (Debian's `chromium` package: /usr/bin/chromium); nothing is fetched, the review is a local file.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from tokenledger.capacity.day import report_paths
from tokenledger.storage.layout import HomeLayout

CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
# tokenledger/report/review.py's CSS paints the verdict table's header cells #fff4d6 and nothing else.
VERDICT_HEADER = (0xFF, 0xF4, 0xD6)


def find_chromium() -> Path | None:
    """The first Chromium binary found (the Debian package's path first), or None."""
    for candidate in CHROMIUM_CANDIDATES:
        if Path(candidate).is_file():
            return Path(candidate)
    found = shutil.which("chromium")
    return Path(found) if found else None


def screenshot(html_path: Path | str, png_path: Path, width: int = 1400, height: int = 900,
               chromium: Path | None = None) -> Path:
    """Screenshot the top `width` x `height` pixels of `html_path` (or an http URL) into `png_path` with headless
    Chromium."""
    binary = chromium or find_chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found (tried " + ", ".join(CHROMIUM_CANDIDATES)
                                + "); install Debian's `chromium` package (apt-get install -y chromium)")
    png_path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tokenledger-chromium-") as profile:
        # A throwaway profile, no network, no GPU: the page is self-contained and nothing may be fetched.
        subprocess.run([str(binary), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                        "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
                        f"--screenshot={png_path}",
                        *(["--virtual-time-budget=15000", html_path] if isinstance(html_path, str)
                          else [html_path.resolve().as_uri()])],
                       check=True, capture_output=True, timeout=180)
    return png_path


def png_pixels(png_path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB bytes) of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes)."""
    data = png_path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{png_path} is not a PNG file")
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = chunk
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in (2, 6) or interlace:
        raise ValueError(f"{png_path}: only 8-bit RGB/RGBA non-interlaced PNGs are read here")
    channels = 3 if colour == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows, previous = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        previous = line
        rows.append(bytes(line) if channels == 3 else bytes(b for j in range(0, stride, 4) for b in line[j:j + 3]))
    return width, height, rows


def first_row_with(png_path: Path, rgb: tuple[int, int, int]) -> int | None:
    """The first pixel row (from the top) holding the colour `rgb`, or None when the screenshot has none."""
    needle = bytes(rgb)
    _, _, rows = png_pixels(png_path)
    for y, row in enumerate(rows):
        for x in range(0, len(row), 3):
            if row[x:x + 3] == needle:
                return y
    return None


def ui_screenshot(home: Path, png_path: Path, asset: str = "core/gateway_requests", port: int = 3111,
                  width: int = 1400, height: int = 900, timeout: float = 120.0) -> Path:
    """Start `tokenledger ui` for `home` on `port` (in a process group of its own), screenshot the asset's check
    list, then end the group and wait until the port is free."""
    import os
    import signal
    import socket
    import time
    import urllib.request

    base = f"http://127.0.0.1:{port}"
    ui = subprocess.Popen([sys.executable, "-m", "tokenledger.cli", "ui", "--home", str(home), "--port", str(port)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(f"{base}/server_info", timeout=2).close()
                break
            except OSError:
                if ui.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Dagster UI did not start on {base}") from None
                time.sleep(1)
        return screenshot(f"{base}/assets/{asset}?view=checks", png_path, width, height)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=30)
        for _ in range(30):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) != 0:
                    break
            time.sleep(1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.screenshot", description=__doc__.split("\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="the home whose reports/ holds the review")
    parser.add_argument("--day", type=date.fromisoformat, help="the review's UTC day, YYYY-MM-DD")
    parser.add_argument("--ui", action="store_true", help="the Dagster UI's check list of --asset instead")
    parser.add_argument("--asset", default="core/gateway_requests", help="with --ui: the asset whose checks to show")
    parser.add_argument("--port", type=int, default=3111, help="with --ui: the port the UI serves for the screenshot")
    parser.add_argument("--out", type=Path, help="the PNG to write (default: beside the review)")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=900)
    args = parser.parse_args(argv)
    if args.ui:
        home = args.home.expanduser().resolve()
        out = args.out or HomeLayout.of(home).home / "reports" / f"ui-checks-{args.asset.replace('/', '-')}.png"
        png = ui_screenshot(home, out, args.asset, args.port, args.width, args.height)
        print(f"{png} ({args.width} x {args.height}): the check list of {args.asset} in the Dagster UI")
        return 0
    if args.day is None:
        parser.error("--day is needed (or --ui)")
    html_path = report_paths(HomeLayout.of(args.home.expanduser().resolve()), args.day)[0]
    if not html_path.is_file():
        print(f"{html_path} does not exist: run the day first (tokenledger run --home ... --start {args.day}).",
              file=sys.stderr)
        return 2
    png = screenshot(html_path, args.out or html_path.with_suffix(".png"), args.width, args.height)
    row = first_row_with(png, VERDICT_HEADER)
    print(f"{png} ({args.width} x {args.height}): verdict table "
          + (f"above the fold (its header at {row} px)" if row is not None else "NOT above the fold"))
    return 0 if row is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
