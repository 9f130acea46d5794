"""Screenshot a report (or any folder's index page) with headless Debian Chromium, for the README.

    .venv/bin/python scripts/screenshot_report.py var/demo/report/report.html docs/demo-report.png
"""
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.browser import chromium_page  # noqa: E402


def main() -> None:
    page_file, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    height = int(sys.argv[3]) if len(sys.argv) > 3 else 1400
    handler = partial(SimpleHTTPRequestHandler, directory=str(page_file.parent))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    Thread(target=server.serve_forever, daemon=True).start()
    try:
        with chromium_page() as page:
            page.set_viewport_size({"width": 1100, "height": height})
            page.goto(f"http://127.0.0.1:{server.server_port}/{page_file.name}")
            page.screenshot(path=str(out), full_page=False)
    finally:
        server.shutdown()
    print(out)


if __name__ == "__main__":
    main()
