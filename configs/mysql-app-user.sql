-- The application's MySQL user: the ledger's rows, and only SELECT and
-- INSERT on the audit log and the transfers (orders.AppGrants; a test
-- keeps this file equal to it). Migrations run as root: `seckill migrate`.
CREATE USER IF NOT EXISTS 'seckill'@'%' IDENTIFIED BY 'seckill';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`sales` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`orders` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`stock_movements` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`accounts` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`account_tokens` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`passkeys` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`merchants` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`topups` TO 'seckill'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE ON `seckill`.`payouts` TO 'seckill'@'%';
GRANT SELECT, CREATE ON `seckill`.`goose_db_version` TO 'seckill'@'%';
GRANT SELECT, INSERT, CREATE ON `seckill`.`audit_log` TO 'seckill'@'%';
GRANT SELECT, INSERT, CREATE ON `seckill`.`transfers` TO 'seckill'@'%';
