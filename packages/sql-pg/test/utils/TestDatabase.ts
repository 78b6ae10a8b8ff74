/**
 * The database the tests run against: the PostgreSQL server named by `TEST_PG_URL` (CI sets it to
 * the machine's server), or embedded PGlite (test-support's `PgliteServer`) when it is unset. An
 * unreachable `TEST_PG_URL` fails every test that needs it.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import { layerPrimary, TestDatabase } from "@effect-idempotency/test-support/Postgres"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Pg from "pg"
import { inject } from "vitest"

export {
  type Database,
  layerPglite,
  layerPrimary,
  layerServer,
  serverUrl,
  TestDatabase
} from "@effect-idempotency/test-support/Postgres"

/**
 * A suffix of this test run's own (from the global setup, which removes what carries it when the
 * run ends): table names and `application_name`s carry it, so two runs against one server (two
 * clones, CI next to a developer) never drop or terminate each other's.
 */
export const RUN: string = inject("pgRun")

/** A table name of this run: `name_<RUN>`. */
export const runTable = (name: string): string => `${name}_${RUN}`

/** An `application_name` of this run: `name-<RUN>`. */
export const runApplication = (name: string): string => `${name}-${RUN}`

/** A `PgClient` (and `SqlClient`) on the test database. */
export const layerClient = (options?: {
  readonly maxConnections?: number | undefined
  readonly applicationName?: string | undefined
}): Layer.Layer<PgClient.PgClient | SqlClient.SqlClient, SqlError, TestDatabase> =>
  Layer.unwrapEffect(
    Effect.map(TestDatabase, (database) =>
      PgClient.layer({
        url: Redacted.make(database.url),
        maxConnections: options?.maxConnections,
        applicationName: options?.applicationName
      }))
  )

/** Drops a table of this run (when its tests are done). */
export const dropTable = (options: PgIdempotencyTable.TableOptions) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = yield* PgIdempotencyTable.make(options)
    yield* sql.unsafe(`DROP TABLE IF EXISTS ${table.qualified}`).withoutTransform
    yield* sql.unsafe(`DROP FUNCTION IF EXISTS ${table.reserveFunction}`).withoutTransform
  })

/** A table of this run for the life of a scope: re-created now, dropped when the scope closes. */
export const scopedTable = (options: PgIdempotencyTable.TableOptions) =>
  Effect.acquireRelease(resetTable(options), () => Effect.ignore(dropTable(options)))

/** Drops and re-creates a table (and creates its schema) through the migration. */
export const resetTable = (options: PgIdempotencyTable.TableOptions) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const table = yield* PgIdempotencyTable.make(options)
    if (table.schema !== undefined) {
      yield* sql.unsafe(`CREATE SCHEMA IF NOT EXISTS ${PgIdempotencyTable.quote(table.schema)}`).withoutTransform
    }
    yield* sql.unsafe(`DROP TABLE IF EXISTS ${table.qualified}`).withoutTransform
    yield* PgIdempotencyMigration.migration(options)
  })

/**
 * The test database (the primary) and a client on it (`layerClient(client)`), once `setUp` (the
 * test's tables, re-created) ran through that client.
 */
export const layerSetUp = <E>(
  setUp: Effect.Effect<unknown, E, SqlClient.SqlClient>,
  client?: Parameters<typeof layerClient>[0]
) => Layer.effectDiscard(setUp).pipe(Layer.provideMerge(layerClient(client)), Layer.provideMerge(layerPrimary))

/**
 * A store on a table of this run (`name`, re-created for the layer's life) on `database`, with its
 * client; `onClient` is given that client once the table is there.
 */
export const layerStoreOn = (
  database: Layer.Layer<TestDatabase>,
  name: string,
  clock: IdempotencyStore.ClockSource,
  options?: Parameters<typeof layerClient>[0] & { readonly onClient?: (sql: SqlClient.SqlClient) => void }
) => {
  const table = runTable(name)
  return Layer.scoped(
    IdempotencyStore.IdempotencyStore,
    Effect.gen(function*() {
      yield* scopedTable({ table })
      options?.onClient?.(yield* SqlClient.SqlClient)
      return yield* PgIdempotencyStore.make({ table, clock })
    })
  ).pipe(Layer.provideMerge(layerClient(options)), Layer.provideMerge(database))
}

