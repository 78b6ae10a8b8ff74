/**
 * PostgreSQL: the `PgIdempotencyStore` (through the `Idempotency` combinator) against a raw
 * baseline on the same `pg` pool: one INSERT and one UPDATE per first execution, one SELECT by
 * primary key per replay or conflict (the floor of each path). A third contender sends the same
 * raw statements through `SqlClient` (@effect/sql), to separate the driver layer's cost from
 * ours. Round trips are the statements the pool's clients send. Everything the run creates lives in
 * a schema of its own, dropped at the end.
 */
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as Pg from "pg"
import { layerPglite, TestDatabase } from "../../packages/sql-pg/test/utils/Embedded.js"
import { BenchError } from "./Measure.js"
import type { Contender, Plan, SuiteResult } from "./Suite.js"
import * as Suite from "./Suite.js"
import { Downstream, payloadFor } from "./Workload.js"

export const STORE = "pg-store"
export const RAW = "raw-pg"
export const RAW_SQL = "raw-sqlclient"

const TTL_MILLIS = 24 * 60 * 60 * 1000
const LEASE_MILLIS = 31_000

/** Where the benchmark runs: a server, or embedded PGlite served on loopback. */
export interface Database {
  readonly kind: "server" | "pglite"
  readonly url: string
  readonly version: string
}

/** The server at `url`, or PGlite (started now, stopped with the scope) when there is none. */
const database = (url: string | undefined): Effect.Effect<Omit<Database, "version">, never, Scope.Scope> =>
  url !== undefined
    ? Effect.succeed({ kind: "server", url })
    : Effect.map(
      Layer.build(layerPglite),
      (context) => ({ kind: "pglite", url: Context.get(context, TestDatabase).url })
    )

/** A `pg` client class that counts the statements it sends into `counter`. */
const countingClient = (counter: { statements: number }): typeof Pg.Client =>
  class extends Pg.Client {
    override query(...args: Array<any>): any {
      counter.statements++
      return (Pg.Client.prototype.query as (...args: Array<any>) => any).apply(this, args)
    }
  }

const tableNamed = (schema: string, table: string) =>
  Either.getOrThrowWith(PgIdempotencyTable.make({ schema, table }), (error) => new Error(error.message))

/** Statements of the raw baseline on its own copy of the store's table. */
const rawStatements = (schema: string, table: string) => {
  const t = tableNamed(schema, table).qualified
  return {
    insert: `INSERT INTO ${t} (id, operation, scope, key, status, token, fingerprint, attempt, lease_until, ` +
      `expires_at, created_at, updated_at) VALUES ($1, 'charge', NULL, $2, 'IN_PROGRESS', $3, $4, 1, $5, $6, $7, $7)`,
    update: `UPDATE ${t} SET status = 'COMPLETED', outcome_kind = 'Success', outcome = $2, expires_at = $3, ` +
      `updated_at = $4 WHERE id = $1`,
    select: `SELECT status, fingerprint, outcome_kind, outcome, expires_at FROM ${t} WHERE id = $1`
  }
}

const FINGERPRINT = "sha256:0000"

const insertParams = (key: string) => {
  const now = Date.now()
  return [`charge#${key}`, key, randomUUID(), FINGERPRINT, now + LEASE_MILLIS, now + TTL_MILLIS, now]
}

interface Row {
  readonly status: string
  readonly fingerprint: string
  readonly outcome: string | null
}

class Conflict extends Error {}

/** What a replay floor does with the row it read. */
const replayed = (rows: ReadonlyArray<Row>): unknown => {
  const row = rows[0]
  if (row === undefined || row.status !== "COMPLETED" || row.fingerprint !== FINGERPRINT) throw new Conflict()
  return JSON.parse(row.outcome ?? "null")
}

/**
 * Runs the suite on the server at `url`, or on PGlite when `url` is undefined. The tables are
 * created for the run and dropped at its end.
 */
