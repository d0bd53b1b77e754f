-- The jobs a call just wrote join their open batch (InsertOpts::batch; add_batch_members in
-- sql/functions/0069_batches.sql), in the call's transaction: refused with 23503 when the
-- batch does not exist and 55000 when it is sealed, which rolls the call back.
SELECT {schema}.add_batch_members($1::text, $2::bigint[])
