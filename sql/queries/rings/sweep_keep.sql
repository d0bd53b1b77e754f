-- $1 failed-job retention (interval text), $2 ready rows at most.
SELECT {schema}.sweep_keep($1::interval, $2)