export const run = (
  url: string | undefined,
  plan: Plan,
  poolSize: number
): Effect.Effect<{ readonly database: Database; readonly result: SuiteResult }, BenchError> =>
  Effect.scoped(Effect.gen(function*() {
    const db = yield* database(url)
    const counter = { statements: 0 }
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({ connectionString: db.url, max: poolSize, Client: countingClient(counter) })
        pool.on("error", () => {})
        return pool
      }),
      (pool) => Effect.promise(() => pool.end())
    )
    const query = <A>(text: string, params?: Array<unknown>) =>
      Effect.tryPromise({
        try: () => pool.query(text, params).then((result) => result.rows as Array<A>),
        catch: (cause) => new BenchError({ message: `PostgreSQL refused: ${text.slice(0, 60)}`, cause })
      })
    const version = (yield* query<{ readonly version: string }>("SELECT version()"))[0]?.version ?? "unknown"
    // a schema of the run's own, dropped with everything the migrations created in it
    const schema = `bench_${plan.runId.replaceAll("-", "_")}`
    yield* Effect.acquireRelease(
      query(`CREATE SCHEMA ${PgIdempotencyTable.quote(schema)}`),
      () => Effect.ignore(query(`DROP SCHEMA IF EXISTS ${PgIdempotencyTable.quote(schema)} CASCADE`))
    )
    const tables = { store: "store_records", raw: "raw_records", sql: "sql_records" }
    for (const name of Object.values(tables)) {
      yield* query(PgIdempotencyMigration.toSql(tableNamed(schema, name)))
    }
    const roundTrips = () => counter.statements
    const sqlLayer = PgClient.layerFromPool({ acquire: Effect.succeed(pool) })

    const store = yield* Suite.effectContender(
      STORE,
      PgIdempotencyStore.layerWith({ schema, table: tables.store }).pipe(Layer.provide(sqlLayer)),
      roundTrips
    )

    const raw = rawStatements(schema, tables.raw)
    const rawDownstream = new Downstream()
    const rawContender: Contender = {
      name: RAW,
      downstream: rawDownstream,
      call: async (key) => {
        await pool.query(raw.insert, insertParams(key))
        const receipt = await rawDownstream.charge(payloadFor(key))
        const now = Date.now()
        await pool.query(raw.update, [`charge#${key}`, JSON.stringify(receipt), now + TTL_MILLIS, now])
        return receipt
      },
      replay: (key) => pool.query<Row>(raw.select, [`charge#${key}`]).then((result) => replayed(result.rows)),
      isConflict: (error) => error instanceof Conflict,
      roundTrips
    }

    const viaSql = rawStatements(schema, tables.sql)
    const sqlDownstream = new Downstream()
    const sqlRuntime = yield* Effect.acquireRelease(
      Effect.sync(() => ManagedRuntime.make(sqlLayer)),
      (runtime) => Effect.promise(() => runtime.dispose())
    )
    const sqlContender: Contender = {
      name: RAW_SQL,
      downstream: sqlDownstream,
      call: (key) =>
        sqlRuntime.runPromise(Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql.unsafe(viaSql.insert, insertParams(key)).withoutTransform
          const receipt = yield* Effect.promise(async () => sqlDownstream.charge(payloadFor(key)))
          const now = Date.now()
          yield* sql.unsafe(viaSql.update, [`charge#${key}`, JSON.stringify(receipt), now + TTL_MILLIS, now])
            .withoutTransform
          return receipt
        })),
      replay: (key) =>
        sqlRuntime.runPromise(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql.unsafe<Row>(viaSql.select, [`charge#${key}`]).withoutTransform
          )
        ).then(replayed),
      isConflict: (error) => error instanceof Conflict,
      roundTrips
    }

    const result = yield* Suite.run(plan, [store, rawContender, sqlContender])
    return { database: { ...db, version }, result }
  }))
