"""The project's benchmarks (`make bench`): a regular package, so that `benchmarks.NAME` is this
folder's module even where an installed distribution ships a top-level `benchmarks` of its own
(pyarrow 17's wheel does)."""
