/**
 * The store's constructors: the dialect comes from the client (a PostgreSQL client is refused,
 * naming the package that serves it), a table name is validated before any SQL is sent, the
 * migration is idempotent, a table never migrated is `NotMigrated` (which says how to migrate),
 * `layerConfig` reads its options, and the migration's SQL is given for users who run their own
 * migrations.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyMigration, SqlIdempotencyStore, SqlIdempotencyTable } from "@effect-idempotency/sql"
import * as StoreCalls from "@effect-idempotency/test-support/StoreCalls"
import { StoreFixtures } from "@effect-idempotency/testing"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { engines, layerClient, scopedDatabaseFile, uniqueTable } from "./utils/databases.js"

/** A client of PostgreSQL's dialect whose every statement fails: nothing may be sent through it. */
const pgClient = Layer.effect(
  SqlClient.SqlClient,
  SqlClient.make({
    acquirer: Effect.fail(new SqlError({ message: "no statement may be sent" })),
    compiler: Statement.makeCompiler({
      dialect: "pg",
      placeholder: (index) => `$${index}`,
      onIdentifier: (value) => `"${value}"`,
      onRecordUpdate: () => ["", []],
      onCustom: () => ["", []]
    }),
    spanAttributes: []
  })
).pipe(Layer.provide(Reactivity.layer))

describe("SqlIdempotencyStore layers", () => {
  it.effect("a PostgreSQL client is UnsupportedDialect, whose message names @effect-idempotency/sql-pg", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(SqlIdempotencyStore.make({ migrate: true }))
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(SqlIdempotencyStore.make())
      assert.instanceOf(error, SqlIdempotencyMigration.UnsupportedDialect)
      assert.include(error.message, "@effect-idempotency/sql-pg")
    }).pipe(Effect.provide(pgClient)))

  it.effect("an invalid table name is InvalidTableName, before any statement", () =>
    Effect.gen(function*() {
      for (const table of ["", "1abc", "a-b", "a\"; DROP TABLE x; --", "x".repeat(49)]) {
        const error = yield* Effect.flip(SqlIdempotencyStore.make({ table, migrate: true }))
        assert.instanceOf(error, SqlIdempotencyTable.InvalidTableName, table)
      }
      assert.isTrue(Either.isLeft(SqlIdempotencyMigration.statements("mariadb", { table: "a b" })))
    }).pipe(Effect.provide(pgClient)))

  for (const engine of engines) {
    it.scoped(`${engine}: the migration runs twice, and layerConfig reads the table from Config`, () =>
      Effect.gen(function*() {
        const client = yield* Layer.build(layerClient(engine))
        const table = uniqueTable("idem_layers")
        yield* SqlIdempotencyMigration.migrate({ table }).pipe(Effect.provide(client))
        yield* SqlIdempotencyMigration.migrate({ table }).pipe(Effect.provide(client))
        const context = yield* Layer.build(
          SqlIdempotencyStore.layerConfig({
            table: Config.string("IDEMPOTENCY_TABLE"),
            clock: Config.literal("server", "effect")("IDEMPOTENCY_CLOCK")
          }).pipe(
            Layer.provide(Layer.succeedContext(client)),
            Layer.provide(
              Layer.setConfigProvider(
                ConfigProvider.fromJson({ IDEMPOTENCY_TABLE: table, IDEMPOTENCY_CLOCK: "server" })
              )
            )
          )
        )
        const store = Context.get(context, IdempotencyStore.IdempotencyStore)
        const id = StoreFixtures.freshId()
        StoreFixtures.expectReserved(yield* store.reserve(StoreFixtures.reserveRequest(id)))
        // the store wrote to the table Config named
        const sql = Context.get(client, SqlClient.SqlClient)
        const rows = yield* sql.unsafe(
          `SELECT COUNT(*) AS n FROM ${engine === "mariadb" ? `\`${table}\`` : `"${table}"`}`
        ).withoutTransform
        assert.strictEqual(Number((rows[0] as { readonly n: unknown }).n), 1)
      }))
  }

  for (const engine of engines) {
    it.scoped(`${engine}: a table never migrated is NotMigrated on every method, until the layer migrates it`, () =>
      Effect.gen(function*() {
        const file = yield* scopedDatabaseFile
        const client = yield* Layer.build(layerClient(engine, { file }))
        const table = uniqueTable("idem_unmigrated")
        const store = yield* SqlIdempotencyStore.make({ table }).pipe(Effect.provide(client))
        const id = StoreFixtures.freshId()
        for (const [method, call] of StoreCalls.everyMethod(store, { id })) {
          const error = yield* Effect.flip(call)
          assert.strictEqual(error._tag, "StoreError", method)
          assert.instanceOf(error, SqlIdempotencyMigration.NotMigrated, `${method}: ${error.message}`)
          assert.include(error.message, `failed during ${method}`)
          assert.include(error.message, "migrate: true")
        }
        const migrated = yield* Layer.build(
          SqlIdempotencyStore.layerWith({ table, migrate: true }).pipe(Layer.provide(Layer.succeedContext(client)))
        )
        const reserved = Context.get(migrated, IdempotencyStore.IdempotencyStore).reserve(
          StoreFixtures.reserveRequest(id)
        )
        if (engine === "sqlite") {
          // @effect/sql-sqlite-node keeps a statement that failed to prepare in its prepare cache, failed,
          // for `prepareCacheTTL` (10 minutes): that client still meets no table; a new client works
          assert.isTrue(SqlIdempotencyMigration.isNotMigrated(yield* Effect.flip(reserved)))
          const fresh = yield* Layer.build(layerClient(engine, { file }))
          const store = yield* SqlIdempotencyStore.make({ table }).pipe(Effect.provide(fresh))
          StoreFixtures.expectReserved(yield* store.reserve(StoreFixtures.reserveRequest(id)))
        } else {
          StoreFixtures.expectReserved(yield* reserved)
        }
      }))
  }

  it("the migration's statements create the table and its expiry index, in each dialect", () => {
    for (const dialect of ["mariadb", "sqlite"] as const) {
      const statements = Either.getOrThrow(SqlIdempotencyMigration.statements(dialect, { table: "orders_keys" }))
      assert.match(statements.join("\n"), /CREATE TABLE IF NOT EXISTS [`"]orders_keys[`"]/)
      assert.match(statements.join("\n"), /orders_keys_expires_at_idx/)
    }
  })
})
