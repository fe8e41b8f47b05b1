-- Binds, in order: queue, paused, paused. MySQL's upsert is ON DUPLICATE KEY UPDATE; the new
-- value is bound twice rather than read with VALUES(), which MySQL 8.0.20 deprecated and
-- MariaDB has no replacement for.
INSERT INTO tasktable_queues (name, paused, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE paused = ?, updated_at = UTC_TIMESTAMP(6)
