import type { Idempotency } from "@effect-idempotency/core"
import { IdempotencyError, IdempotencyKey, IdempotencyStore } from "@effect-idempotency/core"
import type { HttpIdempotencyError, StoredResponse } from "@effect-idempotency/http"
import { HttpIdempotency, IdempotentFetch } from "@effect-idempotency/http"
import * as KitStores from "@effect-idempotency/test-support/KitStores"
import { assert, describe, expectTypeOf, it } from "@effect/vitest"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"
import { randomBytes } from "node:crypto"

const Order = Schema.Struct({ sku: Schema.String, quantity: Schema.Int })

class PrepareFailed extends Data.TaggedError("PrepareFailed") {}
class HandlerFailed extends Data.TaggedError("HandlerFailed") {}

/** The memory store, with a count of calls and a switch that makes every call fail. */
const countedStore = Effect.gen(function*() {
  const calls = yield* Ref.make(0)
  const down = yield* Ref.make(false)
  const base = yield* IdempotencyStore.makeMemory({ warn: false })
  const guard = <A, E>(effect: Effect.Effect<A, E>) =>
    Effect.zipRight(
      Ref.update(calls, (n) => n + 1),
      Effect.flatMap(
        Ref.get(down),
        (isDown): Effect.Effect<A, E | IdempotencyError.StoreUnavailable> =>
          isDown
            ? Effect.fail(new IdempotencyError.StoreUnavailable({ method: "reserve", cause: "connection refused" }))
            : effect
      )
    )
  const store = KitStores.around(base, (_, call) => guard(call), ["purgeExpired"])
  return {
    layer: Layer.succeed(IdempotencyStore.IdempotencyStore, store),
    calls: Ref.get(calls),
    setDown: (value: boolean) => Ref.set(down, value)
  }
})

interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly bytes: Uint8Array
  readonly text: string
}

const call = (
  handler: IdempotentFetch.Handler,
  init: {
    readonly key?: string | undefined
    readonly method?: string | undefined
    readonly path?: string | undefined
    readonly body?: string | Uint8Array | undefined
    readonly headers?: Record<string, string> | undefined
  } = {}
): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const method = init.method ?? "POST"
    const response = await handler(
      new Request(`http://127.0.0.1${init.path ?? "/orders"}`, {
        method,
        headers: { ...(init.key === undefined ? {} : { "Idempotency-Key": init.key }), ...init.headers },
        body: method === "GET" || method === "HEAD"
          ? null
          : (init.body ?? JSON.stringify({ sku: "A-1", quantity: 2 })) as BodyInit
      })
    )
    const bytes = new Uint8Array(await response.arrayBuffer())
    return { status: response.status, headers: response.headers, bytes, text: new TextDecoder().decode(bytes) }
  })

/** A response (201) held until `release` is done; `started` is done once it is asked for. */
const held = (started: Deferred.Deferred<void>, release: Deferred.Deferred<void>) => async () => {
  await Effect.runPromise(Deferred.succeed(started, undefined))
  await Effect.runPromise(Deferred.await(release))
  return Response.json({ ok: true }, { status: 201 })
}

/** A first request under `key` held by its handler, and a second one that meets it (409). */
const whileHeld = (handler: IdempotentFetch.Handler, key: string, started: Deferred.Deferred<void>) =>
  Effect.gen(function*() {
    const first = yield* Effect.fork(call(handler, { key }))
    yield* Deferred.await(started)
    const conflict = yield* call(handler, { key })
    assert.strictEqual(conflict.status, 409)
    return { first, conflict }
  })

const problemOf = (reply: Reply) => JSON.parse(reply.text) as { type: string; title: string; detail: string }

