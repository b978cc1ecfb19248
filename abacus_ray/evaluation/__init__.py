"""evaluation layer: exact-match scoring of checkpoints on (i, j) grids into Parquet (docs/official-code.md §7).

grids        named paper grids, `--cells` / `--diagonal` specs          regions     id / ood / ood100plus, sorting views
noise        per-cell seeded initial states shared by all engines        teacher_forcing   one-forward exact match
decoding     KV-cache, per-recurrence and naive greedy decoders          engine      packing cells into batches, verdicts
results      versioned Parquet schema, atomic parts, keys                aggregate   region means, seed spread, Wilson CIs
work         settings, capacity check, missing cells, work units         progress    stderr progress bar with ETA
runner       `score_cells` (unit of work) and `evaluate` (resumable, in-process)
probe        exact match on a few long diagonal cells during training (a search's early-stopping metric)
"""
