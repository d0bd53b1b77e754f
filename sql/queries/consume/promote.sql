SELECT {schema}.promote_due_deferred($1)
