-- upsert a periodic job: Client start-up (source 'code', all of one start-up in one
-- transaction) and awa cron add (source 'cli'); sql/functions/0110_periodic.sql.
SELECT created, {schema}.iso_utc(next_fire_at)
FROM {schema}.upsert_periodic($1, $2, $3, $4::integer[], $5::integer[], $6::integer[],
                              $7::integer[], $8::integer[], $9::integer[], $10, $11, $12::bigint,
                              $13, $14, $15::jsonb, $16::integer, $17::integer, $18::text[],
                              $19::jsonb, $20, $21)
