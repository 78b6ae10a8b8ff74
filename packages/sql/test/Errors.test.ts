/**
 * The mapping of driver failures to the store's typed failures, for the failures of the drivers
 * these stores run on (mysql2, better-sqlite3, libSQL, Cloudflare's bindings) that the tests on
 * real engines cannot provoke at will: connection losses and a platform's retryable errors are
 * `StoreUnavailable`, a missing table `NotMigrated` (a `StoreError` that says to migrate), everything
 * else `StoreError`.
 */
import { IdempotencyError } from "@effect-idempotency/core"
import { SqlIdempotencyMigration, SqlStoreKit } from "@effect-idempotency/sql"
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"

const tagOf = (cause: unknown) => SqlStoreKit.toStoreFailure("reserve")(cause)._tag

const withCode = (message: string, fields: Record<string, unknown>) => Object.assign(new Error(message), fields)

describe("SqlStoreKit.toStoreFailure", () => {
  it("connection losses and retryable platform errors are StoreUnavailable, wrapped in SqlError or not", () => {
    const unavailable = [
      withCode("Connection lost: The server closed the connection.", { code: "PROTOCOL_CONNECTION_LOST" }),
      withCode("Too many connections", { code: "ER_CON_COUNT_ERROR", errno: 1040, sqlState: "08004" }),
      withCode("Server shutdown in progress", { code: "ER_SERVER_SHUTDOWN", errno: 1053 }),
      withCode("Lost connection", { code: "CR_SERVER_LOST", sqlState: "08S01" }),
      withCode("connect ECONNREFUSED 127.0.0.1:3306", { code: "ECONNREFUSED" }),
      new Error("Pool is closed."),
      withCode("database is locked", { code: "SQLITE_BUSY" }),
      new Error("D1_ERROR: Network connection lost."),
      new Error("D1 DB is overloaded. Requests queued for too long."),
      withCode("Durable Object reset because its code was updated.", {}),
      withCode("internal error", { retryable: true })
    ]
    for (const cause of unavailable) {
      assert.strictEqual(tagOf(cause), "StoreUnavailable", cause.message)
      assert.strictEqual(tagOf(new SqlError({ cause, message: "Failed to execute statement" })), "StoreUnavailable")
    }
  })

  it("a missing table is NotMigrated, a StoreError whose message says to migrate, wrapped in SqlError or not", () => {
    const missing = [
      withCode("Table 'db.x' doesn't exist", { code: "ER_NO_SUCH_TABLE", errno: 1146, sqlState: "42S02" }),
      withCode("no such table: x", { code: "SQLITE_ERROR" }),
      withCode("SQLITE_ERROR: no such table: x", { code: "SQLITE_ERROR", rawCode: 1 }),
      new Error("D1_ERROR: no such table: x: SQLITE_ERROR"),
      withCode("relation \"x\" does not exist", { code: "42P01" }),
      withCode("function x_reserve(bigint) does not exist", { code: "42883" })
    ]
    for (const cause of missing) {
      for (const failure of [cause, new SqlError({ cause, message: "Failed to execute statement" })]) {
        const error = SqlStoreKit.toStoreFailure("get")(failure)
        assert.strictEqual(error._tag, "StoreError", cause.message)
        assert.instanceOf(error, IdempotencyError.StoreError)
        assert.isTrue(SqlIdempotencyMigration.isNotMigrated(error), cause.message)
        assert.strictEqual(error.cause, failure)
        assert.include(error.message, "failed during get")
        assert.include(error.message, "`effect-idempotency migrate")
        assert.include(error.message, "`migrate: true`")
      }
    }
  })

  it("every other failure is StoreError", () => {
    const errors = [
      withCode("You have an error in your SQL syntax", { code: "ER_PARSE_ERROR", errno: 1064, sqlState: "42000" }),
      withCode("Unknown column 'x' in 'field list'", { code: "ER_BAD_FIELD_ERROR", sqlState: "42S22" }),
      withCode("no such column: x", { code: "SQLITE_ERROR" }),
      withCode("CHECK constraint failed", { code: "SQLITE_CONSTRAINT_CHECK" }),
      new Error("D1_TYPE_ERROR: Type 'bigint' not supported for value '1'"),
      withCode("internal error", { retryable: false }),
      "a string"
    ]
    for (const cause of errors) {
      assert.strictEqual(tagOf(cause), "StoreError", String(cause))
      assert.isFalse(SqlIdempotencyMigration.isNotMigrated(SqlStoreKit.toStoreFailure("reserve")(cause)))
    }
  })
})
