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
 * instance, whatever their own clocks say (`clock: "server"`). `clock: "effect"` uses Effect's `Clock` instead (the
 * time is sent with each statement), which lets `TestClock` drive expiry in tests.
 *
 * Every call fails with `StoreUnavailable` once `callTimeout` (5 seconds by default) has passed
 * without an answer, even from a server that stopped answering without closing the connection, and
 * an interrupted call returns at once. Neither cuts the statement off: it finishes in the
 * background, and its connection goes back to the pool only once answered, so no statement is
 * ever cancelled under another caller's feet.
 *
 * The table and the function come from `PgIdempotencyMigration`: run it with your migrations, or
 * let the layer run it when it is built (`migrate: true`).
 *
 * The store keeps admin primitives, so `IdempotencyAdmin.layer` works over it, on the same clock.
 * `unblock` is one conditional DELETE (the attempt the operator saw, a state that may be deleted,
 * live). `list` walks the primary key from its cursor in id order and filters as it goes; with an
 * operation it reads only that operation's ids where the id's collation is C (elsewhere PostgreSQL
 * cannot turn the prefix into a range, and the walk is as without one). There is no index on
 * state or lease: a listing by state reads records until it has a page, the whole table (from the
 * cursor on) when few match, and `stats` reads every live record.
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
 * Options of the store.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends PgIdempotencyTable.TableOptions {
  /**
   * Which clock decides lease and TTL expiry. Default `"server"`: the database's
   * `statement_timestamp()`, one clock for every function instance. `"effect"`: the fiber's
   * `Clock`, sent as a parameter of each statement (for `TestClock`, or when expiry must follow the
   * application's clock).
   */
  readonly clock?: ClockSource | undefined
  /**
   * Create the table, its index and its reservation function (`PgIdempotencyMigration`) when the
   * layer is built, if they are missing. Default `false`. Safe when many instances start at once:
   * the statements run in one transaction under an advisory lock of the table.
   */
  readonly migrate?: boolean | undefined
  /** Run `purgeExpired` in the background at this interval, for the life of the layer (`IdempotencyStore.layerPurge`). */
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
export const DEFAULT_PURGE_LIMIT: number = SqlStoreKit.DEFAULT_PURGE_LIMIT

/**
 * The most a store call may take unless told otherwise (`callTimeout`): 5 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const DEFAULT_CALL_TIMEOUT: Duration.Duration = SqlStoreKit.DEFAULT_CALL_TIMEOUT

/**
 * Builds a store. The `SqlClient` is resolved here, once: the store's methods have no
 * requirements. Statements run on the `SqlClient`'s connection pool, or inside the caller's
 * `sql.withTransaction` when there is one (READ COMMITTED, the default, is required there).
 *
 * With `migrate: true` it first runs the migration (see `Options.migrate`).
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
 * ```ts
 * import { PgIdempotencyStore } from "@effect-idempotency/sql-pg"
 * import { Config } from "effect"
 *
 * const StoreLive = PgIdempotencyStore.layerConfig({
 *   table: Config.string("IDEMPOTENCY_TABLE").pipe(Config.withDefault("idempotency_records")),
 *   migrate: Config.boolean("IDEMPOTENCY_MIGRATE").pipe(Config.withDefault(false)),
 *   purgeInterval: Config.duration("IDEMPOTENCY_PURGE_INTERVAL").pipe(Config.withDefault("5 minutes"))
 * })
 * ```
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
 * The store as a layer: table `idempotency_records`, the database's clock, no migration, no
 * background purge.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<IdempotencyStore, never, SqlClient.SqlClient> = Layer.effect(
  IdempotencyStore,
  internal.make(PgIdempotencyTable.defaultTable, { clock: "server", callTimeout: DEFAULT_CALL_TIMEOUT })
)
