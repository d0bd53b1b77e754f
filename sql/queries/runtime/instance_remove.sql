-- A clean stop removes the instance from runtime_instances.
-- $1 instance id (uuid text).
DELETE FROM {schema}.runtime_instances WHERE instance_id = $1::uuid
