"""Documents, by the steps of their lifecycle (services):

- `upload`: the bytes stored as a revision, the one role check for changing documents;
- `extraction`: the revision's readings extracted, one chunked into the passages it serves;
- `embedding`: those passages embedded, and embedded again when the model changes;
- `progress`: the heartbeats the sweeper reads to tell work under way from work lost.
"""
