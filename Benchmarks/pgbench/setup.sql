-- The tables of a store with one entity "Item" (id bigint key, name text), as PostgresStore
-- format 4 makes them (the row's checksum last, and its trigger), in the schema bench.
DROP SCHEMA IF EXISTS bench CASCADE;
CREATE SCHEMA bench;
CREATE TABLE bench._ds_meta (key text COLLATE "C" PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE bench._ds_feed (seq bigint PRIMARY KEY, entry bytea NOT NULL);
CREATE SEQUENCE bench._ds_feed_seq AS bigint;
CREATE TABLE bench._ds_gate ();
CREATE TABLE bench."Item" (id bigint NOT NULL, name text COLLATE "C" NOT NULL, "_ds_sum" bigint, PRIMARY KEY (id));
CREATE FUNCTION bench._ds_unsum() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN IF NEW::text IS DISTINCT FROM OLD::text THEN NEW."_ds_sum" := NULL; END IF; RETURN NEW; END$$;
CREATE TRIGGER "_ds_sum" BEFORE UPDATE ON bench."Item" FOR EACH ROW WHEN (NEW."_ds_sum" IS NOT DISTINCT FROM OLD."_ds_sum") EXECUTE FUNCTION bench._ds_unsum();
INSERT INTO bench._ds_meta VALUES ('datastore.feed', '\x02'::bytea);
CREATE SEQUENCE bench.ids;
