"""`abacus-ray describe`: the resolved config of a preset + overrides (or of a checkpoint) and
its model's parameter count.

The model is built on the meta device, so even the 122M-parameter paper preset is described
instantly and without allocating memory.
"""

from __future__ import annotations

import argparse
import json

from abacus_ray.api.checks import check_readable
from abacus_ray.cli import add_config_args, config_from_args, plugin_overrides
from abacus_ray.config.dicts import flatten


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "describe",
        help="print the resolved config and the model's parameter count",
        description=__doc__,
    )
    p.add_argument("checkpoint", nargs="?", default=None, metavar="CHECKPOINT",
                   help="describe this checkpoint's config instead of --preset's (and, for "
                        "an imported one, where it came from)")
    add_config_args(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: the full config plus a top-level num_params")
    p.add_argument("--seq-len", type=int, default=None,
                   help="sequence length of the FLOPs/token line (default: 3n + 4, the length "
                        "of a size-n addition, n = task.train_max_len)")
    p.set_defaults(func=handler)


def build_meta_model(cfg):
    """The experiment's model on the meta device (shapes only, no memory)."""
    import torch  # heavy: loaded with the command, not at `abacus-ray --help`

    from abacus_ray.model.transformer import ArithmeticTransformer  # torch, as above

    with torch.device("meta"):
        return ArithmeticTransformer.for_experiment(cfg)


def param_groups(model) -> dict[str, int]:
    """Parameters per top-level part (embedding, recurrent block, output path)."""
    groups = {"embedding": 0, "block": 0, "output": 0}
    for name, child in model.named_children():
        n = sum(p.numel() for p in child.parameters())
        key = (
            "block"
            if name == "layers"
            else "embedding"
            if name in ("tok", "abacus", "learned", "emb_norm")
            else "output"
        )
        groups[key] += n
    return groups


def handler(args: argparse.Namespace) -> int:
    meta = {}
    # a checkpoint's own config; `import-official` records its source in meta
    if args.checkpoint is not None:
        from abacus_ray.model.checkpoint import (  # heavy: torch, not at `abacus-ray --help`
            META_FILE,
            read_checkpoint_config,
            read_json,
            resolve_checkpoint,
        )

        path = resolve_checkpoint(check_readable([args.checkpoint], "CHECKPOINT")[0])
        plugin_overrides(args)  # imported before the checkpoint's config names them
        cfg, meta = read_checkpoint_config(path), read_json(path / META_FILE)
    else:
        cfg = config_from_args(args)
    if args.seq_len is not None and args.seq_len < 1:
        raise ValueError(f"--seq-len: must be >= 1, got {args.seq_len}")
    model = build_meta_model(cfg)
    n = model.num_params()
    if args.json:
        source = {k: v for k, v in meta.items() if k.startswith("imported_")}
        print(json.dumps({**cfg.to_dict(), "num_params": n, **source}, indent=2, sort_keys=True))
        return 0
    m, t = cfg.model, cfg.task
    seq = args.seq_len or 3 * t.train_max_len + 4
    groups = param_groups(model)
    origin = (
        f"checkpoint {args.checkpoint}" if args.checkpoint is not None else f"preset {args.preset}"
    )
    print(f"{cfg.name} ({origin}): {t.name}, size {t.train_max_len}, tokenizer "
          f"{t.tokenizer_name} (vocab {model.vocab_size})")
    print(f"model: {m.positions} positions, {m.layers} x {m.recurrences} (layers x "
          f"recurrences, effective depth {m.layers * m.recurrences}; {m.test_recurrences} at "
          f"test), injection {m.injection}, {m.norm}-LN, hidden {m.hidden}, intermediate "
          f"{m.intermediate}, {m.heads} heads")
    print(f"parameters: {n:,} (embedding {groups['embedding']:,}, recurrent block "
          f"{groups['block']:,} = {m.layers} x {groups['block'] // m.layers:,}, output path "
          f"{groups['output']:,})")
    print(f"training FLOPs/token at sequence length {seq}: {model.flops_per_token(seq):.4g}")
    if "imported_from" in meta:
        print(f"imported from the official {meta.get('imported_class')} checkpoint "
              f"{meta['imported_from']} (model_config.json sha256 "
              f"{str(meta.get('imported_config_sha256'))[:12]}, model.safetensors sha256 "
              f"{str(meta.get('imported_weights_sha256'))[:12]})")
    print()
    for key, value in flatten(cfg.to_dict()).items():
        print(f"  {key} = {value}")
    return 0
