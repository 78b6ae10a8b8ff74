import { networkErrorCodes, StoreError, StoreUnavailable } from "@effect-idempotency/core/IdempotencyError"
import type { StoreFailure } from "@effect-idempotency/core/IdempotencyError"
import * as Cause from "effect/Cause"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"

/** SQLSTATE codes outside class 08 (connection exception) that mean the server is unavailable. */
const UNAVAILABLE_STATES: ReadonlySet<string> = new Set([
  "57P01", // admin_shutdown (pg_terminate_backend, fast shutdown)
  "57P02", // crash_shutdown
  "57P03", // cannot_connect_now (starting up, recovering)
  "57P05", // idle_session_timeout
  "53300", // too_many_connections
  "57014" // query_canceled (statement_timeout)
])

/** The same, as codes of the MariaDB and SQLite drivers. */
const UNAVAILABLE_CODES: ReadonlySet<string> = new Set([
  "PROTOCOL_CONNECTION_LOST",
  "PROTOCOL_SEQUENCE_TIMEOUT",
  "ER_CON_COUNT_ERROR",
  "ER_SERVER_SHUTDOWN",
  "ER_CONNECTION_KILLED",
  "ER_LOCK_WAIT_TIMEOUT",
  "SQLITE_BUSY",
  "SQLITE_BUSY_SNAPSHOT",
  "SQLITE_BUSY_TIMEOUT"
])

/** The same, as messages of the drivers, the pools and `@effect/sql`'s clients. */
const UNAVAILABLE_MESSAGES: ReadonlyArray<RegExp> = [
  /connection terminated/i,
  /terminating connection/i,
  /server closed the connection/i,
  /timeout exceeded when trying to connect/i,
  /connection timed out/i,
  /not queryable/i,
  /cannot use a pool after calling end/i,
  /failed to acquire connection/i,
  /^connection error$/i,
  /failed to connect/i,
  /pool is closed/i,
  /connection is in closed state/i,
  // Cloudflare D1 and Durable Objects: errors their documentation tells callers to retry
  /network connection lost/i,
  /storage caused object to be reset/i,
  /reset because its code was updated/i,
  /D1 DB is overloaded/i
]

const MAX_DEPTH = 8

const SQLSTATE = /^[0-9A-Z]{5}$/

const codeOf = (u: object): string | undefined =>
  Predicate.hasProperty(u, "code") && typeof u.code === "string" ? u.code : undefined

const messageOf = (u: object): string | undefined =>
  Predicate.hasProperty(u, "message") && typeof u.message === "string" ? u.message : undefined

/** @internal */
export const isUnavailable = (u: unknown, depth = 0): boolean => {
  if (depth > MAX_DEPTH || !Predicate.isObject(u)) return false
  if (Cause.isTimeoutException(u)) return true
  const code = codeOf(u)
  if (code !== undefined) {
    if (networkErrorCodes.has(code) || UNAVAILABLE_CODES.has(code)) return true
    // a server error: its SQLSTATE alone decides (its message may quote data)
    if (SQLSTATE.test(code)) return code.startsWith("08") || UNAVAILABLE_STATES.has(code)
  }
  if (Predicate.hasProperty(u, "retryable") && u.retryable === true) return true
  // mysql2: a connection exception's SQLSTATE is beside its code
  if (Predicate.hasProperty(u, "sqlState") && typeof u.sqlState === "string" && u.sqlState.startsWith("08")) {
    return true
  }
  const message = messageOf(u)
  if (message !== undefined && UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(message))) return true
  if (Predicate.hasProperty(u, "errors") && Array.isArray(u.errors)) {
    if (u.errors.some((error) => isUnavailable(error, depth + 1))) return true
  }
  return Predicate.hasProperty(u, "cause") && isUnavailable(u.cause, depth + 1)
}

/** A missing table or reservation function (SQLite says it only in its message). */
const NOT_MIGRATED_CODES: ReadonlySet<string> = new Set(["42P01", "42883", "ER_NO_SUCH_TABLE"])

