import {
  IdempotencyContext,
  IdempotencyError,
  IdempotencyKey,
  IdempotencyRecord,
  IdempotencyStore
} from "@effect-idempotency/core"
import { HttpIdempotency } from "@effect-idempotency/http"
import {
  FunctionResponse,
  Invocation,
  KeySource,
  NetlifyError,
  NetlifyFunction,
  TimeLimit
} from "@effect-idempotency/netlify"
import * as KitStores from "@effect-idempotency/test-support/KitStores"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

const Order = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })
type Order = typeof Order.Type
const order: Order = { sku: "A-1", quantity: 2 }

type Method = "reserve" | "complete" | "release" | "get"
type Fault = "unavailable" | "error" | "leaseLost"

/** The memory store with methods that can be made to fail, and a count of calls. */
const controllableStore = Effect.gen(function*() {
  const faults = yield* Ref.make<ReadonlyMap<Method, Fault>>(new Map())
  const calls = yield* Ref.make(0)
  const base = yield* IdempotencyStore.makeMemory({ warn: false })
  const guard = <A, E>(method: Method, effect: Effect.Effect<A, E>) =>
    Effect.zipRight(
      Ref.update(calls, (n) => n + 1),
      Effect.flatMap(Ref.get(faults), (map): Effect.Effect<A, E | IdempotencyError.LeaseLost | any> => {
        switch (map.get(method)) {
          case "unavailable":
            return Effect.fail(
              new IdempotencyError.StoreUnavailable({ method, cause: new Error("connection refused") })
            )
          case "error":
            return Effect.fail(new IdempotencyError.StoreError({ method, cause: new Error("relation does not exist") }))
          case "leaseLost":
            return Effect.fail(new IdempotencyError.LeaseLost({ method: "complete", recordId: method }))
          default:
            return effect
        }
      })
    )
  const store = KitStores.around(base, (method, call) => guard(method as Method, call), [
    "markFailed",
    "extend",
    "purgeExpired"
  ])
  return {
    layer: Layer.succeed(IdempotencyStore.IdempotencyStore, store),
    store,
    calls,
    fail: (method: Method, fault: Fault) => Ref.update(faults, (map) => new Map([...map, [method, fault]]))
  }
})

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: string
}

const invoke = (
  handler: NetlifyFunction.Handler,
  init: {
    readonly key?: string | undefined
    readonly body?: string | undefined
    readonly headers?: Record<string, string> | undefined
    readonly signal?: AbortSignal | undefined
  } = {}
): Effect.Effect<Reply> =>
  Effect.promise(() =>
    handler(
      new Request("http://127.0.0.1/.netlify/functions/orders", {
        method: "POST",
        headers: { ...(init.key === undefined ? {} : { "Idempotency-Key": init.key }), ...init.headers },
        body: init.body ?? JSON.stringify(order),
        ...(init.signal === undefined ? {} : { signal: init.signal })
      }),
      { requestId: "01HNETLIFYREQ" }
    ).then(async (response) => ({ status: response.status, headers: response.headers, body: await response.text() }))
  )

/** A handler released at the end of the test. */
const acquire = (handler: NetlifyFunction.Handler) =>
  Effect.acquireRelease(Effect.succeed(handler), (h) => Effect.promise(() => h.dispose()))

/** An order function whose handler counts its executions. */
const orderFunction = (
  layer: Layer.Layer<IdempotencyStore.IdempotencyStore>,
  options: Partial<NetlifyFunction.IdempotentOptions<Order, any, unknown, never, never>> & {
    readonly behaviour?: (n: number) => Effect.Effect<FunctionResponse.FunctionResponse, unknown>
  } = {}
) =>
  Effect.gen(function*() {
    const executions = yield* Ref.make(0)
    const behaviour = options.behaviour ??
      ((n: number) =>
        Effect.succeed(
          FunctionResponse.json({ orderId: `order-${n}` }, {
            status: 201,
            headers: { location: `/orders/order-${n}`, "set-cookie": "session=abc", "x-trace": "t-1" }
          })
        ))
    const handler = yield* acquire(NetlifyFunction.idempotent({
      name: "create-order",
      layer,
      payload: Order,
      ...options,
      handler: () => Effect.flatMap(Ref.updateAndGet(executions, (n) => n + 1), behaviour)
    }))
    return { handler, executions }
  })