/** A fetch handler that counts its executions; released at the end of the test. */
const orders = (
  layer: Layer.Layer<IdempotencyStore.IdempotencyStore>,
  options: Partial<IdempotentFetch.WrapOptions<unknown, never>> & {
    readonly respond?: (n: number, request: Request) => Response | Promise<Response>
  } = {}
) =>
  Effect.gen(function*() {
    const executions = yield* Ref.make(0)
    const respond = options.respond ?? (async (n: number, request: Request) =>
      Response.json({ orderId: `order-${n}`, ...(await request.json()) }, {
        status: 201,
        headers: { location: `/orders/order-${n}`, "set-cookie": "session=abc", "x-trace": "t-1" }
      }))
    const handler = yield* Effect.acquireRelease(
      Effect.sync(() =>
        IdempotentFetch.wrap(async (request) =>
          respond(Effect.runSync(Ref.updateAndGet(executions, (n) => n + 1)), request), {
          ...options,
          layer
        })
      ),
      (handler) =>
        Effect.promise(() =>
          handler.dispose()
        )
    )
    return { handler, executions: Ref.get(executions) }
  })

describe("IdempotentFetch.wrap", () => {
  it.scopedLive("runs once, replays status, allowed headers and body byte for byte with Idempotent-Replayed", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer)
      const first = yield* call(handler, { key: "key-1" })
      assert.strictEqual(first.status, 201)
      assert.deepStrictEqual(JSON.parse(first.text), { orderId: "order-1", sku: "A-1", quantity: 2 })
      assert.isNull(first.headers.get("idempotent-replayed"))
      assert.strictEqual(first.headers.get("set-cookie"), "session=abc")
      for (const key of ["key-1", "\"key-1\""]) {
        const replay = yield* call(handler, { key })
        assert.strictEqual(replay.status, 201)
        assert.deepStrictEqual(replay.bytes, first.bytes)
        assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(replay.headers.get("content-type"), first.headers.get("content-type"))
        assert.strictEqual(replay.headers.get("location"), "/orders/order-1")
        assert.isNull(replay.headers.get("set-cookie"))
        assert.isNull(replay.headers.get("x-trace"))
      }
      assert.strictEqual(yield* executions, 1)
    }))

  it.scopedLive("a binary body is replayed byte-identical", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const payload = new Uint8Array(randomBytes(4096))
      payload[0] = 0xff
      payload[1] = 0xfe
      const { executions, handler } = yield* orders(layer, {
        respond: () => new Response(payload, { status: 200, headers: { "content-type": "application/octet-stream" } })
      })
      const first = yield* call(handler, { key: "key-bin" })
      const replay = yield* call(handler, { key: "key-bin" })
      assert.deepStrictEqual(first.bytes, payload)
      assert.deepStrictEqual(replay.bytes, payload)
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* executions, 1)
    }))

  it.scopedLive("methods that are not covered run untouched, without a key and without the store", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, { respond: () => new Response("ok") })
      assert.strictEqual((yield* call(handler, { method: "GET" })).status, 200)
      assert.strictEqual((yield* call(handler, { method: "PUT", key: "key-put" })).status, 200)
      assert.strictEqual((yield* call(handler, { method: "PUT", key: "key-put" })).status, 200)
      assert.strictEqual(yield* executions, 3)
      assert.strictEqual(yield* calls, 0)
    }))

  it.scopedLive("400 with a problem body without a key; with required: false the request runs untouched", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, { documentation: "https://api.example/docs/idempotency" })
      const reply = yield* call(handler)
      assert.strictEqual(reply.status, 400)
      assert.strictEqual(reply.headers.get("content-type"), "application/problem+json")
      assert.strictEqual(reply.headers.get("link"), "<https://api.example/docs/idempotency>; rel=\"describedby\"")
      assert.deepStrictEqual(problemOf(reply).title, "Idempotency-Key is missing")
      assert.strictEqual(problemOf(reply).type, "https://api.example/docs/idempotency")
      assert.include(problemOf(reply).detail, "Idempotency-Key")
      assert.strictEqual(yield* executions, 0)

      const optional = yield* orders(layer, { required: false })
      assert.strictEqual((yield* call(optional.handler)).status, 201)
      assert.strictEqual((yield* call(optional.handler)).status, 201)
      assert.strictEqual(yield* optional.executions, 2)
      assert.strictEqual(yield* calls, 0)
    }))

  it.scopedLive("400 for a key that is not a valid key; the store is not touched", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer)
      for (const key of ["has space", "a, b", "\"a\", \"b\"", "x".repeat(256), "\"unterminated"]) {
        const reply = yield* call(handler, { key })
        assert.strictEqual(reply.status, 400, key)
        assert.strictEqual(problemOf(reply).title, "Bad Request")
      }
      assert.strictEqual(yield* executions, 0)
      assert.strictEqual(yield* calls, 0)
    }))

  it.scopedLive("409 with Retry-After while the first request runs; the handler runs once", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const { executions, handler } = yield* orders(layer, {
        timeLimit: "10 seconds",
        respond: held(started, release)
      })
      const { conflict, first } = yield* whileHeld(handler, "key-busy", started)
      assert.strictEqual(problemOf(conflict).title, "Conflict")
      // the lease (the 10 s time limit) bounds how long the key may stay held, not when the first
      // request is done: the retry is told to come back in a second, and the detail says the same
      assert.strictEqual(conflict.headers.get("retry-after"), "1")
      assert.include(problemOf(conflict).detail, "retry after 1000 ms")
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(first)).status, 201)
      assert.strictEqual(yield* executions, 1)
    }))

  it.scopedLive("Retry-After is the lease left, at most retryAfter", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const release = yield* Deferred.make<void>()
      /** A handler that holds its key until released, and the conflict's `Retry-After` meanwhile. */
      const retryAfterOf = (options: Partial<IdempotentFetch.WrapOptions<unknown, never>>) =>
        Effect.gen(function*() {
          const started = yield* Deferred.make<void>()
          const { handler } = yield* orders(layer, { ...options, respond: held(started, release) })
          const { conflict, first } = yield* whileHeld(handler, "key-hint", started)
          return { retryAfter: conflict.headers.get("retry-after"), first }
        })
      // a longer hint, within the lease
      const slow = yield* retryAfterOf({ name: "slow", timeLimit: "10 seconds", retryAfter: "3 seconds" })
      assert.strictEqual(slow.retryAfter, "3")
      // a hint past the lease: the lease left (less than the 2 s time limit), rounded up
      const short = yield* retryAfterOf({ name: "short", timeLimit: "2 seconds", retryAfter: "1 minute" })
      assert.strictEqual(short.retryAfter, "2")
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(slow.first)).status, 201)
      yield* Fiber.join(short.first)
    }))

  it.scopedLive("422 for the key with another body, path, query or fingerprint header; the query may be ignored", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, { fingerprintHeaders: ["content-type"] })
      yield* call(handler, { key: "key-reused", path: "/orders?a=1", headers: { "content-type": "application/json" } })
      const variants = [
        { body: JSON.stringify({ sku: "B-2", quantity: 1 }), path: "/orders?a=1" },
        { path: "/orders/other?a=1" },
        { path: "/orders?a=2" },
        { path: "/orders?a=1", headers: { "content-type": "text/plain" } }
      ]
      for (const variant of variants) {
        const reply = yield* call(handler, {
          key: "key-reused",
          headers: { "content-type": "application/json" },
          ...variant
        })
        assert.strictEqual(reply.status, 422, JSON.stringify(variant))
        assert.strictEqual(problemOf(reply).title, "Unprocessable Content")
      }
      assert.strictEqual(yield* executions, 1)

      const ignoring = yield* orders(layer, { name: "ignoring-query", query: "ignore" })
      yield* call(ignoring.handler, { key: "key-query", path: "/orders?page=1" })
      const replay = yield* call(ignoring.handler, { key: "key-query", path: "/orders?page=2" })
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
    }))

  it.scopedLive("413 past maxBodyBytes, with a bounded problem that never echoes the body", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, { maxBodyBytes: 1024 })
      const secret = "sk_live_" + "x".repeat(2000)
      const reply = yield* call(handler, { key: "key-big", body: JSON.stringify({ secret }) })
      assert.strictEqual(reply.status, 413)
      assert.isBelow(reply.text.length, 300)
      assert.notInclude(reply.text, "sk_live")
      assert.strictEqual(yield* executions, 0)
      assert.strictEqual(yield* calls, 0)
    }))

  it.scopedLive("a 5xx is not recorded (a retry runs again); a 4xx is, and replays; record can keep a 5xx", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const failing = yield* orders(layer, {
        respond: (n) => n === 1 ? new Response("down", { status: 503 }) : Response.json({ n }, { status: 201 })
      })
      assert.strictEqual((yield* call(failing.handler, { key: "key-503" })).status, 503)
      const retry = yield* call(failing.handler, { key: "key-503" })
      assert.deepStrictEqual([retry.status, retry.headers.get("idempotent-replayed")], [201, null])
      assert.strictEqual(yield* failing.executions, 2)

      const rejecting = yield* orders(layer, {
        name: "rejecting",
        respond: () => Response.json({ error: "out of stock" }, { status: 409 })
      })
      const rejected = yield* call(rejecting.handler, { key: "key-409" })
      const replayed = yield* call(rejecting.handler, { key: "key-409" })
      assert.deepStrictEqual([replayed.status, replayed.headers.get("idempotent-replayed")], [409, "true"])
      assert.strictEqual(replayed.text, rejected.text)
      assert.strictEqual(yield* rejecting.executions, 1)

      const keeping = yield* orders(layer, {
        name: "keeping",
        record: () => true,
        respond: () => new Response("down", { status: 503 })
      })
      yield* call(keeping.handler, { key: "key-503-kept" })
      const kept = yield* call(keeping.handler, { key: "key-503-kept" })
      assert.deepStrictEqual([kept.status, kept.headers.get("idempotent-replayed")], [503, "true"])
      assert.strictEqual(yield* keeping.executions, 1)
    }))

  it.scopedLive("the scope keeps keys of two tenants apart", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, {
        scope: (request) => request.headers.get("x-tenant") ?? undefined
      })
      const a = yield* call(handler, { key: "key-tenant", headers: { "x-tenant": "a" } })
      const b = yield* call(handler, { key: "key-tenant", headers: { "x-tenant": "b" } })
      const againA = yield* call(handler, { key: "key-tenant", headers: { "x-tenant": "a" } })
      assert.notStrictEqual(a.text, b.text)
      assert.isNull(b.headers.get("idempotent-replayed"))
      assert.strictEqual(againA.text, a.text)
      assert.strictEqual(againA.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* executions, 2)
    }))

  it.scopedLive("a response larger than the store keeps is answered once; retries get 500, never a second run", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const large = new Uint8Array(randomBytes(64 * 1024))
      const { executions, handler } = yield* orders(layer, {
        maxResponseBytes: 16 * 1024,
        respond: () =>
          new Response(
            new ReadableStream({
              start(controller) {
                for (let i = 0; i < large.length; i += 4096) controller.enqueue(large.slice(i, i + 4096))
                controller.close()
              }
            }),
            { status: 201 }
          )
      })
      const first = yield* call(handler, { key: "key-large" })
      assert.strictEqual(first.status, 201)
      assert.deepStrictEqual(first.bytes, large)
      const retry = yield* call(handler, { key: "key-large" })
      assert.strictEqual(retry.status, 500)
      assert.strictEqual(retry.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* executions, 1)
    }))

  it.scopedLive("503 when the store is down: the handler is not called", () =>
    Effect.gen(function*() {
      const { layer, setDown } = yield* countedStore
      const { executions, handler } = yield* orders(layer)
      yield* setDown(true)
      const reply = yield* call(handler, { key: "key-down" })
      assert.strictEqual(reply.status, 503)
      assert.strictEqual(yield* executions, 0)
    }))

  it.scopedLive("a handler that throws gets 500 without its message, and the defect policy: no re-run in its lease", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, {
        respond: (n) => {
          if (n === 1) throw new Error("secret detail")
          return Response.json({ n }, { status: 201 })
        }
      })
      const first = yield* call(handler, { key: "key-throws" })
      assert.strictEqual(first.status, 500)
      assert.notInclude(first.text, "secret")
      // it may have written before it threw: the key is held (keepLease) instead of run again
      assert.strictEqual((yield* call(handler, { key: "key-throws" })).status, 409)
      assert.strictEqual(yield* executions, 1)
    }))

  it.scopedLive("onDefect: release lets a retry run a handler that threw at once", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, {
        onDefect: "release",
        respond: (n) => {
          if (n === 1) throw new Error("secret detail")
          return Response.json({ n }, { status: 201 })
        }
      })
      assert.strictEqual((yield* call(handler, { key: "key-throws" })).status, 500)
      assert.strictEqual((yield* call(handler, { key: "key-throws" })).status, 201)
      assert.strictEqual(yield* executions, 2)
    }))

  it.scopedLive("body: a body that is not JSON, or not the schema's, is a 400 before anything is reserved", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer, { body: Order })
      const notJson = yield* call(handler, { key: "key-body", body: "{\"sku\": \"sk_live_secret\"" })
      assert.strictEqual(notJson.status, 400)
      assert.strictEqual(notJson.headers.get("content-type"), "application/problem+json")
      assert.strictEqual(problemOf(notJson).detail, "Invalid request body: the body is not JSON")
      const notAnOrder = yield* call(handler, { key: "key-body", body: JSON.stringify({ sku: "sk_live_secret" }) })
      assert.strictEqual(notAnOrder.status, 400)
      assert.include(problemOf(notAnOrder).detail, "quantity")
      assert.notInclude(notJson.text + notAnOrder.text, "sk_live")
      // no record: the same key with an order runs at once, and is then replayed
      assert.strictEqual(yield* calls, 0)
      assert.strictEqual((yield* call(handler, { key: "key-body" })).status, 201)
      assert.strictEqual((yield* call(handler, { key: "key-body" })).headers.get("idempotent-replayed"), "true")
      assert.strictEqual(yield* executions, 1)
      // a method that is not covered is not checked
      assert.strictEqual((yield* call(handler, { method: "PUT", body: "not json" })).status, 500)
    }))

  it.scopedLive("without body, a handler that throws on a malformed body holds its key (the defect policy)", () =>
    Effect.gen(function*() {
      const { layer } = yield* countedStore
      const { executions, handler } = yield* orders(layer)
      assert.strictEqual((yield* call(handler, { key: "key-unchecked", body: "{" })).status, 500)
      // the client's retry, the same body: held until the lease ends
      assert.strictEqual((yield* call(handler, { key: "key-unchecked", body: "{" })).status, 409)
      assert.strictEqual(yield* executions, 1)
    }))
})

