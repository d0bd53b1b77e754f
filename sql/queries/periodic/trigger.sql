-- awa cron trigger: enqueue one job of schedule $1 now; NULL: no such schedule.
SELECT {schema}.trigger_periodic($1)
