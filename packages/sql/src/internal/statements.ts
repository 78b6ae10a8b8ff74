import type { Statements, TransactionalStatements } from "../SqlStoreKit.js"
import type { Fragment } from "./fragment.js"
import { arg, fragment, statement } from "./fragment.js"
import { isLockWaitEnded } from "./transactional.js"

/** Public as `SqlIdempotencyMigration.Dialect`. */
export type Dialect = "mariadb" | "sqlite"

interface Syntax {
  readonly quote: (identifier: string) => string
  readonly clock: string
  readonly clockArgument: Fragment
  readonly greatest: string
  readonly startsWith: (index: number) => Fragment
}

const syntax: Record<Dialect, Syntax> = {
  // NOW() and UTC_TIMESTAMP() are the statement's start, whatever the session's time zone
  mariadb: {
    quote: (identifier) => `\`${identifier.replaceAll("`", "``")}\``,
    clock: "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000)",
    clockArgument: fragment`CAST(${arg(0)} AS SIGNED)`,
    greatest: "GREATEST",
    startsWith: (index) => fragment`LEFT(id, CHAR_LENGTH(${arg(index)})) = ${arg(index)}`
  },
  // rounded: the day fraction's floating-point error cannot take a millisecond off
  sqlite: {
    quote: (identifier) => `"${identifier.replaceAll("\"", "\"\"")}"`,
    clock: "CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)",
    clockArgument: fragment`CAST(${arg(0)} AS INTEGER)`,
    greatest: "MAX",
    startsWith: (index) => fragment`substr(id, 1, length(${arg(index)})) = ${arg(index)}`
  }
}

/** @internal */
export const recordColumns = "status, token, fingerprint, attempt, lease_until, expires_at, outcome_kind, outcome"

const columnsOf = (r: string) => recordColumns.split(", ").map((column) => `${r}.${column}`).join(", ")

/** @internal */
export interface Names {
  readonly table: string
  readonly expiresAtIndex: string
}

/** @internal */
export const names = (dialect: Dialect, table: string): Names => ({
  table: syntax[dialect].quote(table),
  expiresAtIndex: syntax[dialect].quote(`${table}_expires_at_idx`)
})