describe("IdempotentFetch.make", () => {
  it.scopedLive("prepare with incoming.json: the handler gets the order; a body that does not decode is a 400", () =>
    Effect.gen(function*() {
      const { calls, layer } = yield* countedStore
      const handler = yield* Effect.acquireRelease(
        Effect.sync(() =>
          IdempotentFetch.make({
            layer,
            prepare: (incoming) => incoming.json(Order),
            handler: (order) => Effect.succeed(Response.json({ sku: order.sku, quantity: order.quantity }))
          })
        ),
        (handler) => Effect.promise(() => handler.dispose())
      )
      assert.strictEqual((yield* call(handler, { key: "key-make", body: "[1," })).status, 400)
      assert.strictEqual((yield* call(handler, { key: "key-make", body: "{\"sku\": 1}" })).status, 400)
      assert.strictEqual(yield* calls, 0)
      const created = yield* call(handler, { key: "key-make" })
      assert.deepStrictEqual([created.status, JSON.parse(created.text)], [200, { sku: "A-1", quantity: 2 }])
    }))

  it("the error type is the union of the request steps' and the handler's", () => {
    const handler = IdempotentFetch.make({
      layer: IdempotencyStore.layerMemory,
      prepare: () => Effect.fail(new PrepareFailed()),
      handler: () => Effect.fail(new HandlerFailed()),
      onError: (error) => {
        expectTypeOf(error).toEqualTypeOf<PrepareFailed | HandlerFailed>()
        return Response.json({ error: error._tag }, { status: error._tag === "HandlerFailed" ? 422 : 400 })
      }
    })
    expectTypeOf(handler).toEqualTypeOf<
      IdempotentFetch.IdempotentHandler<unknown, PrepareFailed | HandlerFailed, IdempotencyStore.IdempotencyStore>
    >()
    const handlerOnly = IdempotentFetch.make({
      layer: IdempotencyStore.layerMemory,
      handler: () => Effect.fail(new HandlerFailed())
    })
    expectTypeOf(handlerOnly.operation.runDetailed).returns.toEqualTypeOf<
      Effect.Effect<
        Idempotency.Result<StoredResponse.StoredResponse>,
        HandlerFailed | HttpIdempotencyError.RequestFailure,
        IdempotencyStore.IdempotencyStore
      >
    >()
    void handler.dispose()
    void handlerOnly.dispose()
  })
})

