"""Forward+backward throughput of `ArithmeticTransformer` (tokens/s), printed as a table.

Models: the `tiny` preset (2 x 1, hidden 128) and the paper's 8 x 2 Abacus model (hidden 1024), on
size-20 addition sequences (64 tokens, docs/official-code.md §2.2). A step is one forward at full depth with gradient
through every recurrence, a token-mean cross-entropy, and the backward (no optimiser step). FLOP/s
use `flops_per_token` (full-context attention; see its docstring).

    python benchmarks/model_step.py                      # CPU, 2 threads
    python benchmarks/model_step.py --device cuda --precision bf16 --paper-batch 256
"""

from __future__ import annotations

import argparse
import contextlib
import time

import torch
import torch.nn.functional as F

from abacus_ray.config import preset
from abacus_ray.model import ArithmeticTransformer


def run(name: str, overrides: list[str], batch: int, seq: int, steps: int, device: str, precision: str) -> dict:
    cfg = preset(name.split()[0], overrides)
    torch.manual_seed(0)
    model = ArithmeticTransformer.for_experiment(cfg).to(device).train()
    ids = torch.randint(4, model.vocab_size, (batch, seq), device=device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    autocast = (torch.autocast(device_type=torch.device(device).type, dtype=dtype) if dtype
                else contextlib.nullcontext())

    def step() -> None:
        with autocast:
            logits = model(ids[:, :-1], abacus_offset=0)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        loss.backward()
        model.zero_grad(set_to_none=True)

    def sync() -> None:
        if torch.device(device).type == "cuda":
            torch.cuda.synchronize()

    step()  # warm-up
    sync()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    seconds = (time.perf_counter() - t0) / steps
    tokens = batch * (seq - 1)
    flops = model.flops_per_token(seq - 1) * tokens / seconds
    return dict(model=name, params=model.num_params(), batch=batch, seq=seq - 1, ms=1e3 * seconds,
                tok_s=tokens / seconds, gflop_s=flops / 1e9)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--tiny-batch", type=int, default=64)
    p.add_argument("--paper-batch", type=int, default=4)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    rows = [
        run("tiny", [], args.tiny_batch, 65, args.steps * 3, args.device, args.precision),
        run("paper 8x2", ["model.layers=8", "model.recurrences=2"], args.paper_batch, 65, args.steps,
            args.device, args.precision),
    ]
    dev = args.device if args.device != "cpu" else f"cpu x{args.threads} threads"
    print(f"forward+backward, {dev}, {args.precision}, torch {torch.__version__}")
    print(f"{'model':<10} {'params':>12} {'batch':>6} {'seq':>4} {'ms/step':>9} {'tokens/s':>10} {'GFLOP/s':>9}")
    for r in rows:
        print(f"{r['model']:<10} {r['params']:>12,} {r['batch']:>6} {r['seq']:>4} {r['ms']:>9.1f} "
              f"{r['tok_s']:>10.0f} {r['gflop_s']:>9.1f}")


if __name__ == "__main__":
    main()
