-- Sealed batches (chaos.batches: a seal returned success) whose completion job
-- (docs/workflows.md, "Batches") was not enqueued exactly once, as asked, after the last
-- member's end, and completed. The evidence is the job rows, not the batch row: a
-- completion job is a job whose args carry "batch" (the producers' jobs never do),
-- wherever a row of it is (ready, deferred, waiting, dead-lettered); a batch's members are
-- the committed ledger jobs that joined it (unknown commits found applied included), and
-- a member's end is its first terminal outcome in chaos.outcomes. A batch is a violation
-- when:
--   - not exactly one job has args "batch" = its name;
--   - that job is not of kind $1 on queue $2, or lacks the args given at open ("p");
--   - its terminal outcomes are not exactly one 'completed';
--   - its args members / completed / failed (failed or dlq) / cancelled differ from the
--     ledger's, or completed + failed + cancelled differs from members;
--   - it exists while a member has no terminal outcome, or its first claim (chaos.claims,
--     the server's clock) is not after the last member's end (it is enqueued in the
--     transaction of that end, so it can only be claimed after that commits);
--   - awa.batches does not name it as the completion job, or not as finished.
-- $1: the completion job's kind, $2: the queue. One row: (batches judged, the violations
-- as text, at most 20, then how many).
WITH callbacks AS (
    SELECT DISTINCT ON (x.job_id) x.job_id, x.queue, x.kind, x.args
    FROM (SELECT r.job_id, q.queue, r.kind, r.args
          FROM awa.ready_entries r JOIN awa.queue_ids q ON q.queue_id = r.queue_id
          WHERE r.args ? 'batch'
          UNION ALL
          SELECT job_id, queue, kind, args FROM awa.deferred_jobs WHERE args ? 'batch'
          UNION ALL
          SELECT job_id, queue, kind, args FROM awa.waiting_jobs WHERE args ? 'batch'
          UNION ALL
          SELECT job_id, queue, kind, args FROM awa.dlq_entries WHERE args ? 'batch') x
    ORDER BY x.job_id),
ends AS (
    SELECT DISTINCT ON (o.job_id) o.job_id, o.state, o.finished_at
    FROM chaos.outcomes o
    WHERE o.state IN ('completed', 'failed', 'cancelled', 'dlq')
      AND o.job_id IN (SELECT l.job_id FROM chaos.ledger l WHERE l.batch IS NOT NULL)
    ORDER BY o.job_id, o.run_lease),
expected AS (
    SELECT b.name, b.producer, count(l.job_id) AS members,
           count(*) FILTER (WHERE e.state = 'completed') AS completed,
           count(*) FILTER (WHERE e.state IN ('failed', 'dlq')) AS failed,
           count(*) FILTER (WHERE e.state = 'cancelled') AS cancelled,
           count(l.job_id) FILTER (WHERE e.state IS NULL) AS unended,
           max(e.finished_at) AS last_end
    FROM chaos.batches b
    LEFT JOIN chaos.ledger l ON l.batch = b.name AND l.committed
    LEFT JOIN ends e ON e.job_id = l.job_id
    GROUP BY b.name, b.producer),
found AS (
    SELECT x.name, count(c.job_id) AS n,
           string_agg(c.job_id::text, ',' ORDER BY c.job_id) AS ids, min(c.job_id) AS job_id
    FROM expected x LEFT JOIN callbacks c ON c.args->>'batch' = x.name
    GROUP BY x.name),
judged AS (
    SELECT x.*, f.n, f.ids, c.job_id, c.kind, c.queue, c.args,
           (SELECT string_agg(o.state, ',' ORDER BY o.run_lease) FROM chaos.outcomes o
            WHERE o.job_id = c.job_id
              AND o.state IN ('completed', 'failed', 'cancelled', 'dlq')) AS terminal,
           (SELECT min(k.written_at)
            FROM chaos.ready r
            JOIN chaos.claims k
              ON k.queue_id = r.queue_id AND k.priority = r.priority
             AND k.enqueue_shard = r.enqueue_shard AND r.lane_seq BETWEEN k.first_seq AND k.last_seq
            WHERE r.job_id = c.job_id) AS claimed_at,
           a.members AS a_members, a.completed AS a_completed, a.failed AS a_failed,
           a.cancelled AS a_cancelled, ab.completion_job, ab.finished_at IS NOT NULL AS finished
    FROM expected x
    JOIN found f USING (name)
    LEFT JOIN callbacks c ON f.n = 1 AND c.job_id = f.job_id
    LEFT JOIN LATERAL (
        SELECT CASE WHEN jsonb_typeof(c.args->'members') = 'number'
                    THEN (c.args->>'members')::numeric END AS members,
               CASE WHEN jsonb_typeof(c.args->'completed') = 'number'
                    THEN (c.args->>'completed')::numeric END AS completed,
               CASE WHEN jsonb_typeof(c.args->'failed') = 'number'
                    THEN (c.args->>'failed')::numeric END AS failed,
               CASE WHEN jsonb_typeof(c.args->'cancelled') = 'number'
                    THEN (c.args->>'cancelled')::numeric END AS cancelled) a ON true
    LEFT JOIN awa.batches ab ON ab.name = x.name),
why AS (
    SELECT j.name, concat_ws('; ',
        CASE WHEN j.n <> 1 THEN format('%s completion jobs (%s)', j.n, coalesce(j.ids, 'none')) END,
        CASE WHEN j.n = 1 AND (j.kind IS DISTINCT FROM $1 OR j.queue IS DISTINCT FROM $2)
             THEN format('job %s is a %s on queue %s', j.job_id, j.kind, j.queue) END,
        CASE WHEN j.n = 1 AND (j.args->'p') IS DISTINCT FROM to_jsonb(j.producer)
             THEN format('job %s lacks the args given at open ("p": %s)', j.job_id, j.producer) END,
        CASE WHEN j.n = 1 AND j.terminal IS DISTINCT FROM 'completed'
             THEN format('job %s ended %s', j.job_id, coalesce(j.terminal, 'never')) END,
        CASE WHEN j.n = 1 AND (j.a_members IS DISTINCT FROM j.members
                               OR j.a_completed IS DISTINCT FROM j.completed
                               OR j.a_failed IS DISTINCT FROM j.failed
                               OR j.a_cancelled IS DISTINCT FROM j.cancelled
                               OR j.a_completed + j.a_failed + j.a_cancelled
                                  IS DISTINCT FROM j.a_members)
             THEN format('job %s counts members %s completed %s failed %s cancelled %s, the '
                         'ledger %s: %s %s %s', j.job_id, j.args->'members',
                         j.args->'completed', j.args->'failed', j.args->'cancelled',
                         j.members, j.completed, j.failed, j.cancelled) END,
        CASE WHEN j.n = 1 AND j.unended > 0
             THEN format('job %s exists while %s members have no terminal outcome', j.job_id,
                         j.unended) END,
        CASE WHEN j.n = 1 AND j.claimed_at <= j.last_end
             THEN format('job %s claimed at %s, before its last member ended (%s)', j.job_id,
                         j.claimed_at, j.last_end) END,
        CASE WHEN j.n = 1 AND (j.completion_job IS DISTINCT FROM j.job_id
                               OR NOT coalesce(j.finished, false))
             THEN format('awa.batches says completion job %s, %s', coalesce(j.completion_job::text,
                         'none'), CASE WHEN j.finished THEN 'finished' ELSE 'not finished' END) END
        ) AS reasons
    FROM judged j)
SELECT (SELECT count(*) FROM chaos.batches),
       (SELECT string_agg(format('batch %s: %s', w.name, w.reasons), ' | ' ORDER BY w.name)
        FROM (SELECT * FROM why WHERE reasons <> '' ORDER BY name LIMIT 20) w),
       (SELECT count(*) FROM why WHERE reasons <> '')
