import type { IdempotencyTable } from "../PgIdempotencyTable.js"

/**
 * The clock of every statement. `$1` is the caller's clock in epoch milliseconds, or NULL for the
 * database's clock. `statement_timestamp()` is fixed for the whole statement, so every occurrence
 * of `now` in one statement reads the same instant.
 *
 * @internal
 */
export const now = "COALESCE($1::bigint, floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint)"

/** @internal */
export const recordColumns = "status, token, fingerprint, attempt, lease_until, expires_at, outcome_kind, outcome"

/**
 * The takeover rule of `IdempotencyRecord.canTakeOver` over the row alias `r`: the same
 * fingerprint, and a FAILED record or an IN_PROGRESS record whose lease ended (when the request
 * allows takeover). Reserve parameters: `$7` fingerprint, `$10` takeover.
 */
const takeover = (r: string) =>
  `(${r}.fingerprint = $7::text AND (${r}.status = 'FAILED' OR ` +
  `(${r}.status = 'IN_PROGRESS' AND $10::boolean AND ${r}.lease_until <= ${now})))`

/** Token-checked writes: `$2` id, `$3` token; the record must be live and IN_PROGRESS. */
const owned = `id = $2::text AND token = $3::text AND status = 'IN_PROGRESS' AND expires_at > ${now}`

/**
 * The statements of a store over one table. Each is one round trip.
 *
 * @internal
 */
export interface Statements {
  /**
   * `$1` now, `$2` id, `$3` operation, `$4` scope, `$5` key, `$6` token, `$7` fingerprint,
   * `$8` lease ms, `$9` ttl ms, `$10` takeover. Returns one row (`reserved` true or false), or no
   * row when a concurrent write committed between the statement's snapshot and its row lock: the
   * caller runs it again.
   */
  readonly reserve: string
  /** `$1` now, `$2` id, `$3` token, `$4` outcome kind, `$5` outcome body, `$6` ttl ms. */
  readonly complete: string
  /** `$1` now, `$2` id, `$3` token. */
  readonly release: string
  /** `$1` now, `$2` id, `$3` token, `$4` ttl ms. */
  readonly markFailed: string
  /** `$1` now, `$2` id, `$3` token, `$4` lease ms. */
  readonly extend: string
  /** `$1` now, `$2` id. */
  readonly get: string
  /** `$1` now, `$2` limit. */
  readonly purgeExpired: string
}

/**
 * Builds the statements for a table.
 *
 * The reservation reads the row first and writes only to reserve:
 *
 * - `existing`: the row as the statement's snapshot sees it.
 * - `taken`: an UPDATE of an expired record (overwritten as if absent, attempt 1) or of a record the
 *   takeover rule allows (attempt + 1). Under READ COMMITTED an UPDATE that waits for a concurrent
 *   writer re-evaluates its WHERE on the newest row version, so two takeovers never both succeed.
 * - `created`: an INSERT when the snapshot holds no row; `ON CONFLICT DO NOTHING` loses quietly to
 *   a concurrent insert.
 * - otherwise the snapshot row is returned as the existing record, unless it is expired or could
 *   be taken over: then the UPDATE lost to a concurrent writer, the snapshot row is stale, and the
 *   statement returns no row (as when the INSERT lost), for the caller to run it again with a new
 *   snapshot.
 *
 * Duplicates (replays, conflicts) take no row lock and write nothing.
 *
 * @internal
 */
