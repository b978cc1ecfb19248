"""`abacus-ray dashboard RESULTS [--out DIR] [--serve] [--port P]`: interactive dashboards from
Parquet.

RESULTS is a results directory, a sweep root (holding `results/`) or a storage root holding several
sweeps. The site is static HTML that works offline; `--serve` serves it on 127.0.0.1 and rebuilds it
when new Parquet parts arrive, so an evaluation can be watched while it streams in.
"""

from __future__ import annotations

import argparse
import socket
import tempfile
from pathlib import Path

from abacus_ray import storage
from abacus_ray.cli import CLIError
from abacus_ray.sweep_dir import SweepDir


def default_out(loc: storage.Location) -> Path:
    """The sweep's dashboard (`SweepDir.dashboard`) of a sweep's results directory or root, else
    `dashboard/` inside the storage root given; for an object-store URI, a directory on this
    machine (`storage.driver_dir`), printed."""
    sweep = SweepDir.holding(loc) or SweepDir.at(loc)
    return sweep.dashboard if sweep is not None else storage.driver_dir(loc, SweepDir.DASHBOARD)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dashboard",
        help="build interactive accuracy dashboards from Parquet results",
        description=__doc__,
    )
    p.add_argument("results", metavar="RESULTS",
                   help="a results directory, a sweep root (holding results/) or a storage root "
                        "holding several sweeps: a path or an object-store URI (s3://, gs://)")
    p.add_argument("--out", metavar="DIR", default=None,
                   help="where to write the site: a directory or an object-store URI (built "
                        "here, then copied up; not with --serve) (default: a sweep's "
                        "dashboard/ beside its results/, else RESULTS/dashboard; for a URI "
                        "RESULTS, a directory under ~/.abacus-ray/ on this machine, printed)")
    p.add_argument("--serve", action="store_true",
                   help="serve the site on 127.0.0.1 and rebuild it when new Parquet parts "
                        "arrive")
    p.add_argument("--port", type=int, default=8765,
                   help="port for --serve; 0 picks a free one (default: %(default)s)")
    p.set_defaults(func=handler)


def check_port(port: int, flag: str = "--port") -> None:
    """Refuse, before anything is built, a port that `--serve` could not listen on (busy,
    privileged, out of range); 0 (any free port) always passes."""
    from dashboards.serve import HOST  # the one address the server binds

    if not 0 <= port <= 65535:
        raise CLIError(f"{flag}: must be 0..65535, got {port} (0 picks a free one)")
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server binds
        try:
            s.bind((HOST, port))
        except OSError as e:
            raise CLIError(
                f"{flag}: cannot listen on {HOST}:{port} ({e.strerror or e}); choose another port, "
                "or --port 0 for a free one"
            ) from None


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.api.verdicts import claim_for  # each sweep's figure claim, for the index
    from dashboards.build import build_site  # heavy: pandas and plotly, not at `abacus-ray --help`

    if args.serve:
        check_port(args.port)  # before the site is built
    # resolved once (a URI probed: one line, seconds)
    results = storage.probe(args.results, "RESULTS", write=False)
    target = storage.probe(args.out, "--out") if args.out and storage.is_uri(args.out) else None
    if target is not None and not target.local:  # built here, then copied up
        if args.serve:
            raise ValueError(f"--out: {target}: --serve serves a local directory; give one")
        with tempfile.TemporaryDirectory(prefix="abacus-dashboard-") as tmp:
            build_site(results, Path(tmp), claim_for)
            storage.upload(Path(tmp), target)
        print(target / "index.html")
        return 0
    out = storage.check_local_dir(Path(target.path if target else args.out or default_out(results)),
                                  "--out")
    if args.serve:
        from dashboards.serve import serve  # heavy: pandas and plotly, as above

        try:
            serve(results, out, port=args.port, claims=claim_for)
        except KeyboardInterrupt:
            pass
        return 0
    print(build_whole(results, out, claim_for))
    return 0


def build_whole(results: storage.Location, out: Path, claims) -> Path:
    """Build the site beside `out` (from a copy of it by hard links, so a rebuild keeps whatever
    else it holds and rewrites only its pages) and swap it in: a failure, a full disk included
    (named by `out`), leaves the old site as it was and no half-built one."""
    from dashboards.build import build_site  # heavy: pandas and plotly

    index = storage.build_aside(out, lambda stage: build_site(results, stage, claims))
    return (out / index.name).resolve()