/** @internal */
export const statements = (dialect: Dialect, table: string): Statements => {
  const s = syntax[dialect]
  const t = names(dialect, table).table
  const key = s.quote("key")
  const now = fragment`COALESCE(${s.clockArgument}, ${s.clock})`
  const state = (at: Fragment) =>
    fragment`CASE
  WHEN status = 'IN_PROGRESS' THEN CASE WHEN lease_until <= ${at} THEN 'stuck' ELSE 'running' END
  WHEN status = 'FAILED' THEN 'failed'
  WHEN outcome_kind = 'Timeout' THEN 'unknown'
  WHEN outcome_kind = 'Omitted' THEN 'omitted'
  ELSE 'completed'
END`
  const owned = fragment`id = ${arg(1)} AND token = ${arg(2)} AND status = 'IN_PROGRESS' AND expires_at > ${now}`
  // MariaDB has no RETURNING for UPDATE and DELETE: their answer is the rows they matched
  const ownedAnswer = dialect === "sqlite" ? " RETURNING 1 AS owned" : ""
  const ownedStatement = (piece: Fragment) =>
    dialect === "sqlite" ? statement(piece) : statement(piece, { affected: "owned" })

  const read = statement(fragment`SELECT c.now, ${columnsOf("r")}
FROM (SELECT ${now} AS now) AS c
LEFT JOIN ${t} AS r ON r.id = ${arg(1)} AND r.expires_at > c.now`)

  const insertColumns = `id, operation, scope, ${key}, status, token, fingerprint, attempt, lease_until, expires_at, ` +
    "outcome_kind, outcome, created_at, updated_at"

  const reserve: Statements["reserve"] = dialect === "sqlite"
    ? {
      _tag: "Rounds",
      insert: statement(fragment`INSERT INTO ${t} AS r (${insertColumns})
SELECT ${arg(1)}, ${arg(2)}, ${arg(3)}, ${arg(4)}, 'IN_PROGRESS', ${arg(5)}, ${arg(6)}, 1, c.now + ${arg(7)},
  c.now + MAX(${arg(7)}, ${arg(8)}), NULL, NULL, c.now, c.now
FROM (SELECT ${now} AS now) AS c WHERE true
ON CONFLICT (id) DO UPDATE SET
  status = 'IN_PROGRESS',
  token = excluded.token,
  fingerprint = excluded.fingerprint,
  attempt = CASE WHEN r.expires_at <= excluded.created_at THEN 1 ELSE r.attempt + 1 END,
  lease_until = excluded.lease_until,
  expires_at = excluded.expires_at,
  outcome_kind = NULL,
  outcome = NULL,
  created_at = CASE WHEN r.expires_at <= excluded.created_at THEN excluded.created_at ELSE r.created_at END,
  updated_at = excluded.updated_at
WHERE r.expires_at <= excluded.created_at
  OR (r.fingerprint = excluded.fingerprint AND (r.status = 'FAILED'
    OR (r.status = 'IN_PROGRESS' AND ${arg(9)} = 1 AND r.lease_until <= excluded.created_at)))
RETURNING 1 AS reserved, attempt, lease_until, expires_at`),
      read
    }
    : {
      // the columns' order and the sql_mode: see the README's "What each database guarantees"
      _tag: "Row",
      statement: statement(fragment`SET STATEMENT ${MARIADB_SQL_MODE} FOR
${mariadbUpsert(dialect, table)}`)
    }

  return {
    reserve,
    complete: ownedStatement(
      fragment`UPDATE ${t} SET status = 'COMPLETED', outcome_kind = ${arg(3)}, outcome = ${arg(4)},
  expires_at = ${now} + ${arg(5)}, updated_at = ${now}
WHERE ${owned}${ownedAnswer}`
    ),
    release: ownedStatement(fragment`DELETE FROM ${t} WHERE ${owned}${ownedAnswer}`),
    markFailed: ownedStatement(
      fragment`UPDATE ${t} SET status = 'FAILED', expires_at = ${now} + ${arg(3)}, updated_at = ${now}
WHERE ${owned}${ownedAnswer}`
    ),
    extend: ownedStatement(fragment`UPDATE ${t} SET lease_until = ${now} + ${arg(3)},
  expires_at = ${s.greatest}(expires_at, ${now} + ${arg(3)}), updated_at = ${now}
WHERE ${owned}${ownedAnswer}`),
    get: statement(fragment`SELECT ${recordColumns} FROM ${t} WHERE id = ${arg(1)} AND expires_at > ${now}`),
    purgeExpired: dialect === "sqlite"
      ? statement(
        fragment`DELETE FROM ${t}
WHERE id IN (SELECT id FROM ${t} WHERE expires_at <= ${now} ORDER BY expires_at LIMIT ${arg(1)})
RETURNING 1`,
        { counted: "purged" }
      )
      : statement(fragment`DELETE FROM ${t} WHERE expires_at <= ${now} ORDER BY expires_at LIMIT ${arg(1)}`, {
        affected: "purged"
      }),
    admin: {
      list: statement(fragment`SELECT c.now, p.id, ${columnsOf("p")}
FROM (SELECT ${now} AS now) AS c
LEFT JOIN (
  SELECT id, ${recordColumns} FROM ${t}
  WHERE (${arg(1)} IS NULL OR id > ${arg(1)})
    AND (${arg(2)} IS NULL OR ${s.startsWith(2)})
    AND expires_at > ${now}
    AND (${arg(3)} IS NULL OR ${state(now)} = ${arg(3)})
    AND (${arg(4)} IS NULL OR lease_until <= ${now} - ${arg(4)})
  ORDER BY id
  LIMIT ${arg(5)}
) AS p ON 1 = 1
ORDER BY p.id`),
      read,
      unblock: {
        _tag: "Delete",
        statement: ownedStatement(fragment`DELETE FROM ${t}
WHERE id = ${arg(1)} AND attempt = ${arg(2)} AND expires_at > ${now}
  AND ${state(now)} IN ('stuck', 'unknown', 'failed')${ownedAnswer}`)
      },
      stats: statement(fragment`SELECT operation, ${state(now)} AS state, COUNT(*) AS count
FROM ${t}
WHERE expires_at > ${now}
GROUP BY operation, state`)
    }
  }
}

