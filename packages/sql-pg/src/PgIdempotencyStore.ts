/**
 * The PostgreSQL `IdempotencyStore`, on `SqlClient` from `@effect/sql`.
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
 * Every call fails with `StoreUnavailable` once `callTimeout` (5 seconds by default) has passed
 * without an answer, even from a server that stopped answering without closing the connection, and
 * an interrupted call returns at once. Neither cuts the statement off: it finishes in the
 * background, and its connection goes back to the pool only once answered, so no statement is
 * ever cancelled under another caller's feet.
 *
 * The table and the function come from `PgIdempotencyMigration`.
 *
 * @example
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
 * @since 0.1.0
 */
import { IdempotencyStore, purgeLoop } from "@effect-idempotency/core/IdempotencyStore"
import type * as SqlClient from "@effect/sql/SqlClient"
import * as Duration from "effect/Duration"
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
  /**
   * The most a store call may take: past it the call fails with `StoreUnavailable`, even when the
   * server or the network stopped answering without closing the connection. Default
   * `DEFAULT_CALL_TIMEOUT` (5 seconds); `Duration.infinity` for no limit.
   *
   * The statement itself is never cut off, by this timeout or by interrupting the calling fiber:
   * the call returns at once, the statement finishes in the background, and its connection goes
   * back to the pool only once the server has answered (or is discarded when it fails). A
   * statement that times out may therefore still be applied: a reservation that timed out may
   * leave an IN_PROGRESS record that its lease bounds, as a crashed attempt does.
   */
  readonly callTimeout?: Duration.DurationInput | undefined
}

/**
 * The number of records one `purgeExpired` deletes at most, unless told otherwise.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_PURGE_LIMIT: number = internal.DEFAULT_PURGE_LIMIT

/**
 * The most a store call may take unless told otherwise (`callTimeout`): 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = internal.DEFAULT_CALL_TIMEOUT

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
    (table) =>
      internal.make(table, {
        clock: options?.clock ?? "database",
        callTimeout: options?.callTimeout === undefined ? DEFAULT_CALL_TIMEOUT : Duration.decode(options.callTimeout)
      })
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
  internal.make(PgIdempotencyTable.defaultTable, { clock: "database", callTimeout: DEFAULT_CALL_TIMEOUT })
)
