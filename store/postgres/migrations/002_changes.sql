-- The change log of sync, moved out of kv (buckets sync.log and
-- sync.log.new) into a table of its own, so that a write appends its entry
-- without reading the tenant's last one (see changes.go). An entry's seq
-- is its transaction's id shifted left by 20 bits plus its place in the
-- transaction; the entries moved keep the seq they had, all below the seqs
-- of new entries.
CREATE TABLE crux_changes (
	tenant bytea  NOT NULL,
	seq    bigint NOT NULL,
	entry  bytea  NOT NULL,
	PRIMARY KEY (tenant, seq)
);

-- The number of entries of each tenant's log, in up to 64 rows a tenant
-- (one per server process id modulo 64), so that concurrent commits
-- seldom update the same row.
CREATE TABLE crux_change_counts (
	tenant bytea   NOT NULL,
	shard  integer NOT NULL,
	n      bigint  NOT NULL,
	PRIMARY KEY (tenant, shard)
);

-- A key of the log buckets is tenant, NUL, seq (8 bytes big-endian).
INSERT INTO crux_changes (tenant, seq, entry)
SELECT substring(key FROM 1 FOR length(key) - 9),
	('x' || encode(substring(key FROM length(key) - 7), 'hex'))::bit(64)::bigint,
	value
FROM kv
WHERE bucket IN ('sync.log', 'sync.log.new') AND length(key) >= 9 AND get_byte(key, length(key) - 9) = 0
ON CONFLICT DO NOTHING;

DO $$
BEGIN
	IF (SELECT max(seq) FROM crux_changes) >= (pg_current_xact_id()::text::bigint << 20) THEN
		RAISE EXCEPTION 'crux: the change log holds seqs too high to move (above %): report this to crux''s maintainers',
			pg_current_xact_id()::text::bigint << 20;
	END IF;
END $$;

INSERT INTO crux_change_counts (tenant, shard, n)
SELECT tenant, 0, count(*) FROM crux_changes GROUP BY tenant;

DELETE FROM kv
WHERE bucket IN ('sync.log', 'sync.log.new') AND length(key) >= 9 AND get_byte(key, length(key) - 9) = 0;

-- A crux that predates this migration would write the log in kv again,
-- where no reader looks: its writes fail instead, with a message saying why.
CREATE FUNCTION crux_kv_log_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'crux: this database keeps the change log in table crux_changes (migration 2), but this server wrote it in kv (bucket %): upgrade its crux', NEW.bucket;
END $$;

CREATE TRIGGER crux_kv_log_moved BEFORE INSERT OR UPDATE ON kv FOR EACH ROW
	WHEN (NEW.bucket IN ('sync.log', 'sync.log.new')) EXECUTE FUNCTION crux_kv_log_moved();
