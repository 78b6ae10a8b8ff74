/**
 * Fail closed: a store that cannot be reached never lets the downstream run. The run's MariaDB
 * server is reached through a loopback proxy that stops answering, refuses connections or cuts
 * them; a SQLite file is held locked by another connection. Every store call fails with
 * `StoreUnavailable` (within `callTimeout` for a server that stops answering), and an operation
 * run over it fails without executing.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { SqlIdempotencyStore } from "@effect-idempotency/sql"
import * as Counting from "@effect-idempotency/test-support/Counting"
import * as StoreCalls from "@effect-idempotency/test-support/StoreCalls"
import { StoreFixtures, TcpProxy } from "@effect-idempotency/testing"
import * as MysqlClient from "@effect/sql-mysql2/MysqlClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { assert, describe, it } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Ref from "effect/Ref"
import { randomUUID } from "node:crypto"
import { inject } from "vitest"
import { layerClient, scopedDatabaseFile, uniqueTable } from "./utils/databases.js"

const { freshId, reserveRequest } = StoreFixtures

/** A failure of `StoreUnavailable`, or a description of the exit that was not one. */
const unavailable = <A, E>(exit: Exit.Exit<A, E>): string | true => {
  if (Exit.isSuccess(exit)) return "succeeded"
  const failure = Cause.failureOption(exit.cause)
  return failure._tag === "Some" && (failure.value as { readonly _tag?: unknown })._tag === "StoreUnavailable"
    ? true
    : Cause.pretty(exit.cause)
}

/**
 * An operation that counts its executions: a run of it on a new key over `store`, and the check that
 * such a run fails with `StoreUnavailable` and executes nothing.
 */
const counted = Effect.map(Counting.operation("faults"), ({ executions, operation }) => {
  const runOn = (store: IdempotencyStore.IdempotencyStore["Type"]) =>
    operation.run({ key: randomUUID(), payload: Counting.payload }).pipe(
      Effect.provideService(IdempotencyStore.IdempotencyStore, store)
    )
  const failsClosed = (store: IdempotencyStore.IdempotencyStore["Type"]) =>
    Effect.gen(function*() {
      const run = yield* Effect.exit(runOn(store))
      assert.strictEqual(unavailable(Exit.mapError(run, (e) => e as unknown)), true)
      assert.strictEqual(yield* Ref.get(executions), 0)
    })
  return { failsClosed, runOn }
})

/** A store through a proxy to the run's MariaDB database. */
const throughProxy = Effect.gen(function*() {
  const url = new URL(inject("mysqlUrl"))
  const proxy = yield* TcpProxy.make({ host: "127.0.0.1", port: Number(url.port) })
  url.port = String(proxy.port)
  const client = yield* Layer.build(MysqlClient.layer({ url: Redacted.make(url.toString()), maxConnections: 2 }))
  const store = yield* SqlIdempotencyStore.make({
    table: uniqueTable("idem_faults"),
    migrate: true,
    callTimeout: Duration.seconds(1)
  }).pipe(Effect.provide(client))
  return { proxy, store }
}).pipe(Effect.orDie)

describe("SqlIdempotencyStore faults", () => {
  it.live(
    "MariaDB that stops answering: every call is StoreUnavailable within callTimeout; nothing executes",
    () =>
      Effect.gen(function*() {
        const { proxy, store } = yield* throughProxy
        const { failsClosed } = yield* counted
        yield* proxy.stall()
        for (const [, call] of StoreCalls.everyMethod(store, { token: "t" })) {
          const started = Date.now()
          const exit = yield* Effect.exit(call)
          assert.strictEqual(unavailable(exit), true)
          assert.isBelow(Date.now() - started, 10_000)
        }
        yield* failsClosed(store)
        yield* proxy.resume
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "MariaDB that refuses or drops connections: StoreUnavailable; nothing executes",
    () =>
      Effect.gen(function*() {
        const { proxy, store } = yield* throughProxy
        const { failsClosed, runOn } = yield* counted
        for (const fault of [proxy.cut, proxy.refuse]) {
          yield* fault
          const exit = yield* Effect.exit(store.reserve(reserveRequest(freshId())))
          // a cut connection may be replaced by a new one that works: then the call succeeds
          if (Exit.isFailure(exit)) assert.strictEqual(unavailable(exit), true)
        }
        yield* failsClosed(store)
        yield* proxy.resume
        // back: the key executes once
        assert.strictEqual(
          yield* runOn(store),
          1
        )
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "SQLite locked by another connection: the reservation is StoreUnavailable; nothing executes",
    () =>
      Effect.gen(function*() {
        const file = yield* scopedDatabaseFile
        const table = uniqueTable("idem_faults")
        const client = yield* Layer.build(layerClient("sqlite", { file }))
        const store = yield* SqlIdempotencyStore.make({ table, migrate: true }).pipe(
          Effect.provide(client),
          Effect.orDie
        )
        const { failsClosed, runOn } = yield* counted
        // another connection holds the write lock: a transaction that wrote, and waits (better-sqlite3
        // waits 5 s for the lock, then fails with SQLITE_BUSY)
        const other = Context.get(yield* Layer.build(layerClient("sqlite", { file })), SqlClient.SqlClient)
        const locked = yield* Deferred.make<void>()
        const release = yield* Deferred.make<void>()
        const holder = yield* Effect.fork(
          other.withTransaction(
            other.unsafe(`DELETE FROM "${table}" WHERE id = 'none'`).withoutTransform.pipe(
              Effect.zipRight(Deferred.succeed(locked, void 0)),
              Effect.zipRight(Deferred.await(release))
            )
          )
        )
        yield* Deferred.await(locked)
        yield* failsClosed(store)
        yield* Deferred.succeed(release, void 0)
        yield* Fiber.join(holder)
        assert.strictEqual(
          yield* runOn(store),
          1
        )
      }).pipe(Effect.scoped),
    60_000
  )
})
