-- store-write.sql's statements in one pipeline (one round trip), as the store sends a one-insert
-- writeSync whose insert goes without waiting (a block's first run); see store-write.sql.
\startpipeline
BEGIN ISOLATION LEVEL SERIALIZABLE;
LOCK TABLE bench._ds_gate IN ACCESS SHARE MODE;
INSERT INTO bench."Item" (id, name, "_ds_sum") SELECT nextval('bench.ids'), 'item', 1234567 ON CONFLICT (id) DO NOTHING RETURNING 1;
WITH added AS (INSERT INTO bench._ds_feed (seq, entry) SELECT CASE WHEN y.same THEN nextval('bench._ds_feed_seq') END, '\x0100000000000000000100000004000000497465'::bytea FROM (SELECT pg_advisory_xact_lock_shared(42), x.same FROM (SELECT pg_current_xact_id() AS id, (SELECT value FROM bench._ds_meta WHERE key = 'datastore.feed') IS NOT DISTINCT FROM '\x02'::bytea AS same OFFSET 0) x WHERE x.id IS NOT NULL OFFSET 0) y RETURNING seq) SELECT seq, pg_notify('ds_bench', '') FROM added;
COMMIT;
\endpipeline
-- The feed's trim, after one commit in 256 as the store's (retention 10,000 entries, the default),
-- on the same connection: a probe of the feed in one
-- round trip (the highest number taken, the writers' lock holders, a
-- snapshot), then the trim (PostgresFeedSQL.trim). Without it the feed grows by a row a commit
-- and nothing is ever deleted, which the store does not do: its trim deletes as many entries as
-- its commits add. Two differences from the store: pgbench trims after a random one transaction
-- in 256 (the store after the entry whose number is a multiple of 256; `\gset`, which could read
-- that number, is not allowed in a pipeline), so two clients' trims may coincide and wait on each
-- other; and the highest number taken stands in for the store's highest number known final (its
-- probe's watermark), so an entry that took a number and commits after the trim is not in the
-- count the trim keeps, which lets the feed hold a few entries more than 10,000 over a run.
\set trim random(1, 256)
\if :trim = 1
\startpipeline
SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM bench._ds_feed_seq;
SELECT coalesce(string_agg(x.transactionid::text, ','), '') FROM pg_locks l JOIN pg_locks x ON x.virtualtransaction = l.virtualtransaction AND x.locktype = 'transactionid' AND x.granted WHERE l.locktype = 'advisory' AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND l.classid::int8 = 0 AND l.objid::int8 = 42 AND l.objsubid = 1;
SELECT pg_current_snapshot()::text;
\endpipeline
WITH a AS (SELECT split_part(v, ' ', 1)::int8 AS c, split_part(v, ' ', 2)::int8 AS t, split_part(v, ' ', 3)::int8 AS k FROM (SELECT encode(value, 'escape') AS v FROM bench._ds_meta WHERE key = 'datastore.feed-count') x WHERE x.v ~ '^[0-9]{1,18} [0-9]{1,18} [0-9]{1,18}$'), v AS (SELECT a.c, a.t, a.k + (SELECT count(*) FROM bench._ds_feed WHERE seq > a.t AND seq <= (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM bench._ds_feed_seq)) AS n FROM a WHERE EXISTS (SELECT 1 FROM bench._ds_feed WHERE seq = a.c)), cut AS (SELECT CASE WHEN EXISTS (SELECT 1 FROM v) THEN (SELECT (SELECT seq FROM bench._ds_feed WHERE seq >= v.c ORDER BY seq OFFSET v.n - 10000 LIMIT 1) FROM v WHERE v.n > 10000) ELSE (SELECT seq FROM bench._ds_feed WHERE seq <= (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM bench._ds_feed_seq) ORDER BY seq DESC OFFSET 10000 - 1 LIMIT 1) END AS c, greatest((SELECT t FROM v), (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM bench._ds_feed_seq)) AS t), gone AS (DELETE FROM bench._ds_feed WHERE seq >= coalesce((SELECT c FROM v), -9223372036854775808) AND seq < (SELECT c FROM cut) RETURNING 1), stored AS (INSERT INTO bench._ds_meta (key, value) SELECT 'datastore.feed-count', convert_to(c::text || ' ' || t::text || ' ' || 10000::text, 'UTF8') FROM cut WHERE c IS NOT NULL ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value RETURNING 1) INSERT INTO bench._ds_meta (key, value) SELECT 'datastore.feed-floor', int8send(c) FROM cut WHERE c IS NOT NULL ON CONFLICT (key) DO UPDATE SET value = greatest(bench._ds_meta.value, EXCLUDED.value);
\endif
