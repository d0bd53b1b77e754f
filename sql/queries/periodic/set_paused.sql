-- awa cron pause|resume: $1 name, $2 paused. false: no such schedule.
SELECT {schema}.set_periodic_paused($1, $2)
