/**
 * The `IdempotencyStore` on a MariaDB or SQLite `SqlClient`; each database's guarantees are in the README.
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
 * Options of the store: see the README's "Layers".
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly table?: string | undefined
  readonly clock?: ClockSource | undefined
  readonly migrate?: boolean | undefined
  readonly purgeInterval?: Duration.DurationInput | undefined
  readonly purgeLimit?: number | undefined
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
 * Builds a store on the `SqlClient` of the context, in its dialect, resolved once.
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
      // the busy timeout: see the README's "What each database guarantees"
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
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<IdempotencyStore, ConfigError.ConfigError | MakeError, SqlClient.SqlClient> =>
  Layer.unwrapEffect(Effect.map(Config.unwrap(config), layerWith))

/**
 * The store as a layer with the defaults: no migration, no background purge.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore, SqlIdempotencyMigration.UnsupportedDialect, SqlClient.SqlClient> =
  Layer.effect(IdempotencyStore, Effect.catchTags(make(), { InvalidTableName: Effect.die, SqlError: Effect.die }))
