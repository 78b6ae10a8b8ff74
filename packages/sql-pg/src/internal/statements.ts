import type { TransactionalStatements } from "@effect-idempotency/sql/SqlStoreKit"
import { isLockWaitEnded } from "@effect-idempotency/sql/SqlStoreKit"
import { type IdempotencyTable, quote } from "../PgIdempotencyTable.js"

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
 * The state of a record at `now`, as `IdempotencyAdmin.stateOf` decides it, over the record's
 * columns: `running`, `stuck`, `failed`, `unknown` (a Timeout outcome), `omitted`, `completed`.
 */
const state = `CASE
  WHEN status = 'IN_PROGRESS' THEN CASE WHEN lease_until <= ${now} THEN 'stuck' ELSE 'running' END
  WHEN status = 'FAILED' THEN 'failed'
  WHEN outcome_kind = 'Timeout' THEN 'unknown'
  WHEN outcome_kind = 'Omitted' THEN 'omitted'
  ELSE 'completed'
END`

/**
 * The admin index: the ids (the order `list` pages in) of the records a listing by state looks for,
 * the few among many. `list` spells out each state as plain conditions that imply this predicate,
 * which PostgreSQL proves when it plans the statement with its parameters known (an unnamed
 * statement, as the store sends it): `running` and `stuck` by their status, IN_PROGRESS; `failed`
 * by FAILED; `unknown` and `omitted` by their outcome's kind. `completed` is most of a table: it,
 * and a listing of every state, walk the primary key.
 */
const adminIndexed = "(id) WHERE status IN ('IN_PROGRESS', 'FAILED') OR outcome_kind IN ('Timeout', 'Omitted')"

/** Token-checked writes: `$2` id, `$3` token; the record must be live and IN_PROGRESS. */
const owned = `id = $2::text AND token = $3::text AND status = 'IN_PROGRESS' AND expires_at > ${now}`

/**
 * How many rounds the reservation function runs before it gives up. A round ends without an
 * answer only when a concurrent write changed the record between the round's read and its write,
 * or deleted it between the round's insert and its read; the next round sees that write.
 */
const RESERVE_ROUNDS = 5

/**
 * The statements of a store over one table. Each is one round trip.
 *
 * @internal
 */
export interface Statements {
  /**
   * A call of the reservation function (`reserveFunction`). `$1` now, `$2` id, `$3` operation,
   * `$4` scope, `$5` key, `$6` token, `$7` fingerprint, `$8` lease ms, `$9` ttl ms, `$10` takeover.
   * Returns one row: `reserved`, the record's columns after the call, and `now`.
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
  /**
   * A page of live records in the order of their ids. `$1` now, `$2` the cursor (the last id of
   * the previous page) or NULL, `$3` the prefix of an operation's ids (`<encoded operation>#`) or
   * NULL, `$4` a state or NULL, `$5` the least time since the lease ended, in ms, or NULL, `$6` the
   * limit. One row per record, or one row of NULLs but `now` when there is none.
   */
  readonly list: string
  /** `$1` now, `$2` id. One row: `now` and the live record's columns, NULL when there is none. */
  readonly read: string
  /**
   * `$1` now, `$2` id, `$3` attempt. One row: `unblocked`, `now`, and the live record's columns as
   * they were when the statement started (NULL when there was none).
   */
  readonly unblock: string
  /** `$1` now. One row per operation and state of the live records: `operation`, `state`, `count`. */
  readonly stats: string
  /**
   * For the transactional mode: how long any statement of the current transaction may wait for a
   * lock (the reservation's wait for a concurrent attempt's row among them). `$1` milliseconds, at
   * least 1 (0 would mean no limit).
   */
  readonly lockTimeout: string
}

