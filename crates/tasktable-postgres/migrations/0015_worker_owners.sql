-- Worker ids bound to tokens (docs/security.md): `owner` is the name of the token whose
-- pull worker first used the id; no other token may heartbeat, leave or claim as it.
-- NULL for in-process workers, for pull workers of a server without tokens, and for rows
-- written before version 15 (a pull worker's id goes to the first token that uses it).
-- tasktable_workers_owner counts a token's live workers against its cap.
ALTER TABLE tasktable_workers ADD COLUMN owner TEXT;
CREATE INDEX tasktable_workers_owner ON tasktable_workers (owner, gone_at);