describe("a failure of the handler", () => {
  /** The log lines of a handler made with `options`, for one request. */
  const logsOf = (options: { readonly status: number; readonly logLevel?: "Info" | undefined }) =>
    Effect.gen(function*() {
      const lines: Array<{ readonly level: string; readonly message: string }> = []
      const logger = Logger.make(({ logLevel, message }) => {
        lines.push({ level: logLevel.label, message: String(Array.isArray(message) ? message.join(" ") : message) })
      })
      const handler = IdempotentFetch.make({
        layer: Layer.mergeAll(
          IdempotencyStore.layerMemoryWith({ warn: false }),
          Logger.replace(Logger.defaultLogger, logger),
          Logger.minimumLogLevel(LogLevel.All)
        ),
        logLevel: options.logLevel,
        handler: () => Effect.fail(new HandlerFailed()),
        onError: () => Response.json({ error: "refused" }, { status: options.status })
      })
      const response = yield* Effect.promise(() =>
        handler(new Request("http://localhost/orders", { method: "POST", headers: { "idempotency-key": "k-1" } }))
      )
      assert.strictEqual(response.status, options.status)
      yield* Effect.promise(() => handler.dispose())
      return lines.filter((line) => line.message.startsWith("the handler failed"))
    })

  it.live("answered with a 4xx by onError is a client's error: logged at the handler's level, not as an error", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* logsOf({ status: 422 }), [
        { level: "DEBUG", message: "the handler failed; answered 422" }
      ])
      assert.deepStrictEqual(yield* logsOf({ status: 409, logLevel: "Info" }), [
        { level: "INFO", message: "the handler failed; answered 409" }
      ])
    }))

  it.live("answered with a 5xx is the service's error", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(yield* logsOf({ status: 502 }), [{ level: "ERROR", message: "the handler failed" }])
    }))
})

