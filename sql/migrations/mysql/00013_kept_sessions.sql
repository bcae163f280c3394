-- +goose Up
-- Session records kept outside Redis where Redis does not outlive the
-- process (embedded mode): admin sessions and shoppers' sign-outs, put
-- back into Redis at start (package sessions, Restore).
CREATE TABLE kept_sessions (
  name       VARCHAR(200) NOT NULL PRIMARY KEY,
  value      VARCHAR(200) NOT NULL,
  expires_at DATETIME(3)  NOT NULL
);

-- +goose Down
DROP TABLE kept_sessions;