export const make = (table: IdempotencyTable): Statements => {
  const t = table.qualified
  const reserve = `WITH existing AS (
  SELECT ${recordColumns} FROM ${t} WHERE id = $2::text
),
taken AS (
  UPDATE ${t} AS r SET
    status = 'IN_PROGRESS',
    token = $6::text,
    fingerprint = $7::text,
    attempt = CASE WHEN r.expires_at <= ${now} THEN 1 ELSE r.attempt + 1 END,
    lease_until = ${now} + $8::bigint,
    expires_at = ${now} + GREATEST($8::bigint, $9::bigint),
    outcome_kind = NULL,
    outcome = NULL,
    created_at = CASE WHEN r.expires_at <= ${now} THEN ${now} ELSE r.created_at END,
    updated_at = ${now}
  WHERE r.id = $2::text AND (r.expires_at <= ${now} OR ${takeover("r")})
  RETURNING r.attempt, r.lease_until, r.expires_at
),
created AS (
  INSERT INTO ${t} (id, operation, scope, key, status, token, fingerprint, attempt, lease_until, expires_at,
    created_at, updated_at)
  SELECT $2::text, $3::text, $4::text, $5::text, 'IN_PROGRESS', $6::text, $7::text, 1, ${now} + $8::bigint,
    ${now} + GREATEST($8::bigint, $9::bigint), ${now}, ${now}
  WHERE NOT EXISTS (SELECT 1 FROM existing)
  ON CONFLICT (id) DO NOTHING
  RETURNING attempt, lease_until, expires_at
)
SELECT true AS reserved, NULL::text AS status, NULL::text AS token, NULL::text AS fingerprint, attempt, lease_until,
  expires_at, NULL::text AS outcome_kind, NULL::text AS outcome, ${now} AS now
FROM taken
UNION ALL
SELECT true, NULL, NULL, NULL, attempt, lease_until, expires_at, NULL, NULL, ${now}
FROM created
UNION ALL
SELECT false, e.status, e.token, e.fingerprint, e.attempt, e.lease_until, e.expires_at, e.outcome_kind, e.outcome,
  ${now}
FROM existing AS e
WHERE NOT EXISTS (SELECT 1 FROM taken) AND e.expires_at > ${now} AND NOT ${takeover("e")}`

  return {
    reserve,
    complete: `UPDATE ${t} SET status = 'COMPLETED', outcome_kind = $4::text, outcome = $5::text,
  expires_at = ${now} + $6::bigint, updated_at = ${now}
WHERE ${owned}
RETURNING 1 AS owned`,
    release: `DELETE FROM ${t} WHERE ${owned} RETURNING 1 AS owned`,
    markFailed: `UPDATE ${t} SET status = 'FAILED', expires_at = ${now} + $4::bigint, updated_at = ${now}
WHERE ${owned}
RETURNING 1 AS owned`,
    extend: `UPDATE ${t} SET lease_until = ${now} + $4::bigint,
  expires_at = GREATEST(expires_at, ${now} + $4::bigint), updated_at = ${now}
WHERE ${owned}
RETURNING 1 AS owned`,
    get: `SELECT ${recordColumns} FROM ${t} WHERE id = $2::text AND expires_at > ${now}`,
    // The outer `expires_at` check runs again on the newest row version: a record that a
    // concurrent reservation just overwrote (live again) is never deleted.
    purgeExpired: `WITH purged AS (
  DELETE FROM ${t}
  WHERE id IN (
    SELECT id FROM ${t} WHERE expires_at <= ${now} ORDER BY expires_at LIMIT $2::integer FOR UPDATE SKIP LOCKED
  ) AND expires_at <= ${now}
  RETURNING 1
)
SELECT count(*)::integer AS purged FROM purged`
  }
}

/**
 * The migration: the table and its expiry index.
 *
 * @internal
 */
export const createTable = (table: IdempotencyTable): ReadonlyArray<string> => [
  `CREATE TABLE IF NOT EXISTS ${table.qualified} (
  id text PRIMARY KEY,
  operation text NOT NULL,
  scope text,
  key text NOT NULL,
  status text NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED', 'FAILED')),
  token text NOT NULL,
  fingerprint text NOT NULL,
  attempt integer NOT NULL CHECK (attempt >= 1),
  lease_until bigint NOT NULL,
  expires_at bigint NOT NULL,
  outcome_kind text CHECK (outcome_kind IN ('Success', 'Failure', 'Timeout', 'Omitted')),
  outcome text,
  created_at bigint NOT NULL,
  updated_at bigint NOT NULL
)`,
  `CREATE INDEX IF NOT EXISTS ${table.expiresAtIndex} ON ${table.qualified} (expires_at)`
]
