-- Every bucket of the store, one row per key. The primary key is the
-- B-tree that serves Get and the ordered prefix ranges of Scan; bytea
-- compares as bytes.
CREATE TABLE kv (
	bucket text COLLATE "C" NOT NULL,
	key    bytea NOT NULL,
	value  bytea NOT NULL,
	PRIMARY KEY (bucket, key)
);
