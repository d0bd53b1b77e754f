-- Client::readiness: the database answers a statement.
SELECT 1
