-- Every claim writes a random credential that only its claimer learns; every fenced write
-- must present it beside the token (32 hex digits, compared byte for byte). Tasks running
-- when this is applied keep a NULL credential: the writes of the workers that claimed
-- them, and the rescuer's, match it null-safely (<=>), and their next claim gets one.
-- IF NOT EXISTS (MariaDB; dropped for MySQL) lets a migrator that died after this DDL,
-- which commits at once, run it again.
ALTER TABLE tasktable_tasks
    ADD COLUMN IF NOT EXISTS lease_credential CHAR(32) CHARACTER SET ascii COLLATE ascii_bin NULL;
