-- Records the catalogue of the functions just installed; writes nothing when unchanged,
-- so a migrate with nothing to do stays read-only.
-- $1 catalogue, $2 oldest compatible catalogue.
INSERT INTO {schema}.schema_catalogue AS c (catalogue, oldest_compatible)
VALUES ($1::integer, $2::integer)
ON CONFLICT (singleton) DO UPDATE
    SET catalogue = EXCLUDED.catalogue, oldest_compatible = EXCLUDED.oldest_compatible,
        installed_at = now()
    WHERE (c.catalogue, c.oldest_compatible)
          IS DISTINCT FROM (EXCLUDED.catalogue, EXCLUDED.oldest_compatible)
