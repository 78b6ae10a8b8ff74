import type { AttributeValue } from "@aws-sdk/client-dynamodb"
import {
  ProvisionedThroughputExceededException,
  PutItemCommand,
  RequestLimitExceeded,
  ThrottlingException
} from "@aws-sdk/client-dynamodb"
import { Idempotency, IdempotencyRecord, IdempotencyStore } from "@effect-idempotency/core"
import { DynamoDbClient, DynamoDbStore } from "@effect-idempotency/dynamodb"
import { freePort, listen } from "@effect-idempotency/test-support/Servers"
import * as StoreCalls from "@effect-idempotency/test-support/StoreCalls"
import { StoreFixtures, Timing } from "@effect-idempotency/testing"
import { assert, it, layer } from "@effect/vitest"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import { randomUUID } from "node:crypto"
import * as net from "node:net"
import { backends, clientConfig, storeLayer } from "./utils/backends.js"
import { connectionReset, injectFailures, recordRequests, startAtWallClock } from "./utils/requests.js"

const { freshId, reserveRequest } = StoreFixtures

const errorTag = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : undefined

const causeOf = (error: unknown): Record<string, unknown> =>
  typeof error === "object" && error !== null && "cause" in error && typeof error.cause === "object" &&
    error.cause !== null
    ? error.cause as Record<string, unknown>
    : {}

/** An operation that counts its downstream executions. */
const countingOperation = Effect.map(Ref.make(0), (executions) => ({
  executions,
  op: Idempotency.make({
    name: `faults-${randomUUID()}`,
    payload: Schema.Struct({ amount: Schema.Number }),
    success: Schema.Number,
    execute: () => Ref.updateAndGet(executions, (n) => n + 1)
  })
}))

// -------------------------------------------------------------------------------------------------
// an endpoint that refuses connections
// -------------------------------------------------------------------------------------------------

const refused = Layer.unwrapEffect(
  Effect.map(
    freePort,
    (port) =>
      DynamoDbStore.layerWith({ tableName: "unreachable", retrySchedule: Schedule.recurs(2) }).pipe(
        Layer.provideMerge(DynamoDbClient.layer(clientConfig(`http://127.0.0.1:${port}`)))
      )
  )
)

layer(refused)("an endpoint that refuses connections", (it) => {
  it.scoped("every store method fails with StoreUnavailable naming the method, after the retries", () =>
    Effect.gen(function*() {
      const store = yield* IdempotencyStore.IdempotencyStore
      const requests = yield* recordRequests
      const calls = StoreCalls.everyMethod(store, { id: freshId(), token: randomUUID() })
      for (const [method, call] of calls) {
        const error = yield* Effect.flip(call)
        assert.strictEqual(errorTag(error), "StoreUnavailable", method)
        assert.strictEqual((error as { readonly method?: string }).method, method)
        assert.strictEqual(causeOf(error).code, "ECONNREFUSED")
      }
      // one attempt and two retries per call
      assert.strictEqual((yield* requests.take).length, 3 * calls.length)
    }))

  it.effect("through Idempotency: StoreUnavailable, and the downstream is never called", () =>
    Effect.gen(function*() {
      const { executions, op } = yield* countingOperation
      const error = yield* Effect.flip(op.run({ key: randomUUID(), payload: { amount: 1 } }))
      assert.strictEqual(error._tag, "StoreUnavailable")
      assert.strictEqual(yield* Ref.get(executions), 0)
    }))
})

// -------------------------------------------------------------------------------------------------
// throttling, injected by a middleware before requests leave the client
// -------------------------------------------------------------------------------------------------

const $metadata = { httpStatusCode: 400 }
const throttles: ReadonlyArray<readonly [string, () => Error]> = [
  ["ThrottlingException", () => new ThrottlingException({ message: "Throughput exceeds the limit", $metadata })],
  [
    "ProvisionedThroughputExceededException",
    () => new ProvisionedThroughputExceededException({ message: "Throughput exceeds the limit", $metadata })
  ],
  ["RequestLimitExceeded", () => new RequestLimitExceeded({ message: "Throughput exceeds the limit", $metadata })]
]

