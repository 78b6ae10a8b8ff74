/**
 * Connection faults: a server that resets every connection, connections cut while a statement is in
 * flight, and (on the PostgreSQL server) backends terminated with `pg_terminate_backend`. Each
 * surfaces as a typed `StoreUnavailable`, never a defect; the downstream is not called without a
 * reservation; the next attempt after recovery proceeds normally.
 */
import { IdempotencyKey, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import * as Counting from "@effect-idempotency/test-support/Counting"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { TcpProxy, Timing } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Ref from "effect/Ref"
import { randomUUID } from "node:crypto"
import type * as Pg from "pg"
import { failureOf, rawClient, rawQuery } from "./utils/fixtures.js"
import {
  awaitLockWaits,
  layerSetUp,
  poolStore,
  resetTable,
  runApplication,
  runTable,
  serverUrl,
  TestDatabase
} from "./utils/TestDatabase.js"

const TABLE = runTable("idem_faults")

const { payload } = Counting

const expectUnavailable = <A, E>(exit: Exit.Exit<A, E>, method = "reserve") => {
  const error = failureOf(exit) as { readonly _tag: string; readonly method?: string }
  assert.strictEqual(error._tag, "StoreUnavailable")
  assert.strictEqual(error.method, method)
}

/** A store (on the test table) over a `pg` pool that connects lazily to `port` on loopback. */
const storeAt = (port: number, applicationName: string) => poolStore({ applicationName, port, store: { table: TABLE } })

const Live = layerSetUp(resetTable({ table: TABLE }))

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("PgIdempotencyStore faults", (it) => {
  it.scoped("a server that resets every connection: StoreUnavailable; the downstream is not called", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const proxy = yield* TcpProxy.make(database)
      yield* proxy.refuse
      const { context } = yield* storeAt(proxy.port, runApplication("idem-faults-refused"))
      const { executions, operation } = yield* Counting.operation("faults")
      const key = randomUUID()
      const run = operation.runDetailed({ key, payload }).pipe(Effect.provide(context))

      expectUnavailable(yield* Effect.exit(run))
      assert.strictEqual(yield* Ref.get(executions), 0)
      const store = IdempotencyStore.IdempotencyStore.pipe(Effect.provide(context))
      const id = IdempotencyRecord.makeRecordId({ operation: operation.name, key: IdempotencyKey.unsafeMake(key) })
      expectUnavailable(yield* Effect.exit(Effect.flatMap(store, (store) => store.get(id))), "get")
      expectUnavailable(yield* Effect.exit(Effect.flatMap(store, (store) => store.purgeExpired())), "purgeExpired")
      expectUnavailable(
        yield* Effect.exit(Effect.flatMap(store, (store) => store.release({ id, token: "t" }))),
        "release"
      )

      // the server accepts connections again: the next attempt proceeds normally
      yield* proxy.resume
      const fresh = yield* run
      assert.isFalse(fresh.replayed)
      assert.strictEqual(fresh.value, 1)
      const replay = yield* run
      assert.isTrue(replay.replayed)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scoped("connections cut while the reservation is in flight: StoreUnavailable, then a normal retry", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const proxy = yield* TcpProxy.make(database)
      const { context } = yield* storeAt(proxy.port, runApplication("idem-faults-cut"))
      const { executions, operation } = yield* Counting.operation("faults")
      const run = (key: string) => operation.runDetailed({ key, payload }).pipe(Effect.provide(context))
      // warm: the pool holds open connections
      yield* run(randomUUID())

      const key = randomUUID()
      yield* proxy.stall()
      const attempt = yield* Effect.fork(Effect.exit(run(key)))
      yield* Timing.eventually(Effect.map(proxy.held, (held) => held.requests > 0), "the attempt reached the proxy")
      yield* proxy.cut
      expectUnavailable(yield* Fiber.join(attempt))
      assert.strictEqual(yield* Ref.get(executions), 1)

      const retry = yield* run(key)
      assert.isFalse(retry.replayed)
      assert.strictEqual(yield* Ref.get(executions), 2)
      assert.isTrue((yield* run(key)).replayed)
    }))

  it.scoped("connections cut during the downstream call: the outcome is still recorded once", () =>
    Effect.gen(function*() {
      const database = yield* TestDatabase
      const proxy = yield* TcpProxy.make(database)
      const { context } = yield* storeAt(proxy.port, runApplication("idem-faults-cut-downstream"))
      yield* StoreFaults.recordedDespite(context, proxy.cut)
    }))

  if (serverUrl !== undefined) {
    const APPLICATION = runApplication("idem-faults-terminated")

    const terminate = (client: Pg.Client) =>
      rawQuery(
        client,
        `SELECT count(pg_terminate_backend(pid))::integer AS terminated FROM pg_stat_activity
         WHERE application_name = $1 AND pid <> pg_backend_pid()`,
        [APPLICATION]
      ).pipe(Effect.map((result) => result.rows[0].terminated as number))

    /** Waits (bounded) until the pool noticed that every terminated backend closed its connection. */
    const awaitPoolDrained = (pool: Pg.Pool) =>
      Timing.eventually(Effect.sync(() => pool.totalCount === 0), "the pool kept a terminated connection")

    it.scoped("pg_terminate_backend while reservations wait: StoreUnavailable, no downstream call, then recovery", () =>
      Effect.gen(function*() {
        const database = yield* TestDatabase
        const admin = yield* rawClient(database.url, runApplication("idem-faults-admin"))
        const { context, pool } = yield* storeAt(database.port, APPLICATION)
        const { executions, operation } = yield* Counting.operation("faults")
        const run = (key: string) => operation.runDetailed({ key, payload }).pipe(Effect.provide(context))
        const keys = Array.from({ length: 10 }, () => randomUUID())
        // hold the table so that every reservation is in flight when its backend is terminated
        yield* rawQuery(admin, "BEGIN")
        yield* rawQuery(admin, `LOCK TABLE "${TABLE}" IN ACCESS EXCLUSIVE MODE`)
        const attempts = yield* Effect.fork(
          Effect.all(keys.map((key) => Effect.exit(run(key))), { concurrency: "unbounded" })
        )
        yield* awaitLockWaits(APPLICATION, { count: keys.length })
        assert.strictEqual(yield* terminate(admin), keys.length)
        const exits = yield* Fiber.join(attempts)
        for (const exit of exits) expectUnavailable(exit)
        assert.strictEqual(yield* Ref.get(executions), 0)
        yield* rawQuery(admin, "ROLLBACK")

        // recovery: the backends are gone and the pool dropped their connections
        yield* awaitPoolDrained(pool)
        const fresh = yield* Effect.forEach(keys, run, { concurrency: 5 })
        assert.isTrue(fresh.every((result) => !result.replayed))
        assert.strictEqual(new Set(fresh.map((result) => result.value)).size, keys.length)
        for (const key of keys) assert.isTrue((yield* run(key)).replayed)
        assert.strictEqual(yield* Ref.get(executions), keys.length)
      }))

    it.scoped("pg_terminate_backend during the downstream call: the completion reconnects and is recorded", () =>
      Effect.gen(function*() {
        const database = yield* TestDatabase
        const admin = yield* rawClient(database.url, runApplication("idem-faults-admin"))
        const { context } = yield* storeAt(database.port, APPLICATION)
        const terminated = yield* Ref.make(0)
        // the completion may meet the dead connection: it fails with StoreUnavailable and is retried
        yield* StoreFaults.recordedDespite(context, Effect.flatMap(terminate(admin), (n) => Ref.set(terminated, n)))
        assert.strictEqual(yield* Ref.get(terminated), 1)
      }))
  }
})
