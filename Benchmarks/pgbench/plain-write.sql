-- The same insert as a plain client sends it: BEGIN; INSERT; COMMIT.
BEGIN;
INSERT INTO bench."Item" (id, name) SELECT nextval('bench.ids'), 'item';
COMMIT;
