-- A fresh start for a run: drops the engine's schema awa and the ledger's schema chaos.
-- A script, no parameters.
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS awa CASCADE;
DROP SCHEMA IF EXISTS chaos CASCADE
