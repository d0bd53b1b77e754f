-- The function catalogue the schema's functions belong to (src/schema/function_catalogue.hpp,
-- docs/upgrading.md). One row, written by the migrator when it installs a function set:
-- `catalogue` is that build's number, `oldest_compatible` the oldest catalogue whose
-- binaries may still run against these functions. A build with a lower number leaves the
-- functions as they are, or refuses to migrate when it is below `oldest_compatible`.
-- A schema without the row holds functions installed before catalogues existed (0).
--
-- Being a migration, it also makes binaries that predate catalogues refuse this schema
-- with migrate on (they refuse any migration they do not know), rather than reinstall
-- their functions over the newer ones.
CREATE TABLE {schema}.schema_catalogue (
    singleton         boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    catalogue         integer     NOT NULL CHECK (catalogue > 0),
    oldest_compatible integer     NOT NULL CHECK (oldest_compatible BETWEEN 0 AND catalogue),
    installed_at      timestamptz NOT NULL DEFAULT now()
);
