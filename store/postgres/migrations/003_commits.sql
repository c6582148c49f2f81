-- A token of each transaction that writes, inserted with its COMMIT, so
-- that a server that lost its connection while the COMMIT was on its way
-- can learn whether it took effect (see reconnect.go). Tokens are random
-- and kept ten minutes (twice the reconnect timeout if that is longer).
CREATE TABLE crux_commits (
	token bytea       PRIMARY KEY,
	at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX crux_commits_at ON crux_commits (at);
