-- Every claim writes a random credential that only its claimer learns; every fenced write
-- must present it beside the token. Tasks running when this is applied keep a NULL
-- credential: the writes of the workers that claimed them, and the rescuer's, match it
-- null-safely, and their next claim gets one.
ALTER TABLE tasktable_tasks ADD COLUMN lease_credential TEXT;
