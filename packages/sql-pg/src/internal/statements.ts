import type { TransactionalStatements } from "@effect-idempotency/sql/SqlStoreKit"
import { isLockWaitEnded } from "@effect-idempotency/sql/SqlStoreKit"
import { type IdempotencyTable, quote } from "../PgIdempotencyTable.js"

/** @internal */
export const now = "COALESCE($1::bigint, floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint)"

/** @internal */
export const recordColumns = "status, token, fingerprint, attempt, lease_until, expires_at, outcome_kind, outcome"

const state = `CASE
  WHEN status = 'IN_PROGRESS' THEN CASE WHEN lease_until <= ${now} THEN 'stuck' ELSE 'running' END
  WHEN status = 'FAILED' THEN 'failed'
  WHEN outcome_kind = 'Timeout' THEN 'unknown'
  WHEN outcome_kind = 'Omitted' THEN 'omitted'
  ELSE 'completed'
END`

const adminIndexed = "(id) WHERE status IN ('IN_PROGRESS', 'FAILED') OR outcome_kind IN ('Timeout', 'Omitted')"

const owned = `id = $2::text AND token = $3::text AND status = 'IN_PROGRESS' AND expires_at > ${now}`

const RESERVE_ROUNDS = 5

// `$n` is argument n - 1 of `SqlStoreKit.Statements`
/** @internal */
export interface Statements {
  readonly reserve: string
  readonly complete: string
  readonly release: string
  readonly markFailed: string
  readonly extend: string
  readonly get: string
  readonly purgeExpired: string
  readonly list: string
  readonly read: string
  readonly unblock: string
  readonly stats: string
}

/** @internal */
export const make = (table: IdempotencyTable): Statements => {
  const t = table.qualified
  return {
    reserve: `SELECT * FROM ${table.reserveFunction}($1::bigint, $2::text, $3::text, $4::text, $5::text, $6::text,
  $7::text, $8::bigint, $9::bigint, $10::boolean)`,
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
    // the outer `expires_at` check: see the README's "The purge"
    purgeExpired: `WITH purged AS (
  DELETE FROM ${t}
  WHERE id IN (
    SELECT id FROM ${t} WHERE expires_at <= ${now} ORDER BY expires_at LIMIT $2::integer FOR UPDATE SKIP LOCKED
  ) AND expires_at <= ${now}
  RETURNING 1
)
SELECT count(*)::integer AS purged FROM purged`,
    // each state spelled out so that the plan implies `adminIndexed`: see the README's "Admin"
    list: `SELECT clock.now, page.id, ${recordColumns}
FROM (SELECT ${now} AS now) AS clock
LEFT JOIN LATERAL (
  SELECT id, ${recordColumns} FROM ${t}
  WHERE ($2::text IS NULL OR id > $2::text)
    AND ($3::text IS NULL OR starts_with(id, $3::text))
    AND expires_at > clock.now
    AND ($4::text IS NULL
      OR ($4::text = 'running' AND status = 'IN_PROGRESS' AND lease_until > clock.now)
      OR ($4::text = 'stuck' AND status = 'IN_PROGRESS' AND lease_until <= clock.now)
      OR ($4::text = 'failed' AND status = 'FAILED')
      OR ($4::text = 'unknown' AND status = 'COMPLETED' AND outcome_kind = 'Timeout')
      OR ($4::text = 'omitted' AND status = 'COMPLETED' AND outcome_kind = 'Omitted')
      OR ($4::text = 'completed' AND status = 'COMPLETED'
        AND (outcome_kind IS NULL OR outcome_kind NOT IN ('Timeout', 'Omitted'))))
    AND ($5::bigint IS NULL OR lease_until <= clock.now - $5::bigint)
  ORDER BY id
  LIMIT $6::integer
) AS page ON true
ORDER BY page.id`,
    read: `SELECT clock.now, ${recordColumns}
FROM (SELECT ${now} AS now) AS clock
LEFT JOIN ${t} ON id = $2::text AND expires_at > clock.now`,
    // the SELECT reads the statement's snapshot: the record the DELETE left, or waited for
    unblock: `WITH unblocked AS (
  DELETE FROM ${t}
  WHERE id = $2::text AND attempt = $3::integer AND expires_at > ${now}
    AND ${state} IN ('stuck', 'unknown', 'failed')
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM unblocked) AS unblocked, clock.now, ${recordColumns}
FROM (SELECT ${now} AS now) AS clock
LEFT JOIN ${t} ON id = $2::text AND expires_at > clock.now`,
    stats: `SELECT operation, ${state} AS state, count(*) AS count
FROM ${t}
WHERE expires_at > ${now}
GROUP BY 1, 2`
  }
}

const reserveParameterTypes = "bigint, text, text, text, text, text, text, bigint, bigint, boolean"

/** `IdempotencyRecord.canTakeOver` over the columns prefixed `r` (`"t."`, or `""` for the variables). */
const takeover = (r: string, indent: string) =>
  `(${r}fingerprint = p_fingerprint\n${indent}AND (${r}status = 'FAILED' OR ` +
  `(${r}status = 'IN_PROGRESS' AND p_takeover AND ${r}lease_until <= now)))`

