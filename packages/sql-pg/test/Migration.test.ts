/**
 * The migration (through the Migrator and as plain SQL): the table, its indexes and its reservation
 * function, idempotent, for mixed-case and schema-qualified names; table names; and a missing table or
 * function, which is `NotMigrated`: a `StoreError` with the method's name that says to migrate.
 */
import { IdempotencyError, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import {
  PgIdempotencyMigration,
  PgIdempotencyStore,
  PgIdempotencyTable,
  PgTransactional
} from "@effect-idempotency/sql-pg"
import * as StoreCalls from "@effect-idempotency/test-support/StoreCalls"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as String from "effect/String"
import { expectExisting, expectReserved, freshId, rawClient, rawQuery, reserveRequest } from "./utils/fixtures.js"
import { layerClient, layerPrimary, runApplication, runTable, TestDatabase } from "./utils/TestDatabase.js"

const MIGRATOR_SCHEMA = runTable("idem_migrator")
const MIGRATIONS_TABLE = runTable("idem_migrator_migrations")
const SCRIPT_TABLE = runTable("idem_Script_Records")
const MISSING_TABLE = runTable("idem_missing_table")
const NO_FUNCTION_TABLE = runTable("idem_no_function")
const LONGEST_TABLE = runTable("idem_longest").padEnd(PgIdempotencyTable.MAX_NAME_LENGTH, "x")

const Live = layerClient().pipe(Layer.provideMerge(layerPrimary))

const exec = (text: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) => sql.unsafe<Record<string, unknown>>(text).withoutTransform)

/** The names of the functions in a schema (the connection's current schema when none is named). */
const functionsIn = (schema?: string) =>
  Effect.map(
    exec(
      `SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
       WHERE n.nspname = ${schema === undefined ? "current_schema()" : `'${schema}'`}`
    ),
    (rows) => rows.map((row) => row.proname as string)
  )

/** Reserve, complete and replay on a store over `options`. */
const roundTrip = (options: PgIdempotencyStore.Options) =>
  Effect.gen(function*() {
    const store = yield* PgIdempotencyStore.make(options)
    const id = freshId()
    const first = expectReserved(yield* store.reserve(reserveRequest(id)))
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "42" })
    yield* store.complete({ id, token: first.token, outcome, ttl: Duration.hours(1) })
    const replay = expectExisting(yield* store.reserve(reserveRequest(id)))
    assert.deepStrictEqual(replay.record.outcome, outcome)
  })

