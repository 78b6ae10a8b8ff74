/**
 * A server that stops answering without closing the connection (no RST, no FIN): a TCP proxy holds
 * the bytes of the store's connections. A store call then fails with `StoreUnavailable` once its
 * `callTimeout` has passed, an interrupted call returns at once, no statement is cancelled, and a
 * stalled connection goes back to the pool only once its statement has been answered. The record
 * is then in a state the protocol allows: a call that timed out may have been applied, as a call
 * whose answer was lost.
 */
import { IdempotencyRecord } from "@effect-idempotency/core"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { TcpProxy, Timing } from "@effect-idempotency/testing"
import { assert, layer } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { freshId, reserveRequest } from "./utils/fixtures.js"
import {
  awaitPoolIdle,
  layerSetUp,
  poolStore,
  resetTable,
  runApplication,
  runTable,
  TestDatabase
} from "./utils/TestDatabase.js"

const TABLE = runTable("idem_stall")
const CALL_TIMEOUT = Duration.millis(300)
/** What a loaded 2-core machine may add to a time limit, at most. */
const SLACK = Duration.seconds(5)

const Live = layerSetUp(resetTable({ table: TABLE }))

/** A store through a proxy to the test database, with a short time limit (or none). */
const storeThroughProxy = (callTimeout: Duration.DurationInput = CALL_TIMEOUT) =>
  Effect.gen(function*() {
    const proxy = yield* TcpProxy.make(yield* TestDatabase)
    const store = yield* poolStore({
      applicationName: runApplication("idem-stall"),
      port: proxy.port,
      max: 4,
      store: { table: TABLE, callTimeout }
    })
    return { proxy, ...store }
  })

/** The call failed with `StoreUnavailable` because its time limit passed, within the limit plus `SLACK`. */
const assertTimedOut = (result: Timing.Timed<unknown, unknown>) =>
  Timing.expectTimedOut(result, { callTimeout: CALL_TIMEOUT, slack: SLACK })