/** How many statements of the connections named `application` wait for a lock. */
export const lockWaits = (application: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.unsafe<{ readonly waiting: number }>(
      `SELECT count(*)::integer AS waiting FROM pg_stat_activity
       WHERE application_name = $1 AND wait_event_type = 'Lock'`,
      [application]
    ).withoutTransform.pipe(Effect.map((rows) => rows[0]!.waiting)))

/**
 * Waits (bounded: 5 seconds) until `count` statements (1 by default) of the connections named
 * `application` wait for a lock, or `orWhen` holds; dies if neither comes.
 */
export const awaitLockWaits = (
  application: string,
  options: { readonly count?: number; readonly orWhen?: Effect.Effect<boolean> } = {}
) =>
  Effect.gen(function*() {
    const { count = 1, orWhen = Effect.succeed(false) } = options
    for (let i = 0; i < 1000; i++) {
      if ((yield* orWhen) || (yield* lockWaits(application)) >= count) return
      yield* Effect.sleep("5 millis")
    }
    return yield* Effect.dieMessage(`${count} statement(s) of ${application} never waited for a lock`)
  })

/** The transactional tests' tables: the records table re-created, and an empty orders table. */
export const resetOrderTables = (table: string, orders: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* resetTable({ table })
    yield* sql.unsafe(`DROP TABLE IF EXISTS ${orders}`)
    yield* sql.unsafe(
      `CREATE TABLE ${orders} (id text PRIMARY KEY, key text NOT NULL, sku text NOT NULL, quantity int)`
    )
  })

/** What a pool saw of the statements run on it. */
export interface PoolCounters {
  /** Connections handed out while a statement was still in flight on them. */
  busyCheckouts: number
  /** `pg_cancel_backend` calls: how `@effect/sql-pg` cancels a statement whose fiber is interrupted. */
  cancels: number
}

interface PoolClientInternals {
  readonly _activeQuery?: unknown
  readonly _queryQueue?: ReadonlyArray<unknown>
}

/**
 * A store over a `pg` pool of its own, connecting lazily to 127.0.0.1:`port` (the test database's
 * port by default, or a proxy's), with counters of what the pool saw.
 */
export const poolStore = (options: {
  readonly applicationName: string
  readonly port?: number | undefined
  readonly max?: number | undefined
  readonly store?: PgIdempotencyStore.Options | undefined
}) =>
  Effect.gen(function*() {
    const database = yield* TestDatabase
    const url = new URL(database.url)
    const counters: PoolCounters = { busyCheckouts: 0, cancels: 0 }
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({
          host: "127.0.0.1",
          port: options.port ?? database.port,
          user: decodeURIComponent(url.username),
          database: decodeURIComponent(url.pathname.slice(1)),
          max: options.max ?? 10,
          connectionTimeoutMillis: 5_000,
          application_name: options.applicationName
        })
        pool.on("error", () => {})
        pool.on("acquire", (client) => {
          const internals = client as unknown as PoolClientInternals
          if (internals._activeQuery != null || (internals._queryQueue?.length ?? 0) > 0) counters.busyCheckouts++
        })
        const query = pool.query.bind(pool) as (...args: Array<unknown>) => unknown
        Object.assign(pool, {
          query: (...args: Array<unknown>) => {
            if (typeof args[0] === "string" && args[0].includes("pg_cancel_backend")) counters.cancels++
            return query(...args)
          }
        })
        return pool
      }),
      (pool) => Effect.promise(() => pool.end())
    )
    const context = yield* Layer.build(
      PgIdempotencyStore.layerWith(options.store).pipe(
        Layer.provide(PgClient.layerFromPool({ acquire: Effect.succeed(pool) }))
      )
    )
    return { context, counters, pool, store: Context.get(context, IdempotencyStore.IdempotencyStore) }
  })

/** Waits (bounded: 10 s) until every connection of the pool is back in it, idle. */
export const awaitPoolIdle = (pool: Pg.Pool): Effect.Effect<void> =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000 && pool.idleCount < pool.totalCount; i++) yield* Effect.sleep("5 millis")
  })
