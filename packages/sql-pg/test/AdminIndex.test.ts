/**
 * The admin index (`<table>_admin_idx`): the migration creates it with a new table and leaves a
 * table that has records to `adminIndex`, which builds it CONCURRENTLY, does nothing the second
 * time, and builds again an index that a failed build left invalid. The list statement, planned as
 * the store sends it (parameters known), reads it for every state but `completed` on a table of
 * 20,000 completed records and a few of each other state, with either clock.
 *
 * On embedded PGlite always, and on the PostgreSQL server when `TEST_PG_URL` names one.
 */
import { IdempotencyAdmin, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { PgIdempotencyMigration, PgIdempotencyStore, PgIdempotencyTable } from "@effect-idempotency/sql-pg"
import * as SqlClient from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import { expectReserved, freshId, reserveRequest } from "./utils/fixtures.js"
import type { Database, TestDatabase } from "./utils/TestDatabase.js"
import { layerClient, layerPglite, layerServer, resetTable, runTable, serverUrl } from "./utils/TestDatabase.js"

const exec = (text: string, params?: ReadonlyArray<unknown>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text, params).withoutTransform)

/** The indexes of a table: name, whether the planner may use it, and its definition. */
const indexesOf = (table: PgIdempotencyTable.IdempotencyTable) =>
  Effect.map(
    exec(
      `SELECT c.relname AS name, i.indisvalid AS valid, pg_get_indexdef(i.indexrelid) AS definition
       FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       WHERE i.indrelid = to_regclass($1) ORDER BY c.relname`,
      [table.qualified]
    ),
    (rows) => rows as ReadonlyArray<{ readonly name: string; readonly valid: boolean; readonly definition: string }>
  )

/** Asserts the table's indexes: the primary key, the expiry index, and the admin index when `admin`, valid. */
const assertIndexes = (table: PgIdempotencyTable.IdempotencyTable, admin: boolean) =>
  Effect.gen(function*() {
    const indexes = yield* indexesOf(table)
    assert.deepStrictEqual(
      indexes.map(({ name, valid }) => [name, valid]),
      [
        ...(admin ? [[`${table.name}_admin_idx`, true]] : []),
        [`${table.name}_expires_at_idx`, true],
        [`${table.name}_pkey`, true]
      ]
    )
    if (admin) {
      assert.include(
        indexes[0]!.definition,
        "(id) WHERE ((status = ANY (ARRAY['IN_PROGRESS'::text, 'FAILED'::text])) OR " +
          "(outcome_kind = ANY (ARRAY['Timeout'::text, 'Omitted'::text])))"
      )
    }
  })

const tableOf = (options: PgIdempotencyTable.TableOptions) => Either.getOrThrow(PgIdempotencyTable.make(options))

/** One record, reserved through the store (the table then has records). */
const reserveOne = (options: PgIdempotencyTable.TableOptions) =>
  Effect.gen(function*() {
    const store = yield* PgIdempotencyStore.make(options)
    expectReserved(yield* store.reserve(reserveRequest(freshId("admin-index"))))
  })

const COMPLETED = 20_000

/** The states whose listing reads the admin index: a few records among many. */
const rare = ["stuck", "running", "failed", "unknown", "omitted"] as const

/**
 * A table of `COMPLETED` completed records (written in one statement, as `complete` writes them)
 * and two records of each rare state, written through the store; analyzed.
 */
const fillTable = (options: PgIdempotencyTable.TableOptions, operation: string) =>
  Effect.gen(function*() {
    const table = tableOf(options)
    yield* resetTable(options)
    yield* exec(
      `INSERT INTO ${table.qualified} (id, operation, scope, key, status, token, fingerprint, attempt, lease_until,
         expires_at, outcome_kind, outcome, created_at, updated_at)
       SELECT 'bulk#k' || n, 'bulk', NULL, 'k' || n, 'COMPLETED', 'token', 'fp', 1, now_ms, now_ms + 86400000,
         'Success', '1', now_ms, now_ms
       FROM generate_series(1, ${COMPLETED}) AS n,
         (SELECT floor(extract(epoch FROM statement_timestamp()) * 1000)::bigint AS now_ms) AS clock`
    )
    const store = yield* PgIdempotencyStore.make(options)
    const ttl = Duration.hours(1)
    for (let i = 0; i < 2; i++) {
      const reserve = (lease: Duration.Duration) => {
        const id = freshId(operation)
        return Effect.map(store.reserve(reserveRequest(id, { lease })), (result) => ({ id, ...expectReserved(result) }))
      }
      yield* reserve(Duration.zero)
      yield* reserve(Duration.hours(1))
      const failed = yield* reserve(Duration.zero)
      yield* store.markFailed({ id: failed.id, token: failed.token, ttl })
      const unknown = yield* reserve(Duration.zero)
      yield* store.complete({
        id: unknown.id,
        token: unknown.token,
        outcome: IdempotencyRecord.StoredOutcome.Timeout(),
        ttl
      })
      const omitted = yield* reserve(Duration.zero)
      yield* store.complete({
        id: omitted.id,
        token: omitted.token,
        outcome: IdempotencyRecord.StoredOutcome.Omitted({ reason: "too large" }),
        ttl
      })
    }
    yield* exec(`ANALYZE ${table.qualified}`)
    return table
  })