for (const backend of backends) {
  // three retries without delay: the schedule's sleeps would wait for TestClock
  layer(storeLayer(backend, { retrySchedule: Schedule.recurs(3) }))(`throttling on ${backend.name}`, (it) => {
    for (const [name, error] of throttles) {
      it.scoped(`${name} is retried by the schedule, then StoreUnavailable`, () =>
        Effect.gen(function*() {
          yield* startAtWallClock
          const store = yield* IdempotencyStore.IdempotencyStore
          const injected = yield* injectFailures({ when: () => true, error })
          const failure = yield* Effect.flip(store.reserve(reserveRequest(freshId())))
          assert.strictEqual(failure._tag, "StoreUnavailable")
          assert.strictEqual(causeOf(failure).name, name)
          assert.strictEqual(yield* injected.seen, 4)
        }))
    }

    it.scoped("a request throttled twice succeeds on the third attempt", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const injected = yield* injectFailures({ when: (n) => n <= 2, error: throttles[0]![1] })
        const id = freshId()
        const result = yield* store.reserve(reserveRequest(id))
        assert.strictEqual(result._tag, "Reserved")
        assert.strictEqual(yield* injected.seen, 3)
      }))

    it.scoped("through Idempotency: StoreUnavailable, and the downstream is never called", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        yield* injectFailures({ when: () => true, error: throttles[1]![1] })
        const { executions, op } = yield* countingOperation
        const error = yield* Effect.flip(op.run({ key: randomUUID(), payload: { amount: 1 } }))
        assert.strictEqual(error._tag, "StoreUnavailable")
        assert.strictEqual(yield* Ref.get(executions), 0)
      }))

    it.scoped("a missing table is a StoreError, not retried", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const requests = yield* recordRequests
        const store = yield* DynamoDbStore.make({ tableName: `missing-${randomUUID()}` })
        const error = yield* Effect.flip(store.reserve(reserveRequest(freshId())))
        assert.strictEqual(error._tag, "StoreError")
        assert.strictEqual(causeOf(error).name, "ResourceNotFoundException")
        assert.deepStrictEqual(yield* requests.take, ["PutItem"])
      }))
  })

  layer(storeLayer(backend))(`lost responses on ${backend.name}`, (it) => {
    // the first request of each call is applied by DynamoDB, but its response is lost
    const loseFirstResponse = injectFailures({ when: (n) => n === 1, error: connectionReset, afterSending: true })
    const outcome = IdempotencyRecord.StoredOutcome.Success({ value: "\"done\"" })

    it.scoped("reserve: the retry finds its own reservation and is Reserved", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        yield* loseFirstResponse
        const result = yield* store.reserve(reserveRequest(id))
        assert.strictEqual(result._tag, "Reserved")
        assert.strictEqual(result._tag === "Reserved" ? result.attempt : 0, 1)
      }))

    it.scoped("complete, markFailed, extend and release: the retry recognizes the applied write", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const reserve = (id: IdempotencyRecord.RecordId) =>
          Effect.map(
            store.reserve(reserveRequest(id)),
            (result) => result._tag === "Reserved" ? result.token : assert.fail("expected Reserved")
          )
        const writes: ReadonlyArray<
          readonly [
            string,
            (id: IdempotencyRecord.RecordId, token: string) => Effect.Effect<void, unknown>,
            (record: Option.Option<IdempotencyRecord.IdempotencyRecord>) => boolean
          ]
        > = [
          [
            "complete",
            (id, token) => store.complete({ id, token, outcome, ttl: Duration.hours(1) }),
            (record) => Option.exists(record, (r) => r.status === "COMPLETED")
          ],
          [
            "markFailed",
            (id, token) => store.markFailed({ id, token, ttl: Duration.hours(1) }),
            (record) => Option.exists(record, (r) => r.status === "FAILED")
          ],
          [
            "extend",
            (id, token) => store.extend({ id, token, lease: Duration.hours(2) }),
            (record) => Option.exists(record, (r) => r.status === "IN_PROGRESS" && r.expiresAt === r.leaseUntil)
          ],
          ["release", (id, token) => store.release({ id, token }), Option.isNone]
        ]
        for (const [method, write, check] of writes) {
          const id = freshId()
          const token = yield* reserve(id)
          yield* Effect.scoped(Effect.zipRight(loseFirstResponse, write(id, token)))
          assert.isTrue(check(yield* store.get(id)), method)
        }
      }))

    it.scoped("a second complete of a completed record is still LeaseLost (nothing was lost)", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const id = freshId()
        const reserved = yield* store.reserve(reserveRequest(id))
        if (reserved._tag !== "Reserved") return assert.fail("expected Reserved")
        yield* store.complete({ id, token: reserved.token, outcome, ttl: Duration.hours(1) })
        const again = yield* Effect.flip(store.complete({ id, token: reserved.token, outcome, ttl: Duration.hours(1) }))
        assert.strictEqual(again._tag, "LeaseLost")
      }))

    it.scoped("through Idempotency: every response lost once, the downstream still runs once and replays", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        // every other request: the first attempt of each call is applied, its response lost
        yield* injectFailures({ when: (n) => n % 2 === 1, error: connectionReset, afterSending: true })
        const { executions, op } = yield* countingOperation
        const key = randomUUID()
        const first = yield* op.runDetailed({ key, payload: { amount: 1 } })
        assert.isFalse(first.replayed)
        assert.isTrue(first.recorded)
        const replay = yield* op.runDetailed({ key, payload: { amount: 1 } })
        assert.isTrue(replay.replayed)
        assert.strictEqual(replay.value, first.value)
        assert.strictEqual(yield* Ref.get(executions), 1)
      }))
  })

  const malformedTable = `malformed-${randomUUID()}`
  layer(storeLayer(backend, { tableName: malformedTable }))(`foreign items on ${backend.name}`, (it) => {
    it.effect("an item that is not a record is a StoreError on reserve and get, never a defect", () =>
      Effect.gen(function*() {
        yield* startAtWallClock
        const store = yield* IdempotencyStore.IdempotencyStore
        const { client } = yield* DynamoDbClient.DynamoDbClient
        const now = yield* Clock.currentTimeMillis
        const live = { N: String(now + 3_600_000) }
        // each is met by a reservation whose condition fails (no expires_at, or another fingerprint)
        const items: ReadonlyArray<Record<string, AttributeValue>> = [
          { status: { S: "SOMETHING_ELSE" }, attempt: { N: "1" } },
          {
            status: { S: "COMPLETED" },
            token: { N: "1" },
            fingerprint: { S: "sha256:other" },
            attempt: { N: "1" },
            lease_until: { N: "0" },
            expires_at: live
          },
          {
            status: { S: "IN_PROGRESS" },
            token: { S: "t" },
            fingerprint: { S: "sha256:other" },
            attempt: { S: "one" },
            lease_until: { N: "0" },
            expires_at: live
          },
          {
            status: { S: "COMPLETED" },
            token: { S: "t" },
            fingerprint: { S: "sha256:other" },
            attempt: { N: "1" },
            lease_until: { N: "0" },
            expires_at: live,
            outcome_kind: { BOOL: true }
          }
        ]
        for (const item of items) {
          const id = freshId()
          yield* Effect.promise(() =>
            client.send(new PutItemCommand({ TableName: malformedTable, Item: { id: { S: id.value }, ...item } }))
          )
          const reserve = yield* Effect.flip(store.reserve(reserveRequest(id)))
          assert.strictEqual(reserve._tag, "StoreError", JSON.stringify(item))
          assert.isTrue(ParseResult.isParseError(reserve.cause), JSON.stringify(item))
          const get = yield* Effect.flip(store.get(id))
          assert.strictEqual(get._tag, "StoreError", JSON.stringify(item))
          assert.isTrue(ParseResult.isParseError(get.cause), JSON.stringify(item))
        }
      }))
  })
}

