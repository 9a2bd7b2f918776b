-- The tables of a store with one entity "Item" (id bigint key, name text), as PostgresStore
-- format 2 makes them, in the schema bench.
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
CREATE TABLE bench._ds_meta (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE bench._ds_feed (seq bigint PRIMARY KEY, entry bytea NOT NULL);
CREATE SEQUENCE bench._ds_feed_seq AS bigint;
CREATE TABLE bench._ds_gate ();
CREATE TABLE bench."Item" (id bigint NOT NULL, name text COLLATE "C" NOT NULL, PRIMARY KEY (id));
INSERT INTO bench._ds_meta VALUES ('datastore.feed', '\x02'::bytea);
CREATE SEQUENCE bench.ids;
