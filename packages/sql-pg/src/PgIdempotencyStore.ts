/**
 * The PostgreSQL `IdempotencyStore`, on `SqlClient` from `@effect/sql`.
 *
 * ```ts
 * import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
 * import { PgClient } from "@effect/sql-pg"
 * import { Layer, Redacted } from "effect"
 *
 * const StoreLive = PgIdempotencyStore.layerWith({ purgeInterval: "5 minutes" }).pipe(
 *   Layer.provide(PgClient.layer({ url: Redacted.make(process.env.DATABASE_URL!) }))
 * )
 * ```
 *
 * Each method is one statement (one round trip): a first execution costs 2 (reserve, complete), a
 * replay 1, a conflict 1. The reservation calls the PL/pgSQL function `<table>_reserve` that the
 * migration creates next to the table: its statements are planned once per connection, and it
 * writes only when it reserves, so retries of a key that is in progress or completed neither lock
 * nor write its row.
 *
 * Lease and TTL expiry are decided by the database's clock by default: one clock for every function
 * instance, whatever their own clocks say. `clock: "effect"` uses Effect's `Clock` instead (the
 * time is sent with each statement), which lets `TestClock` drive expiry in tests.
 *
 * The table and the function come from `PgIdempotencyMigration`.
 *
 * @since 0.1.0
 */
import { IdempotencyStore, purgeLoop } from "@effect-idempotency/core/IdempotencyStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as internal from "./internal/store.js"
import * as PgIdempotencyTable from "./PgIdempotencyTable.js"

/**
 * Which clock decides lease and TTL expiry.
 *
 * - `"database"` (default): the server's `statement_timestamp()`. Every function instance shares
 *   it, so a skewed instance clock can neither take over a live lease early nor keep a dead one
 *   blocked.
 * - `"effect"`: the fiber's `Clock`, sent as a parameter of each statement. Instances must then
 *   agree on time; use it in tests with `TestClock`, or when expiry must follow the application's
 *   clock.
 *
 * @since 0.1.0
 * @category models
 */
export type ClockSource = "database" | "effect"

/**
 * Options of the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends PgIdempotencyTable.TableOptions {
  /** Which clock decides expiry. Default `"database"`. */
  readonly clock?: ClockSource | undefined
  /** Run `purgeExpired` in a background fiber at this interval, for the life of the layer. */
  readonly purgeInterval?: Duration.DurationInput | undefined
  /** How many expired records each background purge deletes at most. Default 1000. */
  readonly purgeLimit?: number | undefined
}

/**
 * The number of records one `purgeExpired` deletes at most, unless told otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_PURGE_LIMIT: number = internal.DEFAULT_PURGE_LIMIT

/**
 * Builds a store. The `SqlClient` is resolved here, once: the store's methods have no
 * requirements. Statements run on the `SqlClient`'s connection pool, or inside the caller's
 * `sql.withTransaction` when there is one (READ COMMITTED, the default, is required there).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options?: Omit<Options, "purgeInterval" | "purgeLimit">
): Effect.Effect<IdempotencyStore["Type"], PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient> =>
  Effect.flatMap(
    PgIdempotencyTable.make(options),
    (table) => internal.make(table, { clock: options?.clock ?? "database" })
  )

/**
 * A layer that runs `purgeExpired` of the provided store at `interval` in a background fiber, for
 * the life of the layer. Store failures are logged, never fatal.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPurge = (
  interval: Duration.DurationInput,
  options?: { readonly limit?: number | undefined }
): Layer.Layer<never, never, IdempotencyStore> =>
  Layer.scopedDiscard(
    Effect.flatMap(IdempotencyStore, (store) => Effect.forkScoped(purgeLoop(store, interval, options)))
  )

/**
 * The store as a layer, with options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (
  options?: Options
): Layer.Layer<IdempotencyStore, PgIdempotencyTable.InvalidTableName, SqlClient.SqlClient> => {
  const store = Layer.effect(IdempotencyStore, make(options))
  return options?.purgeInterval === undefined
    ? store
    : Layer.provideMerge(layerPurge(options.purgeInterval, { limit: options.purgeLimit }), store)
}

/**
 * The store as a layer: table `idempotency_records`, the database's clock, no background purge.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore, never, SqlClient.SqlClient> = Layer.effect(
  IdempotencyStore,
  internal.make(PgIdempotencyTable.defaultTable, { clock: "database" })
)
