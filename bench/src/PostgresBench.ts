/**
 * PostgreSQL: the `PgIdempotencyStore` (through the `Idempotency` combinator) against a raw
 * baseline on the same `pg` pool: one INSERT and one UPDATE per first execution, one SELECT by
 * primary key per replay or conflict (the floor of each path). A third contender sends the same
 * raw statements through `SqlClient` (@effect/sql), to separate the driver layer's cost from
 * ours. Round trips are the statements the pool's clients send. Everything the run creates lives in
 * a schema of its own, dropped at the end.
 */
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import * as Counting from "@effect-idempotency/test-support/Counting"
import * as Postgres from "@effect-idempotency/test-support/Postgres"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as Pg from "pg"
import { baseline, FINGERPRINT, LEASE_MILLIS, rawSqlClient, replayed, TTL_MILLIS } from "./Baseline.js"
import { BenchError } from "./Measure.js"
import type { Plan, SuiteResult } from "./Suite.js"
import * as Suite from "./Suite.js"
import { payloadFor } from "./Workload.js"

export const STORE = "pg-store"
export const STORE_TRACED = "pg-store+tracer"
export const RAW = "raw-pg"
export const RAW_SQL = "raw-sqlclient"
export const RAW_OURS = "raw-pg-our-statements"
export const SQL_OURS = "sqlclient-our-statements"

/** Where the benchmark runs: a server, or embedded PGlite served on loopback. */
export interface Database {
  readonly kind: "server" | "pglite"
  readonly url: string
  readonly version: string
}

/** The server at `url`, or PGlite (started now, stopped with the scope) when there is none. */
export const database = (url: string | undefined): Effect.Effect<Omit<Database, "version">, never, Scope.Scope> =>
  url !== undefined
    ? Effect.succeed({ kind: "server", url })
    : Effect.map(Postgres.pglite(), ({ kind, url }) => ({ kind, url }))

/**
 * A pool of `max` connections on `url` whose clients count the statements they send into `sent`,
 * ended with the scope; its `query`; and `schema`, created now and dropped (with everything in it)
 * with the scope.
 */
export const countedPool = (url: string, max: number, sent: Counting.PgSent) =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new Pg.Pool({ connectionString: url, max, Client: Counting.pgClient(sent) })
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
    const schema = (name: string) =>
      Effect.asVoid(Effect.acquireRelease(
        query(`CREATE SCHEMA ${PgIdempotencyTable.quote(name)}`),
        () => Effect.ignore(query(`DROP SCHEMA IF EXISTS ${PgIdempotencyTable.quote(name)} CASCADE`))
      ))
    return { pool, query, schema }
  })

/** The statements the pool sent; while `capture` is set, the text of each is kept in `texts`. */
interface Counter extends Counting.PgSent {
  capture: boolean
  readonly texts: Array<string>
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

const insertParams = (key: string) => {
  const now = Date.now()
  return [`charge#${key}`, key, randomUUID(), FINGERPRINT, now + LEASE_MILLIS, now + TTL_MILLIS, now]
}

const updateParams = (key: string, outcome: string) => {
  const now = Date.now()
  return [`charge#${key}`, outcome, now + TTL_MILLIS, now]
}

interface Row {
  readonly status: string
  readonly fingerprint: string
  readonly outcome: string | null
}

/** The row of the store's reservation statement. */
interface ReserveRow {
  readonly reserved: boolean
  readonly status: string | null
  readonly fingerprint: string | null
  readonly outcome: string | null
}

/** What a baseline sending our reservation does with its row on a replay or a conflict. */
const replayedReservation = (rows: ReadonlyArray<ReserveRow>): unknown =>
  replayed(rows[0]?.reserved === true ? undefined : rows[0])

/**
 * The parameters of our statements, in the order the store's statements take them (see
 * packages/sql-pg/src/internal/statements.ts): the reservation's `$1` now (NULL: the database's
 * clock), `$2` id, `$3` operation, `$4` scope, `$5` key, `$6` token, `$7` fingerprint, `$8` lease ms,
 * `$9` ttl ms, `$10` takeover; the completion's `$1` now, `$2` id, `$3` token, `$4` outcome kind,
 * `$5` outcome, `$6` ttl ms.
 */
const ourReserveParams = (
  key: string,
  token: string
) => [null, `charge#${key}`, "charge", null, key, token, FINGERPRINT, LEASE_MILLIS, TTL_MILLIS, true]
const ourCompleteParams = (
  key: string,
  token: string,
  receipt: unknown
) => [null, `charge#${key}`, token, "Success", JSON.stringify(receipt), TTL_MILLIS]

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
    const counter: Counter = { statements: 0, capture: false, texts: [] }
    const { pool, query, schema: scopedSchema } = yield* countedPool(db.url, poolSize, counter)
    const version = (yield* query<{ readonly version: string }>("SELECT version()"))[0]?.version ?? "unknown"
    // a schema of the run's own, dropped with everything the migrations created in it
    const schema = `bench_${plan.runId.replaceAll("-", "_")}`
    yield* scopedSchema(schema)
    const tables = {
      store: "store_records",
      storeTraced: "store_traced_records",
      raw: "raw_records",
      sql: "sql_records",
      rawOurs: "raw_ours_records",
      sqlOurs: "sql_ours_records"
    }
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
    const storeTraced = yield* Suite.effectContender(
      STORE_TRACED,
      PgIdempotencyStore.layerWith({ schema, table: tables.storeTraced }).pipe(Layer.provide(sqlLayer)),
      roundTrips,
      Suite.recordingTracer().tracer
    )

