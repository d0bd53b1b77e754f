-- The attempt ends of a schema from before the rings (no claim_closures): every end is in
-- done_entries. A query (no trailing semicolon), put into snapshot.sql as {outcomes}.
-- Parameters: {schema} the rehearsal schema.
SELECT d.job_id, d.run_lease, d.state FROM {schema}.done_entries d
