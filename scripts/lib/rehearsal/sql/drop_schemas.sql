-- The clean-up: drops the ledger schema and the rehearsal schema.
-- Parameters: {schema} the rehearsal schema; {lschema} the ledger schema.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS {lschema} CASCADE;
DROP SCHEMA IF EXISTS {schema} CASCADE;