/** Runs `admin.list(query)` on a store over `table` and returns the statement it sent, with its parameters. */
const listStatement = (
  table: PgIdempotencyTable.IdempotencyTable,
  clock: IdempotencyStore.ClockSource,
  query: IdempotencyAdmin.ListQuery
) =>
  Effect.gen(function*() {
    const store = yield* PgIdempotencyStore.make({ table: table.name, schema: table.schema, clock })
    const sent: Array<readonly [string, ReadonlyArray<unknown>]> = []
    const page = yield* Effect.flatMap(IdempotencyAdmin.IdempotencyAdmin, (admin) => admin.list(query)).pipe(
      Effect.provide(IdempotencyAdmin.layer),
      Effect.provideService(IdempotencyStore.IdempotencyStore, store),
      Statement.withTransformer((statement) =>
        Effect.sync(() => {
          sent.push(statement.compile(true))
          return statement
        })
      )
    )
    assert.strictEqual(sent.length, 1)
    return { page, sql: sent[0]![0], params: sent[0]![1] }
  })

/** The plan PostgreSQL makes for a statement and its parameters (a custom plan: the parameters are known). */
const planOf = (sql: string, params: ReadonlyArray<unknown>) =>
  Effect.map(exec(`EXPLAIN ${sql}`, params), (rows) => rows.map((row) => row["QUERY PLAN"]).join("\n"))

const suite = (kind: Database["kind"], database: Layer.Layer<TestDatabase>) =>
  layer(layerClient().pipe(Layer.provideMerge(database)), { excludeTestServices: true, timeout: "2 minutes" })(
    `PgIdempotencyMigration admin index (${kind})`,
    (it) => {
      it.effect("the migration creates the admin index with a new table", () =>
        Effect.gen(function*() {
          const options = { table: runTable("idem_admin_index_new") }
          yield* resetTable(options)
          yield* assertIndexes(tableOf(options), true)
        }))

      it.effect("on a table with records, the migration leaves it to adminIndex, which builds it once", () =>
        Effect.gen(function*() {
          const options = { table: runTable("idem_admin_index_existing") }
          const table = tableOf(options)
          // a table of an earlier version, without the index, that has records
          yield* resetTable(options)
          yield* exec(`DROP INDEX ${table.adminIndex}`)
          yield* reserveOne(options)
          yield* PgIdempotencyMigration.migration(options)
          yield* assertIndexes(table, false)
          yield* PgIdempotencyMigration.adminIndex(options)
          yield* assertIndexes(table, true)
          yield* PgIdempotencyMigration.adminIndex(options)
          yield* assertIndexes(table, true)
        }))

      it.effect("adminIndex builds again an index that a failed build left invalid, in a schema", () =>
        Effect.gen(function*() {
          const options = { schema: runTable("idem_admin_index_schema"), table: "records" }
          const table = tableOf(options)
          yield* resetTable(options)
          yield* reserveOne(options)
          // what a failed or cancelled CREATE INDEX CONCURRENTLY leaves: an index the planner never uses
          yield* exec(
            `UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass($1)`,
            [`${PgIdempotencyTable.quote(options.schema)}.${table.adminIndex}`]
          )
          const [invalid] = yield* indexesOf(table)
          assert.deepStrictEqual([invalid!.name, invalid!.valid], ["records_admin_idx", false])
          yield* PgIdempotencyMigration.adminIndex(options)
          yield* assertIndexes(table, true)
        }))

      it.effect("the list statement reads the admin index for every state but completed, with either clock", () =>
        Effect.gen(function*() {
          const operation = "admin-index"
          const table = yield* fillTable({ table: runTable("idem_admin_index_plans") }, operation)
          const index = `${table.name}_admin_idx`
          const queries = [
            {},
            // an operation's records after a cursor, whose lease ended (the CLI's `list --older-than`)
            { operation, cursor: `${operation}#`, olderThan: Duration.zero }
          ]
          for (const clock of ["server", "effect"] as const) {
            for (const state of rare) {
              for (const query of queries) {
                const { page, params, sql } = yield* listStatement(table, clock, { ...query, state, limit: 100 })
                // a running record's lease has not ended
                const expected = state === "running" && query.olderThan !== undefined ? [] : [state, state]
                assert.deepStrictEqual(page.records.map((record) => record.state), expected, state)
                const plan = yield* planOf(sql, params)
                const context = `${clock} ${state} ${JSON.stringify(params)}:\n${plan}`
                assert.match(plan, new RegExp(`Index Scan (on|using) ${index} `), context)
                assert.notInclude(plan, "Seq Scan", context)
              }
            }
          }
        }))
    }
  )

suite("pglite", layerPglite)

if (serverUrl !== undefined) suite("server", layerServer(serverUrl))
