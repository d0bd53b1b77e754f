SELECT available, running, scheduled, retryable, completed, failed, cancelled, dlq, waiting
FROM {schema}.queue_counts_exact($1)