const NO_SUCH_TABLE = /no such table/i

const isMissingTable = (u: unknown, depth = 0): boolean => {
  if (depth > MAX_DEPTH || !Predicate.isObject(u)) return false
  const code = codeOf(u)
  if (code !== undefined && NOT_MIGRATED_CODES.has(code)) return true
  const message = messageOf(u)
  if (message !== undefined && NO_SUCH_TABLE.test(message)) return true
  return Predicate.hasProperty(u, "cause") && isMissingTable(u.cause, depth + 1)
}

export const NotMigratedTypeId: unique symbol = Symbol.for("@effect-idempotency/sql/NotMigrated")

/** Public as `SqlIdempotencyMigration.NotMigrated`. */
export class NotMigrated extends StoreError {
  declare readonly [NotMigratedTypeId]: typeof NotMigratedTypeId
  override get message(): string {
    return `Idempotency store failed during ${this.method}: its table (or, on PostgreSQL, its reservation ` +
      "function) does not exist. Run the migration (`effect-idempotency migrate --store <url>`, or the " +
      "store package's `migrate`), or build the store's layer with `migrate: true`"
  }
}
Object.defineProperty(NotMigrated.prototype, NotMigratedTypeId, { value: NotMigratedTypeId })

export const TransactionsUnsupportedTypeId: unique symbol = Symbol.for(
  "@effect-idempotency/sql/TransactionsUnsupported"
)

/** Public as `SqlTransactional.TransactionsUnsupported`. */
export class TransactionsUnsupported extends StoreError {
  declare readonly [TransactionsUnsupportedTypeId]: typeof TransactionsUnsupportedTypeId
  override get message(): string {
    return "The transactional mode needs interactive transactions, which this SqlClient does not have " +
      "(Cloudflare D1 and Durable Objects run each statement on its own): use the normal mode " +
      "(Idempotency.make on SqlIdempotencyStore) there"
  }
}
Object.defineProperty(TransactionsUnsupported.prototype, TransactionsUnsupportedTypeId, {
  value: TransactionsUnsupportedTypeId
})

export const isTransactionsUnsupported = (u: unknown): u is TransactionsUnsupported =>
  Predicate.hasProperty(u, TransactionsUnsupportedTypeId)

export class NoTransactions {
  readonly _tag = "NoTransactions"
  constructor(readonly message: string) {}
}

export const isNoTransactions = (u: unknown): boolean =>
  Predicate.hasProperty(u, "cause") && u.cause instanceof NoTransactions

export const isNotMigrated = (u: unknown): u is NotMigrated => Predicate.hasProperty(u, NotMigratedTypeId)

/** @internal */
export const toStoreFailure = (method: string) => (cause: unknown): StoreFailure => {
  if (ParseResult.isParseError(cause)) return new StoreError({ method, cause })
  if (isUnavailable(cause)) return new StoreUnavailable({ method, cause })
  return isMissingTable(cause) ? new NotMigrated({ method, cause }) : new StoreError({ method, cause })
}

const BREAKING_CODES: ReadonlySet<string> = new Set(["SQLITE_BUSY", "SQLITE_BUSY_SNAPSHOT", "SQLITE_BUSY_TIMEOUT"])

// see the README's "libSQL files and other processes"
/** @internal */
export const breaksLibsqlConnection = (u: unknown, depth = 0): boolean => {
  if (depth > MAX_DEPTH || !Predicate.isObject(u)) return false
  const code = codeOf(u)
  const libsql = Predicate.hasProperty(u, "name") && u.name === "LibsqlError" ||
    Predicate.hasProperty(u, "libsqlError") && u.libsqlError === true
  if (libsql && code !== undefined && BREAKING_CODES.has(code)) return true
  return Predicate.hasProperty(u, "cause") && breaksLibsqlConnection(u.cause, depth + 1)
}