const intoRecord = `t.${recordColumns.split(", ").join(", t.")}\n      INTO ${recordColumns}`

/** The reservation function: its rounds are described in the README's "Round trips and the reservation function". */
const createReserveFunction = (table: IdempotencyTable): string => {
  const t = table.qualified
  return `CREATE OR REPLACE FUNCTION ${table.reserveFunction}(
  p_now bigint, p_id text, p_operation text, p_scope text, p_key text, p_token text, p_fingerprint text,
  p_lease bigint, p_ttl bigint, p_takeover boolean,
  OUT reserved boolean, OUT status text, OUT token text, OUT fingerprint text, OUT attempt integer,
  OUT lease_until bigint, OUT expires_at bigint, OUT outcome_kind text, OUT outcome text, OUT now bigint
)
LANGUAGE plpgsql VOLATILE
AS $reserve$
BEGIN
  now := COALESCE(p_now, floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint);
  FOR round IN 1..${RESERVE_ROUNDS} LOOP
    INSERT INTO ${t} AS t (id, operation, scope, key, status, token, fingerprint, attempt, lease_until,
      expires_at, created_at, updated_at)
    VALUES (p_id, p_operation, p_scope, p_key, 'IN_PROGRESS', p_token, p_fingerprint, 1, now + p_lease,
      now + GREATEST(p_lease, p_ttl), now, now)
    ON CONFLICT (id) DO NOTHING
    RETURNING ${intoRecord};
    IF FOUND THEN
      reserved := true;
      RETURN;
    END IF;

    SELECT ${intoRecord}
    FROM ${t} AS t
    WHERE t.id = p_id;
    IF FOUND THEN
      IF expires_at > now AND NOT ${takeover("", "        ")} THEN
        reserved := false;
        RETURN;
      END IF;

      UPDATE ${t} AS t SET
        status = 'IN_PROGRESS',
        token = p_token,
        fingerprint = p_fingerprint,
        attempt = CASE WHEN t.expires_at <= now THEN 1 ELSE t.attempt + 1 END,
        lease_until = now + p_lease,
        expires_at = now + GREATEST(p_lease, p_ttl),
        outcome_kind = NULL,
        outcome = NULL,
        created_at = CASE WHEN t.expires_at <= now THEN now ELSE t.created_at END,
        updated_at = now
      WHERE t.id = p_id
        AND (t.expires_at <= now OR ${takeover("t.", "          ")})
      RETURNING ${intoRecord};
      IF FOUND THEN
        reserved := true;
        RETURN;
      END IF;
    END IF;
    -- a concurrent write changed or deleted the record since this round read it: the next round sees it
  END LOOP;
  RAISE EXCEPTION 'the reservation did not settle: the record changed during each of ${RESERVE_ROUNDS} rounds';
END
$reserve$`
}

/** @internal */
export const migration = (table: IdempotencyTable): ReadonlyArray<string> => [
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
  `CREATE INDEX IF NOT EXISTS ${table.expiresAtIndex} ON ${table.qualified} (expires_at)`,
  `DO $admin_index$
BEGIN
  IF NOT EXISTS (SELECT FROM ${table.qualified}) THEN
    CREATE INDEX IF NOT EXISTS ${table.adminIndex} ON ${table.qualified} ${adminIndexed};
  END IF;
END
$admin_index$`,
  createReserveFunction(table),
  `COMMENT ON FUNCTION ${table.reserveFunction}(${reserveParameterTypes}) IS ` +
  `'Reserves an idempotency record of ${table.qualified} (@effect-idempotency/sql-pg)'`
]

/** @internal */
export interface AdminIndexStatements {
  readonly name: string
  readonly create: string
  readonly valid: string
  readonly rebuild: string
}

/** @internal */
export const adminIndex = (table: IdempotencyTable): AdminIndexStatements => {
  const name = table.schema === undefined ? table.adminIndex : `${quote(table.schema)}.${table.adminIndex}`
  return {
    name,
    create: `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${table.adminIndex} ON ${table.qualified} ${adminIndexed}`,
    valid: `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1::text)`,
    rebuild: `REINDEX INDEX CONCURRENTLY ${name}`
  }
}

/** @internal */
export const transactional = (table: IdempotencyTable): TransactionalStatements => {
  const statements = make(table)
  // lock_timeout ($8) is set in the reservation's statement, first: the function's arguments depend on its row
  const reserve = {
    _tag: "Row",
    statement: {
      text: `SELECT r.* FROM (SELECT set_config('lock_timeout', $8::bigint::text, true) AS lock_timeout) AS bound
CROSS JOIN LATERAL ${table.reserveFunction}($1::bigint, $2::text, $3::text, $4::text, $5::text, $6::text,
  $7::text, $8::bigint + 0 * length(bound.lock_timeout), $9::bigint, $10::boolean) AS r`
    }
  } as const
  return {
    reserve: () => reserve,
    complete: { text: statements.complete },
    markFailed: { text: statements.markFailed },
    read: { text: statements.read },
    isLockWaitEnded: isLockWaitEnded.pg
  }
}