describe("IdempotentFetch.routingKey", () => {
  const request = (key?: string) =>
    new Request("http://localhost/charges", {
      method: "POST",
      headers: key === undefined ? {} : { "idempotency-key": key }
    })

  it("the header's two spellings of a key are one name", () => {
    const name = (request: Request, options?: { readonly header: string }) =>
      Either.getOrUndefined(IdempotentFetch.routingKey(request, options))
    assert.strictEqual(name(request("\"k-1\"")), "k-1")
    assert.strictEqual(name(request("k-1")), "k-1")
    assert.strictEqual(
      name(new Request("http://localhost/", { method: "POST", headers: { "x-request-key": "\"k-2\"" } }), {
        header: "x-request-key"
      }),
      "k-2"
    )
  })

  it.effect("a missing or invalid key is the handler's 400", () =>
    Effect.gen(function*() {
      for (const key of [undefined, "has space", "\"a\", \"b\"", "x".repeat(256)]) {
        const answer = IdempotentFetch.routingKey(request(key))
        assert.isTrue(Either.isLeft(answer), String(key))
        const response = Either.getLeft(answer).pipe(Option.getOrThrow)
        assert.strictEqual(response.status, 400)
        assert.strictEqual(response.headers.get("content-type"), "application/problem+json")
        const problem = (yield* Effect.promise(() => response.json())) as { readonly title: string }
        assert.strictEqual(problem.title, "Bad Request")
      }
      const documented = IdempotentFetch.routingKey(request(), { documentation: "https://api.example/idempotency" })
      const problem = yield* Effect.promise(() => Either.getLeft(documented).pipe(Option.getOrThrow).json())
      assert.strictEqual((problem as { readonly title: string }).title, "Idempotency-Key is missing")
    }))
})