/** The controllable store and an order function on it. */
const orderWorld = (options?: Parameters<typeof orderFunction>[1]) =>
  Effect.flatMap(
    controllableStore,
    (store) => Effect.map(orderFunction(store.layer, options), (fn) => ({ ...store, ...fn }))
  )

/** A test of requests refused before the store: neither the store nor the handler is reached. */
const refusedBeforeTheStore = (title: string, body: (handler: NetlifyFunction.Handler) => Effect.Effect<void>) =>
  it.scopedLive(title, () =>
    Effect.gen(function*() {
      const { calls, executions, handler } = yield* orderWorld()
      yield* body(handler)
      assert.strictEqual(yield* Ref.get(calls), 0)
      assert.strictEqual(yield* Ref.get(executions), 0)
    }))

const problemOf = (reply: Reply) => JSON.parse(reply.body) as { status: number; title: string; detail: string }

describe("NetlifyFunction.idempotent", () => {
  it.scopedLive("executes once and replays the original status and body with Idempotent-Replayed", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld()
      const first = yield* invoke(handler, { key: "key-replay-1" })
      assert.strictEqual(first.status, 201)
      assert.deepStrictEqual(JSON.parse(first.body), { orderId: "order-1" })
      assert.isNull(first.headers.get("idempotent-replayed"))
      // the fresh response carries every header the handler set
      assert.strictEqual(first.headers.get("set-cookie"), "session=abc")
      assert.strictEqual(first.headers.get("x-trace"), "t-1")

      const second = yield* invoke(handler, { key: "key-replay-1" })
      const third = yield* invoke(handler, { key: "\"key-replay-1\"" })
      for (const replay of [second, third]) {
        assert.strictEqual(replay.status, 201)
        assert.strictEqual(replay.body, first.body)
        assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(replay.headers.get("content-type"), "application/json")
        assert.strictEqual(replay.headers.get("location"), "/orders/order-1")
        // the record keeps the selected headers only
        assert.isNull(replay.headers.get("set-cookie"))
        assert.isNull(replay.headers.get("x-trace"))
      }
      assert.strictEqual(yield* Ref.get(executions), 1)

      const other = yield* invoke(handler, { key: "key-replay-2" })
      assert.deepStrictEqual(JSON.parse(other.body), { orderId: "order-2" })
    }))

  it.scopedLive("stores a 4xx response like any other and replays it", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld({
        behaviour: () => Effect.succeed(FunctionResponse.json({ error: "out of stock" }, { status: 409 }))
      })
      const first = yield* invoke(handler, { key: "key-rejected" })
      const second = yield* invoke(handler, { key: "key-rejected" })
      assert.strictEqual(first.status, 409)
      assert.strictEqual(second.status, 409)
      assert.strictEqual(second.body, first.body)
      assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  refusedBeforeTheStore(
    "400 without a key where the route requires one; the store is not touched",
    (handler) =>
      Effect.gen(function*() {
        const reply = yield* invoke(handler)
        assert.strictEqual(reply.status, 400)
        assert.strictEqual(reply.headers.get("content-type"), "application/problem+json")
        assert.include(problemOf(reply).detail, "Idempotency-Key")
      })
  )

  refusedBeforeTheStore("400 for an invalid key; the store is not touched", (handler) =>
    Effect.gen(function*() {
      for (const key of ["has space", "has#hash", "x".repeat(256), "\"unterminated"]) {
        const reply = yield* invoke(handler, { key })
        assert.strictEqual(reply.status, 400, key)
        assert.include(problemOf(reply).detail, "Invalid idempotency key")
      }
    }))

  refusedBeforeTheStore(
    "400 for a body that is not JSON or not the payload; the store is not touched",
    (handler) =>
      Effect.gen(function*() {
        const notJson = yield* invoke(handler, { key: "key-body", body: "sku=A-1" })
        const wrongShape = yield* invoke(handler, { key: "key-body", body: JSON.stringify({ sku: 1 }) })
        assert.strictEqual(notJson.status, 400)
        assert.include(problemOf(notJson).detail, "not JSON")
        assert.strictEqual(wrongShape.status, 400)
        assert.include(problemOf(wrongShape).detail, "sku")
      })
  )

  it.scopedLive("payload errors are bounded and never echo the body: 413 past the size limit, 400 below it", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* controllableStore
      const secret = "sk_live_" + "x".repeat(64)
      // 6 MB of the wrong shape, with a secret in it
      const big = JSON.stringify({ sku: 1, quantity: "two", token: secret, padding: "p".repeat(6 * 1024 * 1024) })
      const { executions, handler } = yield* orderFunction(layer)
      const tooLarge = yield* invoke(handler, { key: "key-big", body: big })
      assert.strictEqual(tooLarge.status, 413)
      assert.isBelow(tooLarge.body.length, 300)
      assert.notInclude(tooLarge.body, "sk_live")

      const generous = yield* orderFunction(layer, { maxBodyBytes: 8 * 1024 * 1024 })
      const wrongShape = yield* invoke(generous.handler, { key: "key-big", body: big })
      assert.strictEqual(wrongShape.status, 400)
      assert.isBelow(wrongShape.body.length, 500)
      assert.notInclude(wrongShape.body, "sk_live")
      assert.notInclude(wrongShape.body, "ppp")
      assert.include(problemOf(wrongShape).detail, "[\"sku\"]")

      // 5,000 levels deep in 10 kB: a 400, not a stack overflow in error formatting
      const deep = "{\"sku\":" + "[".repeat(5000) + "]".repeat(5000) + ",\"quantity\":1}"
      const deepReply = yield* invoke(handler, { key: "key-deep", body: deep })
      assert.strictEqual(deepReply.status, 400)
      assert.isBelow(deepReply.body.length, 500)

      assert.strictEqual(yield* Ref.get(calls), 0)
      assert.strictEqual((yield* Ref.get(executions)) + (yield* Ref.get(generous.executions)), 0)
    }))

  it.scopedLive("a 5xx of the handler is not recorded: the record is released and a retry runs again", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld({
        behaviour: (n) =>
          Effect.succeed(
            n === 1 ? FunctionResponse.problem(503, "the payments API is down") : FunctionResponse.json({ n }, {
              status: 201
            })
          )
      })
      const first = yield* invoke(handler, { key: "key-503" })
      assert.strictEqual(first.status, 503)
      const retry = yield* invoke(handler, { key: "key-503" })
      assert.strictEqual(retry.status, 201)
      assert.isNull(retry.headers.get("Idempotent-Replayed"))
      const replay = yield* invoke(handler, { key: "key-503" })
      assert.deepStrictEqual([replay.status, replay.headers.get("Idempotent-Replayed")], [201, "true"])
      assert.strictEqual(yield* Ref.get(executions), 2)
    }))

  it.scopedLive("a response policy may record a 5xx, which then replays", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld({
        record: () => true,
        behaviour: () => Effect.succeed(FunctionResponse.problem(503, "down"))
      })
      yield* invoke(handler, { key: "key-503-kept" })
      const replay = yield* invoke(handler, { key: "key-503-kept" })
      assert.deepStrictEqual([replay.status, replay.headers.get("Idempotent-Replayed")], [503, "true"])
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scopedLive("409 with Retry-After while another attempt holds the key", () =>
    Effect.gen(function*() {
      // the handler holds the key from `started` until `release`
      const { release, started } = yield* Effect.all({ started: Deferred.make<void>(), release: Deferred.make<void>() })
      const { executions, handler } = yield* orderWorld({
        timeLimit: "10 seconds",
        behaviour: (n) =>
          Deferred.succeed(started, undefined).pipe(
            Effect.zipRight(Deferred.await(release)),
            Effect.as(FunctionResponse.json({ orderId: `order-${n}` }, { status: 201 }))
          )
      })
      const first = yield* Effect.fork(invoke(handler, { key: "key-busy" }))
      yield* Deferred.await(started)
      const conflict = yield* invoke(handler, { key: "key-busy" })
      assert.strictEqual(conflict.status, 409)
      // the lease is the 10 s time limit; the retry is told to come back when a response is likely:
      // the lease left, at most `retryAfter` (1 second by default)
      assert.strictEqual(conflict.headers.get("retry-after"), "1")
      assert.strictEqual(problemOf(conflict).title, "Conflict")
      yield* Deferred.succeed(release, undefined)
      const done = yield* Fiber.join(first)
      assert.strictEqual(done.status, 201)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scopedLive("422 when the key comes back with another body", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld()
      yield* invoke(handler, { key: "key-reused" })
      const reused = yield* invoke(handler, { key: "key-reused", body: JSON.stringify({ sku: "B-2", quantity: 1 }) })
      assert.strictEqual(reused.status, 422)
      assert.strictEqual(problemOf(reused).title, "Unprocessable Content")
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scopedLive("the fingerprint is the decoded payload's: members in another order and other whitespace replay", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld()
      const first = yield* invoke(handler, { key: "key-order", body: JSON.stringify({ sku: "A-1", quantity: 2 }) })
      const reordered = yield* invoke(handler, { key: "key-order", body: "{ \"quantity\": 2,\n  \"sku\": \"A-1\" }" })
      assert.strictEqual(first.status, 201)
      assert.strictEqual(reordered.status, 201)
      assert.strictEqual(reordered.headers.get("idempotent-replayed"), "true")
      const other = yield* invoke(handler, { key: "key-order", body: JSON.stringify({ quantity: 3, sku: "A-1" }) })
      assert.strictEqual(other.status, 422)
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scopedLive("504 before the time limit when the handler is slower than the limit less the margin", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld({
        timeLimit: "600 millis",
        margin: "200 millis",
        onTimeout: "markUnknown",
        behaviour: () => Effect.as(Effect.sleep("5 seconds"), FunctionResponse.empty())
      })
      const [elapsed, first] = yield* Effect.timed(invoke(handler, { key: "key-slow" }))
      assert.strictEqual(first.status, 504)
      assert.isNull(first.headers.get("idempotent-replayed"))
      // the downstream timeout is the limit less the margin: never before it, and the 504 comes from
      // that deadline, not from the handler's 5 s (how close to the cut-off a loaded machine answers is
      // the end-to-end StalledStore test's business)
      const millis = Duration.toMillis(elapsed)
      assert.isTrue(millis >= 380 && millis < 5_000, `${millis} ms`)
      // markUnknown recorded the timeout: the retry gets it back without running the handler
      const retry = yield* invoke(handler, { key: "key-slow" })
      assert.strictEqual(retry.status, 504)
      assert.strictEqual(retry.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* Ref.get(executions), 1)
    }))

  it.scopedLive("keepLease: 409 until the lease (the time limit) ends, then a retry takes over", () =>
    Effect.gen(function*() {
      const { executions, handler } = yield* orderWorld({
        timeLimit: "400 millis",
        margin: "100 millis",
        behaviour: (n) =>
          n === 1
            ? Effect.as(Effect.sleep("5 seconds"), FunctionResponse.empty())
            : Effect.succeed(FunctionResponse.json({ orderId: `order-${n}` }, { status: 201 }))
      })
      const first = yield* invoke(handler, { key: "key-lease" })
      assert.strictEqual(first.status, 504)
      const during = yield* invoke(handler, { key: "key-lease" })
      assert.strictEqual(during.status, 409)
      assert.isNotNull(during.headers.get("retry-after"))
      // the core lease is at least timeout + 1 s: wait it out
      yield* Effect.sleep("1400 millis")
      const after = yield* invoke(handler, { key: "key-lease" })
      assert.strictEqual(after.status, 201)
      assert.strictEqual(yield* Ref.get(executions), 2)
    }))

  it.scopedLive("503 when the store is unavailable or fails; the handler is not called", () =>
    Effect.gen(function*() {
      const unavailable = yield* controllableStore
      yield* unavailable.fail("reserve", "unavailable")
      const a = yield* orderFunction(unavailable.layer)
      const replyA = yield* invoke(a.handler, { key: "key-down" })
      assert.strictEqual(replyA.status, 503)
      assert.include(problemOf(replyA).detail, "unavailable")
      assert.strictEqual(yield* Ref.get(a.executions), 0)

      const broken = yield* controllableStore
      yield* broken.fail("reserve", "error")
      const b = yield* orderFunction(broken.layer)
      const replyB = yield* invoke(b.handler, { key: "key-broken" })
      assert.strictEqual(replyB.status, 503)
      assert.strictEqual(yield* Ref.get(b.executions), 0)
    }))

  it.scopedLive("503 when the failure policy cannot be applied (CleanupFailed)", () =>
    Effect.gen(function*() {
      const { fail, layer } = yield* controllableStore
      yield* fail("release", "unavailable")
      const { handler } = yield* orderFunction(layer, { behaviour: () => Effect.fail("boom") })
      const reply = yield* invoke(handler, { key: "key-cleanup" })
      assert.strictEqual(reply.status, 503)
      assert.include(problemOf(reply).detail, "could not be recorded")
    }))

  it.scopedLive("409 when the attempt lost its lease before recording (LeaseLost)", () =>
    Effect.gen(function*() {
      const { fail, layer } = yield* controllableStore
      yield* fail("complete", "leaseLost")
      const { handler } = yield* orderFunction(layer)
      const reply = yield* invoke(handler, { key: "key-lost" })
      assert.strictEqual(reply.status, 409)
      assert.include(problemOf(reply).detail, "Lease lost")
    }))

  it.scopedLive("500 when the stored outcome no longer decodes, without showing it", () =>
    Effect.gen(function*() {
      const { layer, store } = yield* controllableStore
      const id = IdempotencyRecord.makeRecordId({
        operation: "create-order",
        key: IdempotencyKey.unsafeMake("key-stale")
      })
      // the fingerprint of the request the test sends: its method, path and decoded payload
      const fingerprint = yield* HttpIdempotency.fingerprint({
        method: "POST",
        path: "/.netlify/functions/orders",
        body: new TextEncoder().encode(JSON.stringify(order)),
        payload: order
      })
      const token = "t-stale"
      yield* store.reserve({
        id,
        token,
        fingerprint,
        lease: Duration.seconds(10),
        ttl: Duration.hours(1),
        takeover: true
      })
      yield* store.complete({
        id,
        token,
        ttl: Duration.hours(1),
        outcome: IdempotencyRecord.StoredOutcome.Success({ value: JSON.stringify({ status: "ok", secret: "s3cr3t" }) })
      })
      const { executions, handler } = yield* orderFunction(layer)
      const reply = yield* invoke(handler, { key: "key-stale" })
      assert.strictEqual(reply.status, 500)
      assert.notInclude(reply.body, "s3cr3t")
      assert.strictEqual(yield* Ref.get(executions), 0)
    }))

  it.scopedLive("a failing handler answers 500 (or onError's response) and is released for the retry", () =>
    Effect.gen(function*() {
      const { executions, handler, layer } = yield* orderWorld({
        behaviour: (n) =>
          n === 1 ? Effect.fail("downstream refused") : Effect.succeed(FunctionResponse.json({ n }, { status: 201 }))
      })
      const first = yield* invoke(handler, { key: "key-fails" })
      assert.strictEqual(first.status, 500)
      assert.notInclude(first.body, "downstream refused")
      const retry = yield* invoke(handler, { key: "key-fails" })
      assert.strictEqual(retry.status, 201)
      assert.strictEqual(yield* Ref.get(executions), 2)

      const mapped = yield* orderFunction(layer, {
        onError: (error) => FunctionResponse.json({ error: String(error) }, { status: 502 }),
        behaviour: () => Effect.fail("bad gateway")
      })
      const reply = yield* invoke(mapped.handler, { key: "key-mapped" })
      assert.strictEqual(reply.status, 502)
      assert.deepStrictEqual(JSON.parse(reply.body), { error: "bad gateway" })
    }))

  it.scopedLive("a handler that dies gets the defect policy: the timeout policy by default, onDefect when set", () =>
    Effect.gen(function*() {
      const { layer } = yield* controllableStore
      const dying = (n: number) =>
        n === 1 ? Effect.dieMessage("crashed") : Effect.succeed(FunctionResponse.json({ n }, { status: 201 }))
      // by default (keepLease): it may have written, so a retry waits for the lease
      const kept = yield* orderFunction(layer, { behaviour: dying })
      assert.strictEqual((yield* invoke(kept.handler, { key: "key-died" })).status, 500)
      assert.strictEqual((yield* invoke(kept.handler, { key: "key-died" })).status, 409)
      assert.strictEqual(yield* Ref.get(kept.executions), 1)
      // released: the retry runs it again at once
      const released = yield* orderFunction(layer, { onDefect: "release", behaviour: dying })
      assert.strictEqual((yield* invoke(released.handler, { key: "key-died-released" })).status, 500)
      assert.strictEqual((yield* invoke(released.handler, { key: "key-died-released" })).status, 201)
      assert.strictEqual(yield* Ref.get(released.executions), 2)
    }))

  it.scopedLive("a key derived from the event replays without any header", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* controllableStore
      const Event = Schema.Struct({ payload: Schema.Struct({ id: Schema.optional(Schema.String) }) })
      const executions = yield* Ref.make(0)
      const handler = yield* acquire(NetlifyFunction.idempotent({
        name: "submission-created",
        layer,
        payload: Event,
        timeLimit: TimeLimit.background,
        key: KeySource.derive<typeof Event.Type>((event) => event.payload.id, {
          description: "the event's payload.id"
        }),
        handler: (event) =>
          Effect.as(Ref.update(executions, (n) => n + 1), FunctionResponse.json({ handled: event.payload.id }))
      }))
      const body = JSON.stringify({ payload: { id: "evt_123" } })
      const first = yield* invoke(handler, { body })
      const second = yield* invoke(handler, { body })
      assert.strictEqual(first.status, 200)
      assert.strictEqual(second.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* Ref.get(executions), 1)

      const callsBefore = yield* Ref.get(calls)
      const missing = yield* invoke(handler, { body: JSON.stringify({ payload: {} }) })
      assert.strictEqual(missing.status, 400)
      assert.include(problemOf(missing).detail, "payload.id")
      assert.strictEqual(yield* Ref.get(calls), callsBefore)
    }))

  it.scopedLive("a key function derives the key from the payload (scoped per tenant)", () =>
    Effect.gen(function*() {
      const { layer } = yield* controllableStore
      const Job = Schema.Struct({ jobId: Schema.String, tenant: Schema.String })
      const executions = yield* Ref.make(0)
      const handler = yield* acquire(NetlifyFunction.idempotent({
        name: "nightly-job",
        layer,
        payload: Job,
        key: (job) => job.jobId,
        scope: (job) => job.tenant,
        handler: (job) => Effect.as(Ref.update(executions, (n) => n + 1), FunctionResponse.json(job))
      }))
      const a = JSON.stringify({ jobId: "job-1", tenant: "a" })
      const b = JSON.stringify({ jobId: "job-1", tenant: "b" })
      yield* invoke(handler, { body: a })
      const replay = yield* invoke(handler, { body: a })
      const otherTenant = yield* invoke(handler, { body: b })
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
      assert.isNull(otherTenant.headers.get("idempotent-replayed"))
      assert.strictEqual(yield* Ref.get(executions), 2)
    }))

  it.scopedLive("an optional key: without one the handler runs every time, outside any operation", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* controllableStore
      const contexts = yield* Ref.make<ReadonlyArray<boolean>>([])
      const handler = yield* acquire(NetlifyFunction.idempotent({
        name: "optional",
        layer,
        payload: Order,
        key: KeySource.header({ required: false }).pipe(
          KeySource.orElse(KeySource.derive<Order>(() => undefined, { required: false }))
        ),
        handler: () =>
          Effect.flatMap(
            IdempotencyContext.current,
            (context) =>
              Effect.as(Ref.update(contexts, (all) => [...all, Option.isSome(context)]), FunctionResponse.empty())
          )
      }))
      assert.strictEqual((yield* invoke(handler)).status, 204)
      assert.strictEqual((yield* invoke(handler)).status, 204)
      assert.strictEqual(yield* Ref.get(calls), 0)
      const keyed = yield* invoke(handler, { key: "key-optional" })
      const replay = yield* invoke(handler, { key: "key-optional" })
      assert.strictEqual(keyed.status, 204)
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
      assert.deepStrictEqual(yield* Ref.get(contexts), [false, false, true])
    }))

  it.scopedLive("a method that is not covered runs the handler without a key and without the store", () =>
    Effect.gen(function*() {
      const { calls, executions, handler } = yield* orderWorld({ methods: ["POST"] })
      const patch = (key?: string) =>
        Effect.promise(() =>
          handler(
            new Request("http://127.0.0.1/.netlify/functions/orders", {
              method: "PATCH",
              headers: key === undefined ? {} : { "Idempotency-Key": key },
              body: JSON.stringify(order)
            }),
            {}
          )
        )
      assert.strictEqual((yield* patch()).status, 201)
      assert.strictEqual((yield* patch("key-patch")).status, 201)
      assert.strictEqual(yield* Ref.get(executions), 2)
      assert.strictEqual(yield* Ref.get(calls), 0)
    }))

  it.scopedLive("503 when too little time is left for the downstream and the margin", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* controllableStore
      // the layer's build (a cold start) takes longer than the limit less the margin
      const slowLayer = Layer.effectDiscard(Effect.sleep("300 millis")).pipe(Layer.provideMerge(layer))
      const { executions, handler } = yield* orderFunction(slowLayer, { timeLimit: "400 millis", margin: "200 millis" })
      const reply = yield* invoke(handler, { key: "key-late" })
      assert.strictEqual(reply.status, 503)
      assert.include(problemOf(reply).detail, "margin")
      assert.strictEqual(yield* Ref.get(calls), 0)
      assert.strictEqual(yield* Ref.get(executions), 0)
      // warm now: the next invocation has its whole limit
      assert.strictEqual((yield* invoke(handler, { key: "key-late" })).status, 201)
    }))
})

