/**
 * The mapping of driver failures to the store's typed failures, for the failures of the drivers
 * these stores run on (mysql2, better-sqlite3, libSQL, Cloudflare's bindings) that the tests on
 * real engines cannot provoke at will: connection losses and a platform's retryable errors are
 * `StoreUnavailable`, everything else `StoreError`.
 */
import { SqlStoreEngine } from "@effect-idempotency/sql"
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"

const tagOf = (cause: unknown) => SqlStoreEngine.toStoreFailure("reserve")(cause)._tag

const withCode = (message: string, fields: Record<string, unknown>) => Object.assign(new Error(message), fields)

describe("SqlStoreEngine.toStoreFailure", () => {
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

  it("every other failure is StoreError", () => {
    const errors = [
      withCode("You have an error in your SQL syntax", { code: "ER_PARSE_ERROR", errno: 1064, sqlState: "42000" }),
      withCode("Table 'x' doesn't exist", { code: "ER_NO_SUCH_TABLE", sqlState: "42S02" }),
      withCode("no such table: x", { code: "SQLITE_ERROR" }),
      withCode("CHECK constraint failed", { code: "SQLITE_CONSTRAINT_CHECK" }),
      new Error("D1_TYPE_ERROR: Type 'bigint' not supported for value '1'"),
      withCode("internal error", { retryable: false }),
      "a string"
    ]
    for (const cause of errors) assert.strictEqual(tagOf(cause), "StoreError", String(cause))
  })
})
