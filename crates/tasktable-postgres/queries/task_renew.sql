-- Extends a batch of leases in one statement. $1 ids, $2 tokens, $3 now (NULL: now()),
-- $4 lease in µs, $5 credentials. Never extends past the attempt's deadline (least()
-- ignores a NULL one).
WITH input AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $5::text[]) AS i(id, token, credential)
)
UPDATE tasktable_tasks t SET
    lease_expires_at = least(coalesce($3::timestamptz, now()) + $4 * interval '1 microsecond', t.deadline_at)
FROM input
-- The fence (rules.rs): the row still runs under the input's token and credential.
WHERE t.id = input.id AND {fence}
RETURNING t.id, t.lease_token, t.lease_credential, t.lease_expires_at
