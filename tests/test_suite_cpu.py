"""`benchmarks/suite_cpu.py` reads Linux accounting records right (docs/performance.md, "The test suite.s CPU", rests on it)."""

import struct

from benchmarks.suite_cpu import RECORD, comp_t, main, read_records, report


def record(name: bytes, utime: int, stime: int, etime: float = 100.0) -> bytes:
    return RECORD.pack(0, 3, 0, 0, 0, 0, 1, 1, 0, etime, utime, stime, 0, 0, 0, 0, 0, 0, name)


def test_comp_t_is_a_base_8_float():
    assert comp_t(0x1FFF) == 8191
    assert comp_t((1 << 13) | 5) == 40  # exponent 1: x 8
    assert comp_t((2 << 13) | 3) == 192  # exponent 2: x 64


def test_records_total_cpu_by_name(tmp_path):
    path = tmp_path / "acct.bin"
    path.write_bytes(record(b"ray::MapWorker(", 250, 50) + record(b"python", (1 << 13) | 100, 0)
                     + record(b"ray::MapWorker(", 100, 0))
    records = read_records(path)
    assert records == [("ray::MapWorker(", 3.0, 1.0), ("python", 8.0, 1.0), ("ray::MapWorker(", 1.0, 1.0)]
    text = report(records, top=5, wall=None)
    assert text.splitlines()[0] == "3 processes, 12 CPU-seconds"
    assert text.splitlines()[2].split() == ["8.0", "66.7%", "1", "8.0", "python"]
    assert text.splitlines()[3].split() == ["4.0", "33.3%", "2", "2.0", "ray::MapWorker("]
    assert report([("sleep", 0.0, 1.0)], top=5, wall=None).splitlines()[2].split() == ["0.0", "0.0%", "1", "0.0", "sleep"]


def test_a_file_of_another_format_is_refused_naming_it(tmp_path, capsys):
    path = tmp_path / "v2.bin"
    path.write_bytes(struct.pack("<BB62x", 0, 2))
    assert main(["--read", str(path)]) == 2
    assert str(path) in capsys.readouterr().err
    assert main(["--read", str(tmp_path / "missing.bin")]) == 2
    assert "missing.bin" in capsys.readouterr().err
