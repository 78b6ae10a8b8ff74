/**
 * An endpoint that stops answering without closing the connection (no RST, no FIN): a TCP proxy
 * holds the bytes of the client's connections. Each attempt is then aborted at `requestTimeout` (its
 * connection closed) and the call fails with `StoreUnavailable` at `callTimeout`, retries and their
 * waits included; an interrupted call returns at once; and the record is in a state the protocol
 * allows: a call that timed out may have been applied, as a call whose answer was lost.
 */
import type { IdempotencyRecord } from "@effect-idempotency/core"
import { IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore, DynamoDbTable } from "@effect-idempotency/dynamodb"
import * as StoreFaults from "@effect-idempotency/test-support/StoreFaults"
import { StoreFixtures, TcpProxy, Timing } from "@effect-idempotency/testing"
import { assert, describe, it } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { Backend } from "./utils/backends.js"
import { backends, clientConfig, clientLayer, uniqueTableName } from "./utils/backends.js"

const REQUEST_TIMEOUT = Duration.millis(200)
const CALL_TIMEOUT = Duration.millis(700)
/** What a loaded 2-core machine may add to a time limit, at most. */
const SLACK = Duration.seconds(5)

const { freshId, reserveRequest } = StoreFixtures

/** A store on a fresh table, whose client goes through a proxy to the backend. */
const storeThroughProxy = (backend: Backend, options?: Partial<DynamoDbStore.Options>) =>
  Effect.gen(function*() {
    const tableName = uniqueTableName("stall")
    yield* DynamoDbTable.create({ tableName }).pipe(Effect.provide(clientLayer(backend)))
    const endpoint = new URL(backend.endpoint)
    const proxy = yield* TcpProxy.make({ host: endpoint.hostname, port: Number(endpoint.port) })
    const context = yield* Layer.build(
      DynamoDbStore.layerWith({ tableName, requestTimeout: REQUEST_TIMEOUT, callTimeout: CALL_TIMEOUT, ...options })
        .pipe(Layer.provide(DynamoDbClient.layer(clientConfig(`http://127.0.0.1:${proxy.port}`))))
    )
    return { context, proxy, store: Context.get(context, IdempotencyStore.IdempotencyStore) }
  })

/** The call failed with `StoreUnavailable` because its time limit passed, within the limit plus `SLACK`. */
const assertTimedOut = (result: Timing.Timed<unknown, unknown>) =>
  Timing.expectTimedOut(result, { callTimeout: CALL_TIMEOUT, slack: SLACK })

for (const backend of backends) {
  describe(`a stalled endpoint (${backend.name})`, () => {
    it.scopedLive("a call started after the stall fails with StoreUnavailable within callTimeout", () =>
      Effect.gen(function*() {
        const { proxy, store } = yield* storeThroughProxy(backend)
        // the client holds an open connection, which stalls with the rest
        yield* store.get(freshId())
        yield* proxy.stall()

        const request = reserveRequest(freshId())
        assertTimedOut(yield* Timing.timed(store.reserve(request)))
        assertTimedOut(yield* Timing.timed(store.get(freshId())))
        // every attempt was aborted and its connection closed
        yield* Timing.eventually(
          Effect.map(proxy.connections, (n) => n === 0),
          "a connection of an aborted attempt is open"
        )

        // traffic flows again: nothing of the reservation reached DynamoDB
        yield* proxy.resume
        assert.isTrue(Option.isNone(yield* store.get(request.id)))
        assert.strictEqual((yield* store.reserve(request))._tag, "Reserved")
      }))

    it.scopedLive("interrupting a call blocked on the stalled endpoint returns at once and closes its connection", () =>
      Effect.gen(function*() {
        // no time limits: only the interruption ends the wait
        const { proxy, store } = yield* storeThroughProxy(backend, {
          requestTimeout: Duration.infinity,
          callTimeout: Duration.infinity
        })
        yield* store.get(freshId())
        yield* proxy.stall()
        const before = (yield* proxy.held).requests
        const call = yield* Effect.fork(store.reserve(reserveRequest(freshId())))
        yield* Timing.eventually(
          Effect.map(proxy.held, (held) => held.requests > before),
          "no request reached the proxy"
        )

        const exit = yield* Fiber.interrupt(call).pipe(
          Effect.timeoutFail({ duration: SLACK, onTimeout: () => "the interruption waited for the endpoint" })
        )
        assert.isTrue(Exit.isInterrupted(exit))
        yield* Timing.eventually(
          Effect.map(proxy.connections, (n) => n === 0),
          "the aborted request's connection is open"
        )
      }))

    it.scopedLive("answers held after DynamoDB applied the reservation: StoreUnavailable, then the record is there", () =>
      Effect.gen(function*() {
        const { proxy, store } = yield* storeThroughProxy(backend)
        yield* store.get(freshId())
        yield* proxy.stall({ hold: "answers" })

        const request = reserveRequest(freshId())
        assertTimedOut(yield* Timing.timed(store.reserve(request)))

        // the reservation was applied (its answer lost): IN_PROGRESS under its token, attempt 1,
        // blocking other attempts until its lease ends
        yield* proxy.resume
        const record = yield* store.get(request.id)
        assert.isTrue(Option.isSome(record))
        const { attempt, status, token } = (record as Option.Some<IdempotencyRecord.IdempotencyRecord>).value
        assert.deepStrictEqual({ attempt, status, token }, { attempt: 1, status: "IN_PROGRESS", token: request.token })
        // the same attempt retrying recognizes its own reservation; another one meets it in progress
        assert.strictEqual((yield* store.reserve(request))._tag, "Reserved")
        assert.strictEqual((yield* store.reserve(reserveRequest(request.id)))._tag, "Existing")
      }))

    it.scopedLive("a stalled connection next to healthy ones: the retry goes through a new connection", () =>
      Effect.gen(function*() {
        const { proxy, store } = yield* storeThroughProxy(backend, { callTimeout: SLACK })
        // one open connection, idle in the client's agent
        yield* store.get(freshId())
        yield* proxy.stall({ connections: "open" })
        const before = (yield* proxy.held).requests

        const result = yield* Timing.timed(store.reserve(reserveRequest(freshId())))
        assert.isTrue(Exit.isSuccess(result.exit))
        assert.strictEqual(Exit.isSuccess(result.exit) ? result.exit.value._tag : undefined, "Reserved")
        // the first attempt went to the stalled connection and was aborted after requestTimeout
        assert.isAbove((yield* proxy.held).requests, before)
        assert.isAtLeast(result.millis, Duration.toMillis(REQUEST_TIMEOUT))
      }))

    it.scopedLive("through Idempotency: StoreUnavailable, the downstream is never called, and a retry succeeds", () =>
      Effect.flatMap(
        storeThroughProxy(backend),
        (proxied) => StoreFaults.stalledThenRetried(proxied, Duration.sum(CALL_TIMEOUT, SLACK))
      ))
  })
}
