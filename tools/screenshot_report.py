"""Screenshot a result set's HTML report with headless Chromium (for docs/report-h200.png).

    python tools/screenshot_report.py RESULT_DIR OUT.png [--width 1280] [--height 2000]

The report is rendered into a temporary directory (RESULT_DIR is left alone), loaded from a
file:// URL with networking off, and screenshotted. Exit 1 when the page logs a console message
(a script error, console.error); exit 2 when Chromium is missing or RESULT_DIR is unreadable.
Chromium does not log a failed external load; the tests check for external references statically.
The tests use the functions here too (tests/test_report_browser.py).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120.0
# A console line: "[pid:tid:date:INFO:CONSOLE:1] "message", source: file:///... (1)"
CONSOLE = re.compile(r":CONSOLE(?:\(\d+\)|:\d+)?\]|Uncaught")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(chromium: str, url: str, *args: str, timeout_s: float = TIMEOUT_S) -> tuple[str, str]:
    """Run headless Chromium on url with its own throwaway profile; (stdout, stderr).

    Networking is off (no background services, host names resolve nowhere): nothing is fetched.
    """
    with tempfile.TemporaryDirectory(prefix="gpubench-chromium-") as profile:
        cmd = [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--no-default-browser-check",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
            url,
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited with {proc.returncode}: {err.strip()[-2000:]}")
    return out, err


def console_messages(stderr: str) -> list[str]:
    """The page's console messages (console.* calls, uncaught errors) in Chromium's log."""
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


def screenshot(html: Path, png: Path, width: int = 1280, height: int = 2000) -> list[str]:
    """Screenshot html into png; the console messages the page produced."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    png.unlink(missing_ok=True)
    _, err = run_chromium(
        chromium,
        html.resolve().as_uri(),
        f"--screenshot={png.resolve()}",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
    )
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot: {err.strip()[-2000:]}")
    return console_messages(err)


def dump_dom(html: Path) -> tuple[str, list[str]]:
    """The DOM Chromium built from html, and the console messages."""
    chromium = find_chromium()
    if chromium is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    out, err = run_chromium(chromium, html.resolve().as_uri(), "--dump-dom")
    return out, console_messages(err)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("result_dir", type=Path, help="a result directory (results.csv, env.json)")
    parser.add_argument("out", type=Path, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2000)
    args = parser.parse_args(argv)
    from bench.errors import GpubenchError
    from bench.report.html import write_report

    if find_chromium() is None:
        print("screenshot_report: chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="gpubench-report-") as tmp:
        try:
            html = write_report(args.result_dir, Path(tmp) / "report.html")
        except GpubenchError as exc:
            print(f"screenshot_report: {exc}", file=sys.stderr)
            return 2
        try:
            messages = screenshot(html, args.out, args.width, args.height)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"screenshot_report: {exc}", file=sys.stderr)
            return 1
    for line in messages:
        print(f"screenshot_report: console: {line}", file=sys.stderr)
    if messages:
        return 1
    print(f"screenshot_report: wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
