"""The parts of scripts/upgrade-rehearsal (docs/upgrading.md, "Rehearsing an upgrade").

common    paths, errors, logging, short commands, the SQL loader
build     the old release's worktree and build, the current tree's build, CLI features
db        the database URL (local only) and psql
workers   the `awa work` processes and what their logs say
producer  the producer thread (insert_job_compat through one psql session)
ledger    the ledger of committed jobs and its verdict (sql/*.sql)
session   one rehearsal's schema, workers, events and clean-up
report    the JSON report and the printed table
"""
