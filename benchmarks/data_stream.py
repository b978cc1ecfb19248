"""Training-stream throughput on one core: samples/s of `TrainStream.batch` per task and variant.

Goal: >= 50,000 samples/s for size-20 addition, micro-batches of 512, one thread. Plain
+, -, x, +/- use the vectorised fast path; hints, padding, sorting and OR use the string path, shown
for comparison, as is `generate` for single eval cells (reference path, Python ints).

    python benchmarks/data_stream.py [--seconds 1.0] [--size 512]
"""

from __future__ import annotations

import argparse
import time

import torch

from abacus_ray.tasks import TaskConfig, TrainStream, generate


def rate(fn, size: int, seconds: float) -> float:
    """Samples/s of `fn(index)` (each call yields `size` samples), timed over about `seconds`."""
    fn(0)  # warm-up (lookup tables, first allocation)
    calls, start = 0, time.perf_counter()
    while True:
        fn(calls + 1)
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return calls * size / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="timing window per row")
    parser.add_argument("--size", type=int, default=512, help="micro-batch size")
    args = parser.parse_args()
    torch.set_num_threads(1)
    size = args.size

    streams = [
        ("add n=20", TaskConfig(name="add", train_max_len=20), True),
        ("add n=20 (string path)", TaskConfig(name="add", train_max_len=20), False),
        ("sub n=20", TaskConfig(name="sub", train_max_len=20), True),
        ("addsub n=20", TaskConfig(name="addsub", train_max_len=20), True),
        ("mul n=15", TaskConfig(name="mul", train_max_len=15), True),
        ("mul n=15 (string path)", TaskConfig(name="mul", train_max_len=15), False),
        ("add n=40", TaskConfig(name="add", train_max_len=40), True),
        ("add n=20 pad_p=0.1", TaskConfig(name="add", train_max_len=20, pad_p=0.1), True),
        ("add n=20 cyclic hints", TaskConfig(name="add", train_max_len=20, index_hints="cyclic"), True),
        ("sort 10x10", TaskConfig(name="sort", train_max_len=10, train_max_array=10), True),
        ("or n=20", TaskConfig(name="or", train_max_len=20), True),
    ]
    print(f"TrainStream.batch, micro-batch {size}, 1 thread, {args.seconds:.1f} s per row")
    print(f"{'stream':<28} {'path':<7} {'samples/s':>12}")
    for name, task, fast in streams:
        stream = TrainStream(task, seed=0, fast_path=fast)
        r = rate(lambda k, s=stream: s.batch(k, size), size, args.seconds)
        print(f"{name:<28} {'fast' if stream.uses_fast_path else 'string':<7} {r:>12,.0f}")

    print()
    print("generate (one eval cell of 100 problems, Python-int answers)")
    print(f"{'cell':<28} {'problems/s':>12}")
    for task, i, j in (("add", 20, 20), ("add", 100, 100), ("add", 1000, 1000), ("mul", 25, 25),
                       ("mul", 1000, 1000), ("sort", 30, 30)):
        r = rate(lambda k, t=task, a=i, b=j: generate(t, a, b, 100, k), 100, args.seconds)
        print(f"{f'{task} {i}x{j}':<28} {r:>12,.0f}")


if __name__ == "__main__":
    main()