/**
 * Builds the statements for a table.
 *
 * @internal
 */
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
    // The outer `expires_at` check runs again on the newest row version: a record that a
    // concurrent reservation just overwrote (live again) is never deleted.
    purgeExpired: `WITH purged AS (
  DELETE FROM ${t}
  WHERE id IN (
    SELECT id FROM ${t} WHERE expires_at <= ${now} ORDER BY expires_at LIMIT $2::integer FOR UPDATE SKIP LOCKED
  ) AND expires_at <= ${now}
  RETURNING 1
)
SELECT count(*)::integer AS purged FROM purged`,
    // `starts_with` becomes a range of the primary key when the id's collation is C; with another
    // collation it filters the ids walked from the cursor on. The state is `state` spelled out one
    // state at a time: the plan (custom, the parameters known) keeps only the state asked for, as
    // plain conditions on status, lease_until and outcome_kind, which imply `adminIndexed` for every
    // state but `completed`.
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
    // One conditional DELETE: the states of `IdempotencyAdmin.unblockable`, at the attempt the
    // operator saw. The SELECT reads the statement's snapshot, so it shows the record the DELETE
    // left (or one a concurrent write changed while the DELETE waited for it: see `unblock`).
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
GROUP BY 1, 2`,
    lockTimeout: `SELECT set_config('lock_timeout', $1::text, true)`
  }
}

/** The parameter types of the reservation function, in order (its signature). */
const reserveParameterTypes = "bigint, text, text, text, text, text, text, bigint, bigint, boolean"

/**
 * The takeover rule of `IdempotencyRecord.canTakeOver`, over the record's columns with the prefix
 * `r` (`"t."` for the table's row, `""` for the function's variables): the same fingerprint, and a
 * FAILED record or an IN_PROGRESS record whose lease ended (when the request allows takeover).
 */
const takeover = (r: string, indent: string) =>
  `(${r}fingerprint = p_fingerprint\n${indent}AND (${r}status = 'FAILED' OR ` +
  `(${r}status = 'IN_PROGRESS' AND p_takeover AND ${r}lease_until <= now)))`

/** The record's columns of the row `t`, read into the function's output variables of the same names. */
const intoRecord = `t.${recordColumns.split(", ").join(", t.")}\n      INTO ${recordColumns}`

/**
 * The reservation function. It runs in the caller's transaction (or its own statement) and
 * answers with one row: `reserved` true when this call reserved the record, false when it returns
 * an existing record the caller may not take over; the record's columns after the call; and `now`,
 * the instant every decision of the call used (`p_now`, or the database's clock when NULL).
 *
 * Each round:
 *
 * 1. INSERT the record, `ON CONFLICT (id) DO NOTHING`: a new key is reserved at attempt 1. A
 *    concurrent uncommitted insert of the same id makes it wait for that transaction's end.
 * 2. SELECT the record. The function is VOLATILE: under READ COMMITTED each statement takes a new
 *    snapshot, so this read sees whatever committed while step 1 waited. A live record that the
 *    takeover rule does not give to this request is returned as it is: no row lock, no write.
 * 3. An expired record (overwritten as if absent, attempt 1) or one the takeover rule allows
 *    (attempt + 1) is UPDATEd with the same condition in its WHERE. An UPDATE that waits for a
 *    concurrent writer of the row evaluates its WHERE again on the newest row version, so of
 *    concurrent takeovers exactly one succeeds.
 *
 * A round without an answer (the UPDATE lost to a concurrent write, or the record vanished between
 * steps 1 and 2) is followed by the next, which sees that write. After `RESERVE_ROUNDS` rounds the
 * function raises an exception.
 *
 * PL/pgSQL prepares the plan of each statement once per session and keeps it, so a reservation
 * plans only the small `SELECT * FROM fn(...)` that calls it.
 */
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

/**
 * The migration: the table, its expiry index, its admin index when it has no records yet, and the
 * reservation function. On a table with records, a plain `CREATE INDEX` would block its writes for
 * as long as the index builds: `adminIndex` builds it there, CONCURRENTLY.
 *
 * @internal
 */
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

/**
 * The admin index of a table that has records, built without blocking its writes. Each statement
 * runs on its own, outside any transaction (`CONCURRENTLY` cannot run in one).
 *
 * @internal
 */
export interface AdminIndexStatements {
  /** The index's quoted name, schema-qualified when the table is: `$1` of `valid`. */
  readonly name: string
  /** Builds the index unless one of its name exists (valid or not). */
  readonly create: string
  /** `$1` the index's name. One row, `valid`, when the index exists; none when it does not. */
  readonly valid: string
  /**
   * Builds the index again: for an index that a failed or cancelled build left invalid (unused by
   * the planner, and skipped by `IF NOT EXISTS`). It waits for a build still running to end.
   */
  readonly rebuild: string
}

/**
 * The statements of `PgIdempotencyMigration.adminIndex`.
 *
 * @internal
 */
export const adminIndex = (table: IdempotencyTable): AdminIndexStatements => {
  // an index lives in its table's schema; without one, both are found through the search_path
  const name = table.schema === undefined ? table.adminIndex : `${quote(table.schema)}.${table.adminIndex}`
  return {
    name,
    create: `CREATE INDEX CONCURRENTLY IF NOT EXISTS ${table.adminIndex} ON ${table.qualified} ${adminIndexed}`,
    valid: `SELECT indisvalid AS valid FROM pg_index WHERE indexrelid = to_regclass($1::text)`,
    rebuild: `REINDEX INDEX CONCURRENTLY ${name}`
  }
}

/**
 * The statements of the transactional mode (`PgTransactional`): `lock_timeout` bounds the
 * reservation's wait for a concurrent attempt's row, then the store's own statements.
 *
 * @internal
 */
export const transactional = (table: IdempotencyTable): TransactionalStatements => {
  const statements = make(table)
  const reserve = { _tag: "Row", statement: { text: statements.reserve } } as const
  return {
    lockTimeout: { text: statements.lockTimeout },
    reserve: () => reserve,
    complete: { text: statements.complete },
    markFailed: { text: statements.markFailed },
    read: { text: statements.read },
    isLockWaitEnded: isLockWaitEnded.pg
  }
}