describe("NetlifyFunction runtime", () => {
  it.scopedLive("builds the layer once per warm instance and releases it on dispose", () =>
    Effect.gen(function*() {
      const builds = yield* Ref.make(0)
      const releases = yield* Ref.make(0)
      const counted = Layer.scopedDiscard(
        Effect.acquireRelease(Ref.update(builds, (n) => n + 1), () => Ref.update(releases, (n) => n + 1))
      )
      const handler = NetlifyFunction.make({
        layer: counted,
        handler: Effect.succeed(FunctionResponse.text("ok"))
      })
      const replies = yield* Effect.all([invoke(handler), invoke(handler), invoke(handler)], { concurrency: 3 })
      assert.deepStrictEqual(replies.map((reply) => reply.body), ["ok", "ok", "ok"])
      yield* invoke(handler)
      assert.strictEqual(yield* Ref.get(builds), 1)
      yield* Effect.promise(() => handler.dispose())
      assert.strictEqual(yield* Ref.get(releases), 1)
    }))

  it.scopedLive("503 when the layer cannot be built; the next invocation builds it again", () =>
    Effect.gen(function*() {
      const attempts = yield* Ref.make(0)
      const flaky = Layer.effectDiscard(
        Effect.flatMap(
          Ref.updateAndGet(attempts, (n) => n + 1),
          (n) => n === 1 ? Effect.fail(new Error("ECONNREFUSED 127.0.0.1:5432")) : Effect.void
        )
      )
      const handler = yield* acquire(NetlifyFunction.make({
        layer: flaky,
        handler: Effect.succeed(FunctionResponse.text("ok"))
      }))
      const first = yield* invoke(handler)
      assert.strictEqual(first.status, 503)
      assert.notInclude(first.body, "ECONNREFUSED")
      const second = yield* invoke(handler)
      assert.strictEqual(second.status, 200)
      assert.strictEqual(yield* Ref.get(attempts), 2)
    }))

  it.scopedLive("the handler reads the request and the remaining time from Invocation", () =>
    Effect.gen(function*() {
      const handler = yield* acquire(NetlifyFunction.make({
        layer: Layer.empty,
        timeLimit: TimeLimit.synchronousMax,
        handler: Effect.gen(function*() {
          const request = yield* Invocation.request
          const body = yield* Invocation.text
          const remaining = yield* Invocation.remaining
          return FunctionResponse.json({
            method: request.method,
            body,
            remaining: Duration.toMillis(remaining)
          })
        })
      }))
      const reply = yield* invoke(handler, { body: "hello" })
      const json = JSON.parse(reply.body) as { method: string; body: string; remaining: number }
      assert.strictEqual(json.method, "POST")
      assert.strictEqual(json.body, "hello")
      assert.isTrue(json.remaining > 25_000 && json.remaining <= 26_000, String(json.remaining))
    }))

  it.scopedLive("an abort interrupts the handler only with interruptOnAbort", () =>
    Effect.gen(function*() {
      const { layer } = yield* controllableStore
      const finished = yield* Ref.make<ReadonlyArray<string>>([])
      const make = (name: string, interruptOnAbort: boolean) =>
        acquire(NetlifyFunction.idempotent({
          name,
          layer,
          payload: Order,
          interruptOnAbort,
          handler: () =>
            Effect.sleep("300 millis").pipe(
              Effect.zipRight(Ref.update(finished, (all) => [...all, name])),
              Effect.as(FunctionResponse.json({ name }, { status: 201 }))
            )
        }))
      for (const [name, interrupt] of [["killed", true], ["kept", false]] as const) {
        const handler = yield* make(name, interrupt)
        const controller = new AbortController()
        const fiber = yield* Effect.fork(invoke(handler, { key: "key-abort", signal: controller.signal }))
        yield* Effect.sleep("50 millis")
        controller.abort()
        yield* fiber.await
        yield* Effect.sleep("400 millis")
        const retry = yield* invoke(handler, { key: "key-abort" })
        // killed: the record keeps its lease (409); kept: the outcome was recorded and is replayed
        assert.strictEqual(retry.status, interrupt ? 409 : 201, name)
      }
      assert.deepStrictEqual(yield* Ref.get(finished), ["kept"])
    }))
})

