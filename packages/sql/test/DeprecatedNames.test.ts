/**
 * The names kept until 1.0 for code written against them: the dialect `"mysql"` (now `"mariadb"`),
 * `isLockWaitEnded.mysql`, and the module `SqlStoreEngine` (now `SqlStoreKit`).
 */
import { SqlIdempotencyMigration, SqlStoreEngine, SqlStoreKit } from "@effect-idempotency/sql"
import * as DeepSqlStoreEngine from "@effect-idempotency/sql/SqlStoreEngine"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as Statement from "@effect/sql/Statement"
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Stream from "effect/Stream"

/** A client of @effect/sql's `mysql` dialect that answers every statement with no row, and keeps its text. */
const recordingClient = (sent: Array<string>) => {
  const execute: Connection["execute"] = (sql) => Effect.sync(() => (sent.push(sql), []))
  const connection: Connection = {
    execute,
    executeRaw: (sql, params) => execute(sql, params, undefined),
    executeValues: (sql, params) => Effect.as(execute(sql, params, undefined), []),
    executeUnprepared: execute,
    executeStream: (sql, params) => Stream.fromIterableEffect(execute(sql, params, undefined))
  }
  return SqlClient.make({
    acquirer: Effect.succeed(connection),
    transactionAcquirer: Effect.fail(new SqlError({ message: "no transactions here" })),
    compiler: Statement.makeCompiler({
      dialect: "mysql",
      placeholder: () => "?",
      onIdentifier: (value) => `\`${value}\``,
      onRecordUpdate: () => ["", []],
      onCustom: () => ["", []]
    }),
    spanAttributes: []
  }).pipe(Effect.provide(Reactivity.layer))
}

describe("deprecated names", () => {
  it("the dialect \"mysql\" is \"mariadb\": the same migration", () => {
    const mariadb = Either.getOrThrow(SqlIdempotencyMigration.statements("mariadb", { table: "orders_keys" }))
    const mysql = Either.getOrThrow(SqlIdempotencyMigration.statements("mysql", { table: "orders_keys" }))
    assert.deepStrictEqual(mysql, mariadb)
    assert.match(mariadb.join("\n"), /ENGINE = InnoDB/)
  })

  it.effect("migrateTable(\"mysql\") sends MariaDB's migration, and the client's dialect reads as \"mariadb\"", () =>
    Effect.gen(function*() {
      const sent: Array<string> = []
      const sql = yield* recordingClient(sent)
      yield* SqlIdempotencyMigration.migrateTable("mysql", "orders_keys").pipe(
        Effect.provideService(SqlClient.SqlClient, sql)
      )
      assert.deepStrictEqual(
        sent,
        Either.getOrThrow(SqlIdempotencyMigration.statements("mariadb", { table: "orders_keys" }))
      )
      const dialect = yield* SqlIdempotencyMigration.dialect.pipe(Effect.provideService(SqlClient.SqlClient, sql))
      assert.strictEqual(dialect, "mariadb")
    }))

  it("isLockWaitEnded.mysql is isLockWaitEnded.mariadb", () => {
    const lockWaitTimeout = new SqlError({
      message: "lock wait",
      cause: Object.assign(new Error("x"), { errno: 1205 })
    })
    assert.isTrue(SqlStoreKit.isLockWaitEnded.mariadb(lockWaitTimeout))
    assert.isTrue(SqlStoreKit.isLockWaitEnded.mysql(lockWaitTimeout))
    assert.isFalse(SqlStoreKit.isLockWaitEnded.mysql(new SqlError({ message: "other", cause: new Error("y") })))
  })

  it("SqlStoreEngine is SqlStoreKit, from the index and as a module of its own", () => {
    assert.strictEqual(SqlStoreEngine.make, SqlStoreKit.make)
    assert.strictEqual(SqlStoreEngine.makeTransactional, SqlStoreKit.makeTransactional)
    assert.strictEqual(DeepSqlStoreEngine.make, SqlStoreKit.make)
    assert.strictEqual(DeepSqlStoreEngine.toStoreFailure, SqlStoreKit.toStoreFailure)
  })
})
