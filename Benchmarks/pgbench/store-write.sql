-- What a one-insert writeSync sends (PostgresEngine.sendBegin, the insert, PostgresTransaction's
-- feed entry, which checks the feed's state the store assumed, COMMIT), in two round trips with
-- the store; here one statement at a time (-M prepared). The entry's bytes stand in for the
-- encoded change set, the number for the row's checksum. On a server whose synchronous_commit
-- is the store's durability's (the harness's: off, for .normal) the entry sets no durability.

BEGIN ISOLATION LEVEL SERIALIZABLE;
LOCK TABLE bench._ds_gate IN ACCESS SHARE MODE;
INSERT INTO bench."Item" (id, name, "_ds_sum") SELECT nextval('bench.ids'), 'item', 1234567 ON CONFLICT (id) DO NOTHING RETURNING 1;
WITH added AS (INSERT INTO bench._ds_feed (seq, entry) SELECT CASE WHEN y.same THEN nextval('bench._ds_feed_seq') END, '\x0100000000000000000100000004000000497465'::bytea FROM (SELECT pg_advisory_xact_lock_shared(42), x.same FROM (SELECT pg_current_xact_id() AS id, (SELECT value FROM bench._ds_meta WHERE key = 'datastore.feed') IS NOT DISTINCT FROM '\x02'::bytea AS same OFFSET 0) x WHERE x.id IS NOT NULL OFFSET 0) y RETURNING seq) SELECT seq, pg_notify('ds_bench', '') FROM added;
COMMIT;