describe("HttpIdempotency.fingerprint", () => {
  it.effect("covers the method, the path, the query, the headers and the body", () =>
    Effect.gen(function*() {
      const body = new TextEncoder().encode("{}")
      const base = { method: "POST", path: "/orders", query: "", headers: [], body }
      const same = yield* HttpIdempotency.fingerprint(base)
      assert.strictEqual(yield* HttpIdempotency.fingerprint({ ...base }), same)
      for (
        const other of [
          { ...base, method: "PATCH" },
          { ...base, path: "/orders/1" },
          { ...base, query: "?a=1" },
          { ...base, headers: ["text/plain"] },
          { ...base, body: new TextEncoder().encode("{ }") }
        ]
      ) {
        assert.notStrictEqual(yield* HttpIdempotency.fingerprint(other), same)
      }
    }))
})

describe("a handler that dies", () => {
  it.live("is logged as a warning with the operation and the cause, never the body", () =>
    Effect.gen(function*() {
      const lines: Array<{ readonly level: string; readonly message: string; readonly annotations: string }> = []
      const logger = Logger.make(({ annotations, logLevel, message }) => {
        lines.push({
          level: logLevel.label,
          message: String(Array.isArray(message) ? message.join(" ") : message),
          annotations: JSON.stringify(Object.fromEntries(HashMap.toEntries(annotations)))
        })
      })
      const handler = IdempotentFetch.make({
        name: "orders",
        layer: Layer.merge(
          IdempotencyStore.layerMemoryWith({ warn: false }),
          Logger.replace(Logger.defaultLogger, logger)
        ),
        handler: () => Effect.die(new Error("the parser failed"))
      })
      const response = yield* Effect.promise(() =>
        handler(
          new Request("http://localhost/orders", {
            method: "POST",
            headers: { "idempotency-key": "order-key-1001" },
            body: "secret-body"
          })
        )
      )
      assert.strictEqual(response.status, 500)
      const died = lines.find((line) => line.message.includes("the defect policy applies"))
      assert.isDefined(died)
      assert.strictEqual(died!.level, "WARN")
      assert.include(died!.annotations, "\"operation\":\"orders\"")
      assert.notInclude(JSON.stringify(lines), "secret-body")
      // the key is never logged, only its hash
      assert.include(died!.annotations, `"idempotency.key_hash":"${IdempotencyKey.hash("order-key-1001")}"`)
      assert.notInclude(JSON.stringify(lines), "order-key-1001")
      yield* Effect.promise(() => handler.dispose())
    }))
})
