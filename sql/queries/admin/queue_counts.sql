SELECT available, running, scheduled, retryable, completed, failed, cancelled, dlq
FROM {schema}.queue_counts_exact($1)
