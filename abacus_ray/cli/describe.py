"""`abacus-ray describe`: the resolved config of a preset + overrides and its model's parameter count.

The model is built on the meta device, so even the 122M-parameter paper preset is described
instantly and without allocating memory.
"""

from __future__ import annotations

import argparse
import json

from abacus_ray.cli import add_config_args, config_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("describe", help="print the resolved config and the model's parameter count",
                              description=__doc__)
    add_config_args(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: the full config plus a top-level num_params")
    p.add_argument("--seq-len", type=int, default=None,
                   help="sequence length for the FLOPs/token line (default: 3n+4, size-n addition)")
    p.set_defaults(func=handler)


def build_meta_model(cfg):
    """The experiment's model on the meta device (shapes only, no memory)."""
    import torch

    from abacus_ray.model.transformer import ArithmeticTransformer

    with torch.device("meta"):
        return ArithmeticTransformer.for_experiment(cfg)


def param_groups(model) -> dict[str, int]:
    """Parameters per top-level part (embedding, recurrent block, output path)."""
    groups = {"embedding": 0, "block": 0, "output": 0}
    for name, child in model.named_children():
        n = sum(p.numel() for p in child.parameters())
        key = "block" if name == "layers" else "embedding" if name in ("tok", "abacus", "learned", "emb_norm") else "output"
        groups[key] += n
    return groups


def handler(args: argparse.Namespace) -> int:
    from abacus_ray.config.dicts import flatten

    cfg = config_from_args(args)
    if args.seq_len is not None and args.seq_len < 1:
        raise ValueError(f"--seq-len: must be >= 1, got {args.seq_len}")
    model = build_meta_model(cfg)
    n = model.num_params()
    if args.json:
        print(json.dumps({**cfg.to_dict(), "num_params": n}, indent=2, sort_keys=True))
        return 0
    m, t = cfg.model, cfg.task
    seq = args.seq_len or 3 * t.train_max_len + 4
    groups = param_groups(model)
    print(f"{cfg.name} (preset {args.preset}): {t.name}, size {t.train_max_len}, tokenizer "
          f"{t.tokenizer_name} (vocab {model.vocab_size})")
    print(f"model: {m.positions} positions, {m.layers} x {m.recurrences} (layers x recurrences, effective depth "
          f"{m.layers * m.recurrences}; {m.test_recurrences} at test), injection {m.injection}, {m.norm}-LN, "
          f"hidden {m.hidden}, intermediate {m.intermediate}, {m.heads} heads")
    print(f"parameters: {n:,} (embedding {groups['embedding']:,}, recurrent block {groups['block']:,} = "
          f"{m.layers} x {groups['block'] // m.layers:,}, output path {groups['output']:,})")
    print(f"training FLOPs/token at sequence length {seq}: {model.flops_per_token(seq):.4g}")
    print()
    for key, value in flatten(cfg.to_dict()).items():
        print(f"  {key} = {value}")
    return 0