// -------------------------------------------------------------------------------------------------
// the default schedule, timeouts and interruption (on the live clock)
// -------------------------------------------------------------------------------------------------

const backend = backends[0]!

it.scopedLive(`the default throttling schedule is bounded: 5 attempts in about a second (${backend.name})`, () =>
  Effect.gen(function*() {
    const store = yield* IdempotencyStore.IdempotencyStore
    const injected = yield* injectFailures({ when: () => true, error: throttles[0]![1] })
    const start = yield* Clock.currentTimeMillis
    const error = yield* Effect.flip(store.reserve(reserveRequest(freshId())))
    const elapsed = (yield* Clock.currentTimeMillis) - start
    assert.strictEqual(error._tag, "StoreUnavailable")
    assert.strictEqual(yield* injected.seen, 5)
    // 50 + 100 + 200 + 400 ms, jittered by ±20%: at least that, and bounded (the upper bound leaves
    // room for a loaded machine; the count of attempts above is what bounds the retries)
    assert.isAtLeast(elapsed, 500)
    assert.isBelow(elapsed, 10_000)
  }).pipe(Effect.provide(storeLayer(backend, { retrySchedule: DynamoDbStore.defaultRetrySchedule }))))

/** A server that accepts connections and never answers; counts the connections the client closed. */
const silentServer: Effect.Effect<
  { readonly endpoint: string; readonly closed: Effect.Effect<number> },
  never,
  Scope.Scope
