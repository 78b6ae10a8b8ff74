/**
 * The PostgreSQL `IdempotencyStore`: `SqlStoreKit` with PostgreSQL's statements (see the README).
 *
 * @example
 * ```ts
 * import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
 * import { PgClient } from "@effect/sql-pg"
 * import { Config, Layer } from "effect"
 *
 * const StoreLive = PgIdempotencyStore.layerWith({ migrate: true, purgeInterval: "5 minutes" }).pipe(
 *   Layer.provide(PgClient.layerConfig({ url: Config.redacted("DATABASE_URL") }))
 * )
 * ```
 *
 * @since 0.1.0
 */
import type { ClockSource } from "@effect-idempotency/core/IdempotencyStore"
import { IdempotencyStore, withPurge } from "@effect-idempotency/core/IdempotencyStore"
import * as SqlStoreKit from "@effect-idempotency/sql/SqlStoreKit"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as internal from "./internal/store.js"
import * as PgIdempotencyMigration from "./PgIdempotencyMigration.js"
import * as PgIdempotencyTable from "./PgIdempotencyTable.js"

/**
 * Options of the store: see the README's "Layers".
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends PgIdempotencyTable.TableOptions {
  readonly clock?: ClockSource | undefined
  readonly migrate?: boolean | undefined
  readonly purgeInterval?: Duration.DurationInput | undefined
  readonly purgeLimit?: number | undefined
  readonly callTimeout?: Duration.DurationInput | undefined
}

/**
 * The most records one `purgeExpired` deletes, unless told otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_PURGE_LIMIT: number = SqlStoreKit.DEFAULT_PURGE_LIMIT

/**
 * The default `callTimeout`: 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = SqlStoreKit.DEFAULT_CALL_TIMEOUT

/**
 * Builds a store on the `SqlClient` of the context, resolved once.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options?: Omit<Options, "purgeInterval" | "purgeLimit">
): Effect.Effect<
  IdempotencyStore["Type"],
  PgIdempotencyTable.InvalidTableName | SqlError,
  SqlClient.SqlClient
> =>
  Effect.gen(function*() {
    const table = yield* PgIdempotencyTable.make(options)
    if (options?.migrate === true) yield* PgIdempotencyMigration.migrateTable(table)
    return yield* internal.make(table, {
      clock: options?.clock ?? "server",
      callTimeout: options?.callTimeout === undefined ? DEFAULT_CALL_TIMEOUT : Duration.decode(options.callTimeout)
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
): Layer.Layer<IdempotencyStore, PgIdempotencyTable.InvalidTableName | SqlError, SqlClient.SqlClient> =>
  withPurge(Layer.effect(IdempotencyStore, make(options)), options)

/**
 * The store as a layer, with options read from `Config`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  config: Config.Config.Wrap<Options>
): Layer.Layer<
  IdempotencyStore,
  ConfigError.ConfigError | PgIdempotencyTable.InvalidTableName | SqlError,
  SqlClient.SqlClient
> => Layer.unwrapEffect(Effect.map(Config.unwrap(config), layerWith))

/**
 * The store as a layer with the defaults: no migration, no background purge.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore, never, SqlClient.SqlClient> = Layer.effect(
  IdempotencyStore,
  internal.make(PgIdempotencyTable.defaultTable, { clock: "server", callTimeout: DEFAULT_CALL_TIMEOUT })
)