/** @internal */
export const migration = (dialect: Dialect, table: string): ReadonlyArray<string> => {
  const n = names(dialect, table)
  if (dialect === "sqlite") {
    return [
      `CREATE TABLE IF NOT EXISTS ${n.table} (
  id TEXT NOT NULL PRIMARY KEY,
  operation TEXT NOT NULL,
  scope TEXT,
  "key" TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED', 'FAILED')),
  token TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 1),
  lease_until INTEGER NOT NULL,
  expires_at INTEGER NOT NULL,
  outcome_kind TEXT CHECK (outcome_kind IN ('Success', 'Failure', 'Timeout', 'Omitted')),
  outcome TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) WITHOUT ROWID`,
      `CREATE INDEX IF NOT EXISTS ${n.expiresAtIndex} ON ${n.table} (expires_at)`
    ]
  }
  return [
    `CREATE TABLE IF NOT EXISTS ${n.table} (
  id VARCHAR(3000) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  operation TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  scope TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  \`key\` TEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  status VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED', 'FAILED')),
  token VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  fingerprint VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  attempt INT NOT NULL CHECK (attempt >= 1),
  lease_until BIGINT NOT NULL,
  expires_at BIGINT NOT NULL,
  outcome_kind VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin
    CHECK (outcome_kind IN ('Success', 'Failure', 'Timeout', 'Omitted')),
  outcome LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (id),
  KEY ${n.expiresAtIndex} (expires_at)
) ENGINE = InnoDB`
  ]
}

const MARIADB_SQL_MODE = "sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'"

// tokens are random per attempt: the record holds the request's only when this statement gave it
const mariadbUpsert = (dialect: Dialect, table: string): Fragment => {
  const s = syntax[dialect]
  const t = names(dialect, table).table
  const key = s.quote("key")
  const now = fragment`COALESCE(${s.clockArgument}, ${s.clock})`
  const insertColumns = `id, operation, scope, ${key}, status, token, fingerprint, attempt, lease_until, expires_at, ` +
    "outcome_kind, outcome, created_at, updated_at"
  return fragment`INSERT INTO ${t} (${insertColumns})
VALUES (${arg(1)}, ${arg(2)}, ${arg(3)}, ${arg(4)}, 'IN_PROGRESS', ${arg(5)}, ${arg(6)}, 1, ${now} + ${arg(7)},
  ${now} + GREATEST(${arg(7)}, ${arg(8)}), NULL, NULL, ${now}, ${now})
ON DUPLICATE KEY UPDATE
  token = IF(expires_at <= VALUES(created_at)
    OR (fingerprint = VALUES(fingerprint) AND (status = 'FAILED'
      OR (status = 'IN_PROGRESS' AND ${arg(9)} = 1 AND lease_until <= VALUES(created_at)))),
    VALUES(token), token),
  attempt = IF(token = VALUES(token), IF(expires_at <= VALUES(created_at), 1, attempt + 1), attempt),
  created_at = IF(token = VALUES(token) AND expires_at <= VALUES(created_at), VALUES(created_at), created_at),
  status = IF(token = VALUES(token), 'IN_PROGRESS', status),
  fingerprint = IF(token = VALUES(token), VALUES(fingerprint), fingerprint),
  lease_until = IF(token = VALUES(token), VALUES(lease_until), lease_until),
  outcome_kind = IF(token = VALUES(token), NULL, outcome_kind),
  outcome = IF(token = VALUES(token), NULL, outcome),
  updated_at = IF(token = VALUES(token), VALUES(updated_at), updated_at),
  expires_at = IF(token = VALUES(token), VALUES(expires_at), expires_at)
RETURNING token = ${arg(5)} AS reserved, ${recordColumns}, ${now} AS now`
}

/** @internal */
export const transactionalStatements = (dialect: Dialect, table: string): TransactionalStatements => {
  const store = statements(dialect, table)
  const read = store.admin!.read
  if (dialect === "sqlite") {
    return {
      reserve: () => store.reserve,
      complete: store.complete,
      markFailed: store.markFailed,
      read,
      isLockWaitEnded: isLockWaitEnded.sqlite
    }
  }
  const upsert = mariadbUpsert(dialect, table)
  return {
    reserve: (leftMillis) => {
      // in tenths of a second: a handful of statement texts, not one per call
      const tenths = Math.max(1, Math.ceil(leftMillis / 100))
      const bound = `max_statement_time = ${(tenths / 10).toFixed(1)}, ` +
        `innodb_lock_wait_timeout = ${Math.ceil(tenths / 10)}`
      return {
        _tag: "Row",
        statement: statement(fragment`SET STATEMENT ${MARIADB_SQL_MODE}, ${bound} FOR
${upsert}`)
      }
    },
    complete: store.complete,
    markFailed: store.markFailed,
    read,
    isLockWaitEnded: isLockWaitEnded.mariadb
  }
}
