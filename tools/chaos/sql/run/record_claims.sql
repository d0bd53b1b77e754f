-- After migrate: a copy of every claim batch as it is written, with the server's clock at
-- that moment, for the per-key order check across a change of the shard count
-- (ledger/key_order_violations.sql). The engine's own rows do not serve: the claim ring
-- prunes them during the run, and their claimed_at is the claim transaction's start. A
-- claim batch is written by the statement that drains the lane, after the claim has seen
-- what it may take; so a claim that may take a key's job only once the claim of the
-- key's previous job has committed writes its batch at a later clock time. A script, no
-- parameters; a trigger of the harness on the schema under test, nothing else.
SET client_min_messages = warning;
CREATE SCHEMA IF NOT EXISTS chaos;
CREATE TABLE chaos.claims (
    queue_id      integer     NOT NULL,
    priority      smallint    NOT NULL,
    enqueue_shard smallint    NOT NULL,
    first_seq     bigint      NOT NULL,
    last_seq      bigint      NOT NULL,
    written_at    timestamptz NOT NULL);
CREATE INDEX ON chaos.claims (queue_id, priority, enqueue_shard, first_seq);
CREATE FUNCTION chaos.record_claim() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos.claims VALUES (NEW.queue_id, NEW.priority, NEW.enqueue_shard,
                                     NEW.first_seq, NEW.last_seq, clock_timestamp());
    RETURN NULL;
END
$$;
CREATE TRIGGER chaos_record_claim AFTER INSERT ON awa.claim_batches
    FOR EACH ROW EXECUTE FUNCTION chaos.record_claim()
