/**
 * The `IdempotencyStore` on any `SqlClient` of `@effect/sql` that speaks MariaDB
 * (`@effect/sql-mysql2`) or SQLite (`@effect/sql-sqlite-node`, `@effect/sql-libsql`, and other
 * SQLite clients): the dialect is the client's.
 *
 * Every write is one atomic statement (one round trip), fenced by the token, the lease and the
 * expiry, decided on the database's clock by default:
 *
 * - **MariaDB**: the reservation is one `INSERT … ON DUPLICATE KEY UPDATE … RETURNING`
 *   (MariaDB 10.5 and later; MySQL has no `RETURNING`), whose first assignment applies the takeover
 *   rule: a first execution costs 2 statements (reserve, complete), a replay 1, a conflict 1. Row
 *   locks serialise concurrent reservations of one key: exactly one reserves it. The reservation
 *   sets its own `sql_mode` (strict, columns assigned in order), whatever the server's is.
 * - **SQLite**: the reservation is one `INSERT … ON CONFLICT DO UPDATE … WHERE <takeover rule>
 *   RETURNING`, which writes only when it reserves; a conflict or a replay reads the record next (2
 *   statements), so a replay never writes. SQLite runs one writer at a time: what it guarantees is
 *   one machine's (one database file); libSQL's server, D1 and Durable Objects extend it as their
 *   providers promise.
 *
 * The statements, the row decoding, the call timeout and the typed failures are those of every
 * SQL store (`SqlStoreKit`); `@effect-idempotency/sql-pg` is the same kit with PostgreSQL's
 * own statements (a PL/pgSQL reservation function, a partial admin index, a transactional mode).
 *
 * `clock: "server"` (the default) is the database's clock: MariaDB's `UTC_TIMESTAMP(6)`, SQLite's
 * `julianday('now')` (the clock of the machine that runs SQLite). `clock: "effect"` sends the
 * fiber's `Clock` with each statement, for `TestClock`.
 *
 * The store keeps admin primitives, so `IdempotencyAdmin.layer` works over it.
 *
 * @example
 * ```ts
 * import { SqlIdempotencyStore } from "@effect-idempotency/sql"
 * import { SqliteClient } from "@effect/sql-sqlite-node"
 * import { Layer } from "effect"
 *
 * const StoreLive = SqlIdempotencyStore.layerWith({ migrate: true, purgeInterval: "5 minutes" }).pipe(
 *   Layer.provide(SqliteClient.layer({ filename: "idempotency.db" }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { ClockSource } from "@effect-idempotency/core/IdempotencyStore"
import { IdempotencyStore, withPurge } from "@effect-idempotency/core/IdempotencyStore"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Statements from "./internal/statements.js"
import * as SqlIdempotencyMigration from "./SqlIdempotencyMigration.js"
import * as SqlIdempotencyTable from "./SqlIdempotencyTable.js"
import * as SqlStoreKit from "./SqlStoreKit.js"

/**
 * Options of the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The table name. Default `idempotency_records`. */
  readonly table?: string | undefined
  /**
   * Which clock decides lease and TTL expiry. Default `"server"`: the database's clock, one clock
   * for every function instance. `"effect"`: the fiber's `Clock`, sent with each statement.
   */
  readonly clock?: ClockSource | undefined
  /** Create the table and its index (`SqlIdempotencyMigration`) when the layer is built, if they are missing. Default `false`. */
  readonly migrate?: boolean | undefined
  /** Run `purgeExpired` in the background at this interval, for the life of the layer (`IdempotencyStore.layerPurge`). */
  readonly purgeInterval?: Duration.DurationInput | undefined
  /** How many expired records each background purge deletes at most. Default 1000. */
  readonly purgeLimit?: number | undefined
  /**
   * The most a store call may take: past it the call fails with `StoreUnavailable`. Default 5
   * seconds; `Duration.infinity` for no limit. The statement is never cut off: it finishes in the
   * background, so a reservation that timed out may leave an IN_PROGRESS record that its lease
   * bounds, as a crashed attempt does.
   */
  readonly callTimeout?: Duration.DurationInput | undefined
}

/**
 * The errors of building a store.
 *
 * @since 0.1.0
 * @category errors
 */
export type MakeError = SqlIdempotencyTable.InvalidTableName | SqlIdempotencyMigration.UnsupportedDialect | SqlError

/**
 * Builds a store on the `SqlClient` of the context, in its dialect. The client is resolved here,
 * once: the store's methods have no requirements. Statements run on the client's connections, or
 * inside the caller's `sql.withTransaction` when there is one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options?: Omit<Options, "purgeInterval" | "purgeLimit">
): Effect.Effect<IdempotencyStore["Type"], MakeError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const table = yield* SqlIdempotencyTable.make(options?.table)
    const dialect = yield* SqlIdempotencyMigration.dialect
    if (options?.migrate === true) yield* SqlIdempotencyMigration.migrateTable(dialect, table)
    const callTimeout = options?.callTimeout === undefined
      ? SqlStoreKit.DEFAULT_CALL_TIMEOUT
      : Duration.decode(options.callTimeout)
    if (dialect === "sqlite") {
      // a file another process writes to: its lock is waited for (up to the call's time) rather than
      // met as SQLITE_BUSY, after which a libSQL connection no longer commits (see the README). D1
      // and Durable Objects refuse the pragma: they have no other process to wait for
      const millis = Duration.isFinite(callTimeout) ? Math.ceil(Duration.toMillis(callTimeout)) : 5000
      yield* Effect.ignore(Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe(`PRAGMA busy_timeout = ${millis}`)))
    }
    return yield* SqlStoreKit.make(Statements.statements(dialect, table), {
      name: "SqlIdempotencyStore",
      clock: options?.clock ?? "server",
      callTimeout
    })
  })

/**
 * The store as a layer, with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (
  options?: Options
): Layer.Layer<IdempotencyStore, MakeError, SqlClient.SqlClient> =>
  withPurge(Layer.effect(IdempotencyStore, make(options)), options)

/**
 * The store as a layer, with options read from `Config`.
 *
 * ```ts
 * import { SqlIdempotencyStore } from "@effect-idempotency/sql"
 * import { Config } from "effect"
 *
 * const StoreLive = SqlIdempotencyStore.layerConfig({
 *   table: Config.string("IDEMPOTENCY_TABLE").pipe(Config.withDefault("idempotency_records")),
 *   migrate: Config.boolean("IDEMPOTENCY_MIGRATE").pipe(Config.withDefault(false))
 * })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<IdempotencyStore, ConfigError.ConfigError | MakeError, SqlClient.SqlClient> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), layerWith))

/**
 * The store as a layer: table `idempotency_records`, the database's clock, no migration, no
 * background purge.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore, SqlIdempotencyMigration.UnsupportedDialect, SqlClient.SqlClient> =
  // the default name is valid, and no migration runs: the dialect is the only failure
  Layer.effect(IdempotencyStore, Effect.catchTags(make(), { InvalidTableName: Effect.die, SqlError: Effect.die }))
