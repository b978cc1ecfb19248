"""Build `.gpu/site.tgz`: Ray, stripped, plus the dependencies the GPU machine's image lacks.

    python benchmarks/gpu/bundle.py [--python 3.12] [--out .gpu/site.tgz] [--max-mb 60]

The GPU machine has PyTorch with CUDA but no Ray, and only 64 MiB travel with a command
(docs/performance.md, "Running on a GPU machine without Ray"). The Ray wheel alone is 79 MB, 32 MB
of it the Java workers; this script downloads the wheels for the machine's Python (manylinux x86_64), unpacks them into one
`site/` tree, deletes what the project never imports (`ray/jars`, `ray/rllib`, `ray/llm`, `ray/serve`,
the dashboard's source maps), and packs it with tar, which keeps the executable bits of `raylet` and
`gcs_server` that a zip extraction loses. It fails if the tarball is over `--max-mb`. The wheels are
`ray[tune,train,data]` at this checkout's pinned version with everything it needs, resolved by pip
for the target, less what the image has (`IMAGE_HAS`). Without `[default]` Ray runs as a minimal
install (no dashboard, as the embedded Ray anyway starts), and without plotly the dashboards are not
built there: GPU runs pass `--no-dashboard` and bring Parquet back. `benchmarks/gpu/run.sh` unpacks it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from packaging.utils import canonicalize_name

from abacus_ray import storage

# What the GPU image already has, canonical names
# (docs/performance.md, "Running on a GPU machine without Ray").
IMAGE_HAS = {canonicalize_name(n) for n in (
    "torch", "triton", "numpy", "pyarrow", "pandas", "pytest", "hypothesis", "psutil", "tqdm", "rich",
    "tensorboard", "grpcio", "msgpack", "protobuf", "pyyaml", "click", "filelock", "requests", "aiohttp",
    "aiosignal", "frozenlist", "multidict", "yarl", "attrs", "idna", "certifi", "charset-normalizer",
    "urllib3", "packaging", "fsspec", "typing-extensions", "six", "python-dateutil", "pytz", "tzdata",
    "markdown-it-py", "mdurl", "pygments", "jinja2", "markupsafe", "sympy", "mpmath", "networkx", "setuptools",
)}
EXTRAS = "tune,train,data"
STRIP = ("ray/jars", "ray/rllib", "ray/llm", "ray/serve")
EXECUTABLES = ("ray/core/src/ray/raylet/raylet", "ray/core/src/ray/gcs/gcs_server")
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")


def download(python: str, dest: Path) -> None:
    """Ray with its extras' whole dependency tree, resolved by pip for the target interpreter."""
    ray = f"ray[{EXTRAS}]=={importlib.metadata.version('ray')}"
    platforms = [a for p in PLATFORMS for a in ("--platform", p)]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
                    "--implementation", "cp", *platforms, "-d", str(dest), ray], check=True)


def wheel_name(whl: Path) -> str:
    return canonicalize_name(whl.name.split("-")[0])


def unpack(wheels: Path, site: Path) -> list[str]:
    """Unpack the wheels the image lacks into `site`, strip Ray; returns the names unpacked."""
    taken = []
    for whl in sorted(wheels.glob("*.whl")):
        if wheel_name(whl) in IMAGE_HAS:
            continue
        taken.append(whl.name)
        with zipfile.ZipFile(whl) as z:
            z.extractall(site)
    for rel in STRIP:
        shutil.rmtree(site / rel, ignore_errors=True)
    for f in site.glob("ray/dashboard/**/*.js.map"):
        f.unlink()
    for rel in EXECUTABLES:
        if (site / rel).exists():
            (site / rel).chmod(0o755)
    for f in site.glob("*.dist-info/RECORD"):  # hashes of files we deleted: drop them
        f.unlink()
    return taken


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default="3.12", help="the GPU image's Python (default 3.12)")
    p.add_argument("--out", default=".gpu/site.tgz", help="tarball to write (default .gpu/site.tgz, git-ignored)")
    p.add_argument("--max-mb", type=float, default=60.0, help="fail above this size (64 MiB travel in all)")
    args = p.parse_args(argv)
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        download(args.python, tmp / "wheels")
        taken = unpack(tmp / "wheels", tmp / "site")
        print("wheels:", " ".join(taken))
        packed = io.BytesIO()  # at most --max-mb: whole in memory, then one atomic write
        with tarfile.open(fileobj=packed, mode="w:gz", compresslevel=9) as tar:
            tar.add(tmp / "site", arcname="site")
        storage.write_bytes(storage.on_disk(out), packed.getvalue())
    mb = out.stat().st_size / 2**20
    print(f"{out}: {mb:.1f} MiB ({len(taken)} wheels, Python {args.python})")
    if mb > args.max_mb:
        print(f"{out}: over the {args.max_mb:g} MiB limit", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
