-- +goose Up
-- migrations/mysql/00013_kept_sessions.sql in SQLite's terms.
CREATE TABLE kept_sessions (
  name       TEXT NOT NULL PRIMARY KEY,
  value      TEXT NOT NULL,
  expires_at DATETIME NOT NULL
);

-- +goose Down
DROP TABLE kept_sessions;