    const raw = rawStatements(schema, tables.raw)
    const rawContender = baseline(RAW, roundTrips, (downstream) => ({
      call: async (key) => {
        await pool.query(raw.insert, insertParams(key))
        const receipt = await downstream.charge(payloadFor(key))
        await pool.query(raw.update, updateParams(key, JSON.stringify(receipt)))
        return receipt
      },
      replay: (key) => pool.query<Row>(raw.select, [`charge#${key}`]).then((result) => replayed(result.rows[0]))
    }))

    const sqlRuntime = yield* Suite.scopedRuntime(sqlLayer)
    const sqlContender = rawSqlClient({
      name: RAW_SQL,
      runtime: sqlRuntime,
      statements: rawStatements(schema, tables.sql),
      insertParams,
      updateParams,
      roundTrips
    })

    // our exact statements, as the store sent them on one first execution (in its own table)
    counter.capture = true
    yield* Effect.tryPromise({
      try: () => store.call(`${plan.runId}-captured`),
      catch: (cause) => new BenchError({ message: "the store's statements could not be captured", cause })
    })
    counter.capture = false
    const reserveText = counter.texts.find((text) => text.includes(tableNamed(schema, tables.store).reserveFunction))
    const completeText = counter.texts.find((text) => /^UPDATE .* SET status = 'COMPLETED'/s.test(text))
    if (counter.texts.length !== 2 || reserveText === undefined || completeText === undefined) {
      return yield* new BenchError({
        message: `the store no longer sends the statements this baseline knows: ${counter.texts.join(" ; ")}`
      })
    }
    const ourText = (table: string) => {
      const from = tableNamed(schema, tables.store)
      const to = tableNamed(schema, table)
      const swap = (text: string) =>
        text.replaceAll(from.reserveFunction, to.reserveFunction).replaceAll(from.qualified, to.qualified)
      return { reserve: swap(reserveText), complete: swap(completeText) }
    }

    const rawOurs = ourText(tables.rawOurs)
    const rawOursContender = baseline(RAW_OURS, roundTrips, (downstream) => ({
      call: async (key) => {
        const token = randomUUID()
        const reserved = await pool.query<ReserveRow>(rawOurs.reserve, ourReserveParams(key, token))
        if (reserved.rows[0]?.reserved !== true) return replayedReservation(reserved.rows)
        const receipt = await downstream.charge(payloadFor(key))
        const completed = await pool.query(rawOurs.complete, ourCompleteParams(key, token, receipt))
        if (completed.rowCount !== 1) throw new Error("the completion lost its lease")
        return receipt
      }
    }))

    const sqlOurs = ourText(tables.sqlOurs)
    const sqlOursContender = baseline(SQL_OURS, roundTrips, (downstream) => ({
      call: (key) =>
        sqlRuntime.runPromise(Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const token = randomUUID()
          const reserved = yield* sql.unsafe<ReserveRow>(sqlOurs.reserve, ourReserveParams(key, token)).withoutTransform
          if (reserved[0]?.reserved !== true) return { existing: reserved }
          const receipt = yield* Effect.promise(async () => downstream.charge(payloadFor(key)))
          const completed = yield* sql.unsafe(sqlOurs.complete, ourCompleteParams(key, token, receipt)).withoutTransform
          if (completed.length !== 1) return yield* Effect.die(new Error("the completion lost its lease"))
          return { receipt }
        })).then((result) => "existing" in result ? replayedReservation(result.existing) : result.receipt)
    }))

    const result = yield* Suite.run(plan, [
      store,
      rawContender,
      sqlContender,
      rawOursContender,
      sqlOursContender,
      storeTraced
    ])
    return { database: { ...db, version }, result }
  }))