layer(Live, { excludeTestServices: true, timeout: "2 minutes" })("PgIdempotencyStore on a stalled server", (it) => {
  it.scoped("a call started after the stall fails with StoreUnavailable within callTimeout", () =>
    Effect.gen(function*() {
      const { counters, pool, proxy, store } = yield* storeThroughProxy()
      // the pool holds an open connection, which stalls with the rest
      yield* store.get(freshId())
      yield* proxy.stall()

      const request = reserveRequest(freshId())
      assertTimedOut(yield* Timing.timed(store.reserve(request)))
      // a call that must open a new connection: the connection never completes its start-up
      const pending = Array.from({ length: 3 }, () => Timing.timed(store.get(freshId())))
      for (const result of yield* Effect.all(pending, { concurrency: "unbounded" })) assertTimedOut(result)
      assert.strictEqual(counters.cancels, 0)

      // the server answers again: the reservation that timed out was applied (its statement was
      // sent, not cut off), as a reservation whose answer was lost; its lease bounds the block
      yield* proxy.resume
      yield* awaitPoolIdle(pool)
      assert.strictEqual(pool.idleCount, pool.totalCount)
      const record = yield* store.get(request.id)
      assert.isTrue(Option.isSome(record))
      const { status, token } = (record as Option.Some<IdempotencyRecord.IdempotencyRecord>).value
      assert.deepStrictEqual({ status, token }, { status: "IN_PROGRESS", token: request.token })
      const retry = yield* store.reserve(reserveRequest(request.id))
      assert.strictEqual(retry._tag, "Existing")
      assert.strictEqual(counters.busyCheckouts, 0)
    }))

  it.scoped("through Idempotency: StoreUnavailable, the downstream is never called, and a retry succeeds", () =>
    Effect.flatMap(
      storeThroughProxy(),
      (proxied) => StoreFaults.stalledThenRetried(proxied, Duration.sum(CALL_TIMEOUT, SLACK))
    ))

  it.scoped("interrupting a call blocked on the stalled server returns at once; nothing is cancelled", () =>
    Effect.gen(function*() {
      // no time limit: only the interruption ends the wait
      const { counters, pool, proxy, store } = yield* storeThroughProxy(Duration.infinity)
      yield* store.get(freshId())
      yield* proxy.stall()
      const before = (yield* proxy.held).requests
      const request = reserveRequest(freshId())
      const call = yield* Effect.fork(store.reserve(request))
      yield* Timing.eventually(
        Effect.map(proxy.held, (held) => held.requests > before),
        "no request reached the stalled proxy"
      )

      const exit = yield* Fiber.interrupt(call).pipe(
        Effect.timeoutFail({ duration: SLACK, onTimeout: () => "the interruption waited for the server" })
      )
      assert.isTrue(Exit.isInterrupted(exit))
      assert.strictEqual(counters.cancels, 0)
      // the statement is still in flight: its connection is not back in the pool
      assert.isBelow(pool.idleCount, pool.totalCount)

      yield* proxy.resume
      yield* awaitPoolIdle(pool)
      assert.strictEqual(pool.idleCount, pool.totalCount)
      const record = yield* store.get(request.id)
      assert.isTrue(Option.exists(record, (record) => record.token === request.token))
      assert.strictEqual(counters.busyCheckouts, 0)
    }))

  it.scoped("one stalled connection among healthy ones: only its call fails; it rejoins the pool once answered", () =>
    Effect.gen(function*() {
      const { counters, pool, proxy, store } = yield* storeThroughProxy()
      // one open connection, idle in the pool
      yield* store.get(freshId())
      assert.strictEqual(pool.totalCount, 1)
      // it stops answering; connections opened later are healthy
      yield* proxy.stall({ connections: "open" })

      const stalled = reserveRequest(freshId())
      assertTimedOut(yield* Timing.timed(store.reserve(stalled)))
      // the stalled connection stays checked out by its statement: later calls get healthy ones
      const ids = Array.from({ length: 8 }, () => freshId())
      for (const id of ids) {
        const request = reserveRequest(id)
        assert.strictEqual((yield* store.reserve(request))._tag, "Reserved")
        yield* store.complete({
          id,
          token: request.token,
          outcome: IdempotencyRecord.StoredOutcome.Success({ value: "1" }),
          ttl: Duration.hours(1)
        })
      }
      assert.isBelow(pool.idleCount, pool.totalCount)

      yield* proxy.resume
      yield* awaitPoolIdle(pool)
      assert.strictEqual(pool.idleCount, pool.totalCount)
      // every connection, the one that stalled too, serves later calls
      yield* Effect.forEach(ids, (id) => store.get(id), { concurrency: 4 })
      const record = yield* store.get(stalled.id)
      assert.isTrue(
        Option.exists(record, (record) => record.status === "IN_PROGRESS" && record.token === stalled.token)
      )
      assert.strictEqual(counters.busyCheckouts, 0)
      assert.strictEqual(counters.cancels, 0)
    }))

  it.scoped("answers held after the server applied a completion: StoreUnavailable, then the record is COMPLETED", () =>
    Effect.gen(function*() {
      const { pool, proxy, store } = yield* storeThroughProxy()
      const request = reserveRequest(freshId())
      assert.strictEqual((yield* store.reserve(request))._tag, "Reserved")
      yield* proxy.stall({ hold: "answers" })
      const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "42" })
      assertTimedOut(
        yield* Timing.timed(store.complete({ id: request.id, token: request.token, outcome, ttl: Duration.hours(1) }))
      )

      yield* proxy.resume
      yield* awaitPoolIdle(pool)
      const record = yield* store.get(request.id)
      assert.isTrue(Option.isSome(record))
      const completed = (record as Option.Some<IdempotencyRecord.IdempotencyRecord>).value
      assert.strictEqual(completed.status, "COMPLETED")
      assert.deepStrictEqual(completed.outcome, outcome)
      // the retry of the completion by the same attempt finds the record completed: LeaseLost
      const again = yield* Effect.flip(
        store.complete({ id: request.id, token: request.token, outcome, ttl: Duration.hours(1) })
      )
      assert.strictEqual(again._tag, "LeaseLost")
      const replay = yield* store.reserve(reserveRequest(request.id))
      assert.strictEqual(replay._tag, "Existing")
    }))
})
