-- What a one-insert writeSync sends (PostgresEngine.sendBegin, the insert, PostgresTransaction's
-- feed entry, COMMIT), in two round trips with the store; here one statement at a time
-- (-M prepared). The entry's bytes stand in for the encoded change set, the number for the row's
-- checksum.

BEGIN ISOLATION LEVEL SERIALIZABLE;
LOCK TABLE bench._ds_gate IN ACCESS SHARE MODE;
SELECT (SELECT value FROM bench._ds_meta WHERE key = 'datastore.feed');
INSERT INTO bench."Item" (id, name, "_ds_sum") SELECT nextval('bench.ids'), 'item', 1234567 ON CONFLICT (id) DO NOTHING RETURNING 1;
WITH added AS (INSERT INTO bench._ds_feed (seq, entry) SELECT nextval('bench._ds_feed_seq'), '\x0100000000000000000100000004000000497465'::bytea FROM (SELECT pg_advisory_xact_lock_shared(42) FROM (SELECT pg_current_xact_id() AS id OFFSET 0) x WHERE x.id IS NOT NULL OFFSET 0) y RETURNING seq) SELECT seq, pg_notify('ds_bench', '') FROM added;
COMMIT;
