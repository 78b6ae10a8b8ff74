/**
 * How the store types what its `SqlClient` gives back, on a client whose connection answers with
 * chosen failures, defects or rows: connectivity → `StoreUnavailable`, a missing table or reservation
 * function → `NotMigrated` (a `StoreError`), anything else (including a driver defect and a malformed
 * row) → `StoreError` naming the method.
 */
import { IdempotencyRecord } from "@effect-idempotency/core"
import { PgIdempotencyMigration, PgIdempotencyStore } from "@effect-idempotency/sql-pg"
import * as StoreCalls from "@effect-idempotency/test-support/StoreCalls"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import * as Pg from "pg"
import { expectExisting, expectReserved, freshId, reserveRequest } from "./utils/fixtures.js"

type Answer = Effect.Effect<ReadonlyArray<unknown>, SqlError>

/** A store over a `SqlClient` whose connection gives `answer` to every statement. */
const storeAnswering = (answer: () => Answer, statements = { count: 0 }) => {
  const execute = () =>
    Effect.suspend(() => {
      statements.count++
      return answer()
    }) as Effect.Effect<ReadonlyArray<any>, SqlError>
  const connection: Connection = {
    execute,
    executeRaw: execute,
    executeUnprepared: execute,
    executeValues: () => Effect.die("not used"),
    executeStream: () => Stream.die("not used")
  }
  return SqlClient.make({
    acquirer: Effect.succeed(connection),
    compiler: PgClient.makeCompiler(),
    spanAttributes: []
  }).pipe(
    Effect.flatMap((client) => Effect.provideService(PgIdempotencyStore.make(), SqlClient.SqlClient, client)),
    Effect.provide(Reactivity.layer)
  )
}

const databaseError = (code: string, message = "server error") => {
  const error = new Pg.DatabaseError(message, 0, "error")
  error.code = code
  return error
}

const networkError = (code: string) => Object.assign(new Error(`connect ${code} 127.0.0.1:5432`), { code })

const failed = (cause: unknown) => new SqlError({ cause, message: "Failed to execute statement" })

const id = freshId()

/** Every store method, by name. */
const calls = (store: Effect.Effect.Success<ReturnType<typeof storeAnswering>>) => StoreCalls.everyMethod(store, { id })

const expectFailure = (exit: Exit.Exit<unknown, unknown>, tag: string, method: string) => {
  assert.isTrue(Exit.isFailure(exit))
  const cause = (exit as Exit.Failure<unknown, unknown>).cause
  assert.isFalse(Cause.isDie(cause), Cause.pretty(cause))
  const error = Cause.squash(cause) as { readonly _tag: string; readonly method: string }
  assert.strictEqual(error._tag, tag, `${method}: ${Cause.pretty(cause)}`)
  assert.strictEqual(error.method, method)
}