const runMigrator = Migrator.make({})({
  loader: PgIdempotencyMigration.loader({ schema: MIGRATOR_SCHEMA, table: "records" }),
  table: MIGRATIONS_TABLE
})

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("PgIdempotencyMigration", (it) => {
  it.effect("the Migrator creates the table, its indexes and its reservation function in a schema, once", () =>
    Effect.gen(function*() {
      yield* exec(`DROP SCHEMA IF EXISTS ${MIGRATOR_SCHEMA} CASCADE`)
      yield* exec(`DROP TABLE IF EXISTS ${MIGRATIONS_TABLE}`)
      yield* exec(`CREATE SCHEMA ${MIGRATOR_SCHEMA}`)
      const applied = yield* runMigrator
      assert.deepStrictEqual(applied, [[1, "create_idempotency_records"]])
      assert.deepStrictEqual(yield* runMigrator, [])
      const indexes = yield* exec(
        `SELECT indexname FROM pg_indexes WHERE schemaname = '${MIGRATOR_SCHEMA}' AND tablename = 'records'
         ORDER BY indexname`
      )
      assert.deepStrictEqual(
        indexes.map((row) => row.indexname),
        ["records_admin_idx", "records_expires_at_idx", "records_pkey"]
      )
      assert.deepStrictEqual(yield* functionsIn(MIGRATOR_SCHEMA), ["records_reserve"])
      // the schema is not on the search path: the store calls the function by its qualified name
      yield* roundTrip({ schema: MIGRATOR_SCHEMA, table: "records" })
    }))

  it.scoped("the plain SQL script creates the same table and function, runs twice, and keeps the name's case", () =>
    Effect.gen(function*() {
      const table = Either.getOrThrow(PgIdempotencyTable.make({ table: SCRIPT_TABLE }))
      const statements = PgIdempotencyMigration.statements(table)
      assert.strictEqual(statements.length, 5)
      assert.isTrue(statements[0]!.startsWith(`CREATE TABLE IF NOT EXISTS "${SCRIPT_TABLE}"`))
      assert.isTrue(statements[1]!.startsWith(`CREATE INDEX IF NOT EXISTS "${SCRIPT_TABLE}_expires_at_idx"`))
      assert.include(statements[2]!, `CREATE INDEX IF NOT EXISTS "${SCRIPT_TABLE}_admin_idx"`)
      assert.isTrue(statements[3]!.startsWith(`CREATE OR REPLACE FUNCTION "${SCRIPT_TABLE}_reserve"(`))
      assert.isTrue(statements[4]!.startsWith(`COMMENT ON FUNCTION "${SCRIPT_TABLE}_reserve"(`))
      const script = PgIdempotencyMigration.toSql(table)
      assert.strictEqual(script, statements.map((statement) => `${statement};\n`).join("\n"))
      assert.strictEqual(PgIdempotencyMigration.toSql(), PgIdempotencyMigration.toSql(PgIdempotencyTable.defaultTable))
      const database = yield* TestDatabase
      const client = yield* rawClient(database.url, runApplication("idem-migration-script"))
      yield* rawQuery(client, `DROP TABLE IF EXISTS "${SCRIPT_TABLE}"`)
      yield* rawQuery(client, `DROP FUNCTION IF EXISTS "${SCRIPT_TABLE}_reserve"`)
      yield* rawQuery(client, script)
      yield* rawQuery(client, script)
      assert.include(yield* functionsIn(), `${SCRIPT_TABLE}_reserve`)
      yield* roundTrip({ table: SCRIPT_TABLE })
    }))

  it.effect("the migration runs again over an existing table, and restores a missing reservation function", () =>
    Effect.gen(function*() {
      yield* exec(`DROP TABLE IF EXISTS ${NO_FUNCTION_TABLE}`)
      yield* PgIdempotencyMigration.migration({ table: NO_FUNCTION_TABLE })
      const store = yield* PgIdempotencyStore.make({ table: NO_FUNCTION_TABLE })
      const id = freshId()
      const kept = expectReserved(yield* store.reserve(reserveRequest(id)))
      yield* PgIdempotencyMigration.migration({ table: NO_FUNCTION_TABLE })
      assert.strictEqual(expectExisting(yield* store.reserve(reserveRequest(id))).record.token, kept.token)

      // without the function, reserve fails with NotMigrated, a StoreError (undefined function); the rest works
      yield* exec(`DROP FUNCTION ${NO_FUNCTION_TABLE}_reserve`)
      const error = yield* Effect.flip(store.reserve(reserveRequest(freshId())))
      assert.strictEqual(error._tag, "StoreError")
      assert.isTrue(PgIdempotencyMigration.isNotMigrated(error))
      assert.strictEqual(error.method, "reserve")
      assert.strictEqual(
        (error as unknown as { readonly cause: { readonly cause: { readonly code: string } } }).cause.cause.code,
        "42883"
      )
      assert.strictEqual(Option.getOrThrow(yield* store.get(id)).token, kept.token)
      yield* store.release({ id, token: kept.token })

      yield* PgIdempotencyMigration.migration({ table: NO_FUNCTION_TABLE })
      yield* roundTrip({ table: NO_FUNCTION_TABLE })
    }))

  it.effect("a table name of the longest length gets its indexes and function under their full names", () =>
    Effect.gen(function*() {
      assert.strictEqual(LONGEST_TABLE.length, PgIdempotencyTable.MAX_NAME_LENGTH)
      yield* exec(`DROP TABLE IF EXISTS ${LONGEST_TABLE}`)
      yield* PgIdempotencyMigration.migration({ table: LONGEST_TABLE })
      assert.include(yield* functionsIn(), `${LONGEST_TABLE}_reserve`)
      const indexes = yield* exec(`SELECT indexname FROM pg_indexes WHERE tablename = '${LONGEST_TABLE}'`)
      assert.includeMembers(indexes.map((row) => row.indexname), [
        `${LONGEST_TABLE}_expires_at_idx`,
        `${LONGEST_TABLE}_admin_idx`
      ])
      yield* roundTrip({ table: LONGEST_TABLE })
    }))

  it.effect("table and schema names are validated", () =>
    Effect.gen(function*() {
      const invalid = [
        { table: "bad name" },
        { table: "records\"; DROP TABLE x; --" },
        { table: "1records" },
        { table: "" },
        { table: "x".repeat(PgIdempotencyTable.MAX_NAME_LENGTH + 1) },
        { table: "records", schema: "public.other" },
        { table: "records", schema: "y".repeat(64) }
      ]
      for (const options of invalid) {
        const result = PgIdempotencyTable.make(options)
        assert.isTrue(Either.isLeft(result) && result.left._tag === "InvalidTableName", JSON.stringify(options))
        const exit = yield* Effect.exit(PgIdempotencyStore.make(options))
        assert.isTrue(Exit.isFailure(exit))
        const built = yield* Effect.exit(Layer.build(PgIdempotencyStore.layerWith(options)).pipe(Effect.scoped))
        assert.isTrue(Exit.isFailure(built))
      }
      const valid = Either.getOrThrow(PgIdempotencyTable.make({ table: "x".repeat(48), schema: "Tenant_1" }))
      assert.strictEqual(valid.qualified, `"Tenant_1"."${"x".repeat(48)}"`)
      assert.strictEqual(PgIdempotencyTable.quote("a\"b"), "\"a\"\"b\"")
    }))

  it.effect("a table never migrated is NotMigrated, a StoreError naming the method that says to migrate", () =>
    Effect.gen(function*() {
      yield* exec(`DROP TABLE IF EXISTS ${MISSING_TABLE}`)
      yield* exec(`DROP FUNCTION IF EXISTS ${MISSING_TABLE}_reserve`)
      const store = yield* PgIdempotencyStore.make({ table: MISSING_TABLE })
      for (const [method, call] of StoreCalls.everyMethod(store)) {
        const error = yield* Effect.flip(call)
        assert.strictEqual(error._tag, "StoreError", method)
        assert.instanceOf(error, IdempotencyError.StoreError)
        assert.instanceOf(error, PgIdempotencyMigration.NotMigrated)
        assert.strictEqual((error as unknown as { readonly method: string }).method, method)
        assert.include(error.message, `failed during ${method}`)
        assert.include(error.message, "effect-idempotency migrate")
        assert.include(error.message, "migrate: true")
        // the SQLSTATE of an undefined function (the reservation) or table (the other statements)
        assert.strictEqual(
          (error as unknown as { readonly cause: { readonly cause: { readonly code: string } } }).cause.cause.code,
          method === "reserve" ? "42883" : "42P01",
          method
        )
      }
      // as is a transactional operation's reservation on that table
      const operation = PgTransactional.make({
        name: "never-migrated",
        table: Either.getOrThrow(PgIdempotencyTable.make({ table: MISSING_TABLE })),
        payload: Schema.Struct({ n: Schema.Number }),
        success: Schema.Number,
        execute: ({ n }) => Effect.succeed(n)
      })
      const failed = yield* Effect.flip(operation.run({ key: "k-1", payload: { n: 1 } }))
      assert.isTrue(PgIdempotencyMigration.isNotMigrated(failed), failed.message)
      // migrated, the same store works
      yield* PgIdempotencyMigration.migration({ table: MISSING_TABLE })
      yield* roundTrip({ table: MISSING_TABLE })
    }))

  it.scoped("a client that transforms names (camelCase columns) works unchanged", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const table = runTable("idem_transformed")
      yield* exec(`DROP TABLE IF EXISTS ${table}`)
      yield* PgIdempotencyMigration.migration({ table })
      const context = yield* Layer.build(
        PgClient.layer({
          url: Redacted.make(database.url),
          maxConnections: 2,
          transformResultNames: String.snakeToCamel,
          transformQueryNames: String.camelToSnake
        })
      )
      yield* roundTrip({ table }).pipe(Effect.provide(context))
    }))

  it.effect("the default layer uses the default table", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const schema = runTable("idem_default_layer")
      yield* exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
      yield* exec(`CREATE SCHEMA ${schema}`)
      yield* PgIdempotencyMigration.migration({ schema })
      const tables = yield* exec(
        `SELECT tablename FROM pg_tables WHERE schemaname = '${schema}'`
      )
      assert.deepStrictEqual(tables.map((row) => row.tablename), [PgIdempotencyTable.DEFAULT_NAME])
      assert.deepStrictEqual(yield* functionsIn(schema), [`${PgIdempotencyTable.DEFAULT_NAME}_reserve`])
      // `layer` resolves the unqualified default names (table and function) through the search path
      yield* Effect.gen(function*() {
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        yield* sql.withTransaction(
          Effect.gen(function*() {
            yield* sql.unsafe(`SET LOCAL search_path TO ${schema}`).withoutTransform
            expectReserved(yield* store.reserve(reserveRequest(id)))
            assert.isTrue(Option.isSome(yield* store.get(id)))
          })
        )
      }).pipe(Effect.provide(PgIdempotencyStore.layer))
    }))
})
