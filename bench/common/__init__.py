"""Shared set-up of the database benchmarks (bench/ingest.py, retrieval.py, answer.py).

A package, not a bench/*.py file, so that `make bench` (which runs every bench/*.py) never
runs it. The scripts import it as `common` because their own folder is sys.path[0].

Order matters, because Django reads its settings once:

1. `common.bootstrap.django_setup(data_dir)`: imports nothing of the project before it
   points KOINON_DATA_DIR at the bench's data directory and sets Django up.
2. Only then `common.services`, `common.corpus` and `common.stats` (they import models).

- bootstrap: paths (ROOT, NQ_FILE, ...) and `django_setup`.
- services: embedded PostgreSQL and Redis started/stopped for one run, the recreated and
  migrated database, VACUUM ANALYZE.
- corpus: NQ-open gold passages and questions, their cached embeddings, filler passages,
  bulk-loaded Document/DocumentRevision/Extraction/Passage rows, the HNSW index, the bench
  users and space.
- stats: percentiles.
- quality_sets, quality_report (bench/quality.py): the question sets, their documents and
  their rules for "supported"; the tallies, tables and plots of their figures.
"""