describe("PgIdempotencyStore failure mapping", () => {
  it.effect("connection failures are StoreUnavailable, on every method", () =>
    Effect.gen(function*() {
      const unavailable: ReadonlyArray<SqlError> = [
        new SqlError({ cause: networkError("ECONNREFUSED"), message: "Failed to acquire connection" }),
        new SqlError({
          cause: new Error("timeout exceeded when trying to connect"),
          message: "Failed to acquire connection"
        }),
        new SqlError({ cause: new Error("Connection terminated unexpectedly"), message: "Connection error" }),
        failed(networkError("ECONNRESET")),
        failed(networkError("EPIPE")),
        failed(new AggregateError([networkError("ECONNREFUSED"), networkError("ECONNREFUSED")], "")),
        failed(new Error("Connection terminated unexpectedly")),
        failed(new Error("Client has encountered a connection error and is not queryable")),
        failed(new Error("Cannot use a pool after calling end on the pool")),
        failed(databaseError("57P01", "terminating connection due to administrator command")),
        failed(databaseError("57P02")),
        failed(databaseError("57P03", "the database system is starting up")),
        failed(databaseError("53300", "sorry, too many clients already")),
        failed(databaseError("08006")),
        failed(databaseError("08P01")),
        failed(databaseError("57014", "canceling statement due to statement timeout"))
      ]
      for (const error of unavailable) {
        const store = yield* storeAnswering(() => Effect.fail(error))
        for (const [method, call] of calls(store)) {
          expectFailure(yield* Effect.exit(call), "StoreUnavailable", method)
        }
      }
    }))

  it.effect("a missing table or reservation function is NotMigrated, a StoreError, on every method", () =>
    Effect.gen(function*() {
      const answers: ReadonlyArray<SqlError> = [
        failed(databaseError("42P01", "relation \"idempotency_records\" does not exist")),
        failed(databaseError("42883", "function idempotency_records_reserve(...) does not exist"))
      ]
      for (const answer of answers) {
        const store = yield* storeAnswering(() => Effect.fail(answer))
        for (const [method, call] of calls(store)) {
          const exit = yield* Effect.exit(call)
          expectFailure(exit, "StoreError", method)
          const error = Cause.squash((exit as Exit.Failure<unknown, unknown>).cause)
          assert.isTrue(PgIdempotencyMigration.isNotMigrated(error), method)
          assert.strictEqual((error as PgIdempotencyMigration.NotMigrated).cause, answer)
        }
      }
    }))

  it.effect("every other failure, a driver defect and a malformed row are StoreError, on every method", () =>
    Effect.gen(function*() {
      const answers: ReadonlyArray<() => Answer> = [
        // the one the reservation function raises when the record never settles
        () => Effect.fail(failed(databaseError("P0001", "the reservation did not settle"))),
        () => Effect.fail(failed(databaseError("23505"))),
        () => Effect.fail(failed(databaseError("40001"))),
        // the SQLSTATE decides, whatever the message quotes
        () => Effect.fail(failed(databaseError("22P02", "invalid input syntax: \"Connection terminated\""))),
        () => Effect.fail(failed(new Error("something else"))),
        () => Effect.die(new TypeError("the driver threw")),
        () =>
          Effect.succeed([{
            reserved: "Connection terminated unexpectedly",
            owned: "connection terminated",
            status: "connection terminated",
            purged: "x"
          }])
      ]
      for (const answer of answers) {
        const store = yield* storeAnswering(answer)
        for (const [method, call] of calls(store)) {
          const exit = yield* Effect.exit(call)
          expectFailure(exit, "StoreError", method)
          assert.isFalse(
            PgIdempotencyMigration.isNotMigrated(Cause.squash((exit as Exit.Failure<unknown, unknown>).cause))
          )
        }
      }
    }))

  it.effect("a reservation answered with no row is a StoreError after its one statement", () =>
    Effect.gen(function*() {
      const statements = { count: 0 }
      const store = yield* storeAnswering(() => Effect.succeed([]), statements)
      expectFailure(yield* Effect.exit(store.reserve(reserveRequest(id))), "StoreError", "reserve")
      assert.strictEqual(statements.count, 1)
    }))

  it.effect("zero rows from a token-checked write is LeaseLost", () =>
    Effect.gen(function*() {
      const store = yield* storeAnswering(() => Effect.succeed([]))
      for (const [method, call] of calls(store).slice(1, 5)) {
        expectFailure(yield* Effect.exit(call), "LeaseLost", method)
      }
    }))

  it.effect("bigint columns decode from strings, numbers and bigints", () =>
    Effect.gen(function*() {
      for (const int of [(n: number) => String(n), (n: number) => n, (n: number) => BigInt(n)]) {
        const reserved = yield* storeAnswering(() =>
          Effect.succeed([{ reserved: true, attempt: 1, lease_until: int(1_000), expires_at: int(2_000) }])
        )
        const result = expectReserved(yield* reserved.reserve(reserveRequest(id)))
        assert.deepStrictEqual([result.leaseUntil, result.expiresAt], [1_000, 2_000])
        const existing = yield* storeAnswering(() =>
          Effect.succeed([{
            reserved: false,
            status: "COMPLETED",
            token: "t",
            fingerprint: "f",
            attempt: 3,
            lease_until: int(1_000),
            expires_at: int(9_000),
            outcome_kind: "Failure",
            outcome: "{\"_tag\":\"OutOfStock\"}",
            now: int(5_000)
          }])
        )
        const found = expectExisting(yield* existing.reserve(reserveRequest(id)))
        assert.strictEqual(found.now, 5_000)
        assert.deepStrictEqual(found.record, {
          status: "COMPLETED",
          token: "t",
          fingerprint: "f",
          attempt: 3,
          leaseUntil: 1_000,
          expiresAt: 9_000,
          outcome: IdempotencyRecord.StoredOutcome.Failure({ error: "{\"_tag\":\"OutOfStock\"}" })
        })
      }
    }))
})
