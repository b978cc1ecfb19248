"""Bad input is refused (6/6): hostile places. Files that are not regular files or are far larger than
what they name (a FIFO, a link to /dev/zero, a sparse multi-GB file named like a Parquet part, a
config.json or a meta.json), a full disk, a busy port, a cluster address without its token and two
imports racing for one run directory. Each case: exit 2, one stderr line naming the flag or the file,
in seconds (a FIFO is never opened: a command that opened one would wait for a writer forever), nothing
half-written, no secret echoed.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from refusal import assert_refused
from test_bad_input_commands import offline, places  # noqa: F401 (fixtures)


# --- a busy port ----------------------------------------------------------------------------------------

def test_serving_on_a_busy_port_is_refused_naming_the_port_before_the_site_is_built(places, offline,  # noqa: F811
                                                                                      work, no_ray):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        site = offline.parent / "site"
        message = assert_refused(["dashboard", str(places["results"]), "--out", str(site), "--serve",
                                  "--port", str(port)], "--port", "hostile places: a busy port",
                                 roots=[work, offline])
    assert str(port) in message and not site.exists()
