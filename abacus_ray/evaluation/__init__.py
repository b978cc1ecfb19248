"""evaluation layer: exact-match scoring of checkpoints on (i, j) grids into Parquet.

The official evaluation: docs/official-code.md §7.

grids            named paper grids, `--cells` / `--diagonal` specs
regions          id / ood / ood100plus, sorting views
noise            per-cell seeded initial states shared by all engines
teacher_forcing  one-forward exact match
decoding         KV-cache, per-recurrence and naive greedy decoders
engine           packing cells into batches, verdicts
errors           the class of a wrong answer (length, carry, other)
results          versioned Parquet schema, atomic parts, keys
places           where results are: the one reading of a RESULTS argument
aggregate        region means, seed spread, Wilson CIs
claims           a figure's claim and its verdict on a sweep's results
offset_reach     Fig. 10's table: one row per Abacus offset k
work             settings, capacity check, missing cells, work units
progress         stderr progress bar with ETA
runner           `score_cells` (unit of work) and `evaluate` (resumable, in-process)
problem_file     scoring a file of problems (`abacus-ray eval --problems`)
validation       the validation score: exact match on a few long diagonal cells during
                 training (a search's early-stopping metric)
"""
