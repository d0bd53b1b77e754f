-- One wake-up per channel. $1 holds each queue's channel, notify_channel(queue) ("awa:<queue>"
-- or its hash), computed by the caller with the C++ twin (awa::notify_channel): the SQL
-- function is a STRICT CASE, which PostgreSQL cannot inline, so calling it here parsed and
-- planned its body again on every execution of this, the enqueue path's busiest statement
-- after the insert itself.
SELECT pg_notify(c, '') FROM unnest($1::text[]) AS c