describe("NetlifyError.httpStatus", () => {
  it("maps every failure to its status", () => {
    const cases: ReadonlyArray<[NetlifyError.NetlifyError | IdempotencyError.IdempotencyError, number]> = [
      [new NetlifyError.MissingIdempotencyKey({ source: "header" }), 400],
      [new NetlifyError.InvalidRequestBody({ reason: "NotJson", detail: "x" }), 400],
      [new IdempotencyError.InvalidIdempotencyKey({ reason: "Empty", length: 0, maxLength: 255, preview: "" }), 400],
      [new IdempotencyError.IdempotencyConflict({ operation: "o", key: "k", retryAfterMillis: 1500 }), 409],
      [new IdempotencyError.LeaseLost({ method: "complete", recordId: "o#k" }), 409],
      [new IdempotencyError.KeyReused({ operation: "o", key: "k" }), 422],
      [new IdempotencyError.StoredOutcomeInvalid({ operation: "o", key: "k", cause: "x" }), 500],
      [new NetlifyError.InsufficientTime({ remainingMillis: 1, marginMillis: 2 }), 503],
      [new NetlifyError.LayerUnavailable({ cause: "x" }), 503],
      [
        new IdempotencyError.CleanupFailed({ operation: "o", key: "k", policy: "release", original: "x", cause: "y" }),
        503
      ],
      [new IdempotencyError.StoreUnavailable({ method: "reserve", cause: "x" }), 503],
      [new IdempotencyError.StoreError({ method: "reserve", cause: "x" }), 503],
      [
        new IdempotencyError.DownstreamTimeout({
          operation: "o",
          key: "k",
          timeoutMillis: 1,
          policy: "keepLease",
          replayed: false
        }),
        504
      ]
    ]
    for (const [error, status] of cases) {
      assert.strictEqual(NetlifyError.httpStatus(error), status, error._tag)
      assert.strictEqual(FunctionResponse.fromError(error).status, status, error._tag)
    }
    const conflict = FunctionResponse.fromError(cases[3][0])
    assert.strictEqual(conflict.headers["retry-after"], "2")
  })
})
