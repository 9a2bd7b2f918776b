-- store-write.sql's statements in one pipeline (one round trip), as the store sends a one-insert
-- writeSync whose insert goes without waiting (a block's first run); see store-write.sql.
\startpipeline
BEGIN ISOLATION LEVEL SERIALIZABLE;
LOCK TABLE bench._ds_gate IN ACCESS SHARE MODE;
INSERT INTO bench."Item" (id, name, "_ds_sum") SELECT nextval('bench.ids'), 'item', 1234567 ON CONFLICT (id) DO NOTHING RETURNING 1;
WITH added AS (INSERT INTO bench._ds_feed (seq, entry) SELECT CASE WHEN y.same THEN nextval('bench._ds_feed_seq') END, '\x0100000000000000000100000004000000497465'::bytea FROM (SELECT pg_advisory_xact_lock_shared(42), x.same FROM (SELECT pg_current_xact_id() AS id, (SELECT value FROM bench._ds_meta WHERE key = 'datastore.feed') IS NOT DISTINCT FROM '\x02'::bytea AS same OFFSET 0) x WHERE x.id IS NOT NULL OFFSET 0) y RETURNING seq) SELECT seq, pg_notify('ds_bench', '') FROM added;
COMMIT;
\endpipeline
