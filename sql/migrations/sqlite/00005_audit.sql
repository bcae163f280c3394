-- +goose Up
-- migrations/mysql/00005_audit.sql in SQLite's terms; triggers refuse any
-- change to a row.
CREATE TABLE audit_log (
  id          INTEGER PRIMARY KEY AUTOINCREMENT,
  at          DATETIME NOT NULL,
  actor       TEXT NOT NULL CHECK (length(actor) <= 254),
  role        TEXT NOT NULL CHECK (length(role) <= 16),
  action      TEXT NOT NULL CHECK (length(action) <= 32),
  sale_id     INTEGER NULL,
  owner       INTEGER NOT NULL DEFAULT 0,
  before_json TEXT NULL,
  after_json  TEXT NULL,
  ip          TEXT NOT NULL CHECK (length(ip) <= 64)
);
CREATE INDEX audit_sale ON audit_log (sale_id, id);
CREATE INDEX audit_actor ON audit_log (actor, id);
CREATE INDEX audit_owner ON audit_log (owner, id);
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER audit_log_no_delete;
DROP TRIGGER audit_log_no_update;
DROP TABLE audit_log;
