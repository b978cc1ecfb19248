"""`abacus-ray dashboard RESULTS --serve`: the site on 127.0.0.1, rebuilt while results stream in.

Evaluators write Parquet parts atomically (temp file + rename), so the set of `part-*.parquet` files
and their sizes say whether anything changed. On every request for a page or for `stamp.json` the
server compares that signature with the one the site was built from and rebuilds first if it
differs; the pages poll `stamp.json` every few seconds and reload themselves (keeping the selection,
which lives in the URL hash) when the stamp moved. Only loopback is ever bound: the dashboards show
paths and run names that are nobody else's business.
"""

from __future__ import annotations

import functools
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TextIO

from abacus_ray.storage import Location
from dashboards.build import build_site
from dashboards.data import signature
from dashboards.site import ClaimOf

HOST = "127.0.0.1"
REBUILD_PATHS = ("/", "/stamp.json")


class LiveSite:
    """A site directory that rebuilds itself from `results` when the Parquet parts changed."""

    def __init__(self, results: Location, out_dir: Path,
                 log: TextIO | None = None, claims: ClaimOf | None = None) -> None:
        self.results, self.out_dir = results, Path(out_dir)
        self.log = log or sys.stderr
        self._lock = threading.Lock()
        self._built: tuple | None = None
        self.builds = 0
        self.last_error: str | None = None
        self.claims = claims

    def refresh(self) -> bool:
        """Rebuild if the parts changed since the last build; True if it rebuilt."""
        with self._lock:
            sig = signature(self.results)
            if sig == self._built:
                return False
            try:
                build_site(self.results, self.out_dir, self.claims)
            except (ValueError, OSError) as e:  # e.g. no parts yet: keep serving what is there
                self.last_error = str(e)
                self.log.write(f"dashboard: not rebuilt: {e}\n")
                return False
            self._built, self.last_error = sig, None
            self.builds += 1
            return True


def _handler(site: LiveSite):
    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0].split("#", 1)[0]
            if path in REBUILD_PATHS or path.endswith(".html"):
                site.refresh()
            super().do_GET()

        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def log_message(self, fmt: str, *args) -> None:  # quiet: one line per rebuild is enough
            pass

    return functools.partial(Handler, directory=str(site.out_dir))


def make_server(results: Location, out_dir: Path, port: int = 8765,
                log: TextIO | None = None, claims: ClaimOf | None = None
                ) -> tuple[ThreadingHTTPServer, LiveSite]:
    """A loopback HTTP server for the live site (port 0: any free port);
    builds the site once first."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port: must be 0..65535, got {port}")
    site = LiveSite(results, out_dir, log, claims)
    if not site.refresh() and site.last_error:
        raise ValueError(site.last_error)
    server = ThreadingHTTPServer((HOST, port), _handler(site))
    server.daemon_threads = True
    return server, site


def serve(results: Location, out_dir: Path, port: int = 8765,
          log: TextIO | None = None, claims: ClaimOf | None = None) -> None:
    """Serve until interrupted."""
    server, _ = make_server(results, out_dir, port, log, claims)
    host, real_port = server.server_address[:2]
    (log or sys.stderr).write(f"dashboard: serving {out_dir} at "
                              f"http://{host}:{real_port}/ (Ctrl-C to stop)\n")
    try:
        server.serve_forever()
    finally:
        server.server_close()