> = Effect.gen(function*() {
  const state = { closed: 0 }
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    // read (and drop) the request, so that the client's close is seen
    socket.resume()
    socket.on("close", () => {
      sockets.delete(socket)
      state.closed++
    })
  })
  const port = yield* listen(server, () => sockets.forEach((socket) => socket.destroy()))
  return { endpoint: `http://127.0.0.1:${port}`, closed: Effect.sync(() => state.closed) }
})

/** A store whose client lives for the rest of the scope, on a silent server. */
const silentStore = (options?: Partial<DynamoDbStore.Options>) =>
  Effect.gen(function*() {
    const { closed, endpoint } = yield* silentServer
    const context = yield* Layer.build(
      DynamoDbStore.layerWith({ tableName: "silent", ...options }).pipe(
        Layer.provide(DynamoDbClient.layer(clientConfig(endpoint)))
      )
    )
    return { store: Context.get(context, IdempotencyStore.IdempotencyStore), closed }
  })

it.scopedLive("each attempt that outlives requestTimeout is aborted and retried, then StoreUnavailable", () =>
  Effect.gen(function*() {
    const { closed, store } = yield* silentStore({ requestTimeout: "200 millis", retrySchedule: Schedule.recurs(1) })
    const error = yield* Effect.flip(store.reserve(reserveRequest(freshId())))
    assert.strictEqual(error._tag, "StoreUnavailable")
    assert.isTrue(Cause.isTimeoutException(error.cause))
    yield* Timing.eventually(Effect.map(closed, (n) => n >= 2), "the aborted attempts' connections are open")
    assert.strictEqual(yield* closed, 2)
  }))

it.scopedLive("interrupting a store call aborts its request", () =>
  Effect.gen(function*() {
    const { closed, store } = yield* silentStore()
    const result = yield* store.get(freshId()).pipe(Effect.timeout("200 millis"), Effect.flip)
    assert.isTrue(Cause.isTimeoutException(result))
    yield* Timing.eventually(Effect.map(closed, (n) => n >= 1), "the aborted request's connection is open")
    assert.strictEqual(yield* closed, 1)
  }))
