import { IdempotencyError, IdempotencyKey, IdempotencyStore } from "@effect-idempotency/core"
import { HttpIdempotency, IdempotentFetch } from "@effect-idempotency/http"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import * as Ref from "effect/Ref"
import { randomBytes } from "node:crypto"

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
  const store: IdempotencyStore.IdempotencyStore["Type"] = {
    reserve: (request) => guard(base.reserve(request)),
    complete: (request) => guard(base.complete(request)),
    release: (request) => guard(base.release(request)),
    markFailed: (request) => guard(base.markFailed(request)),
    extend: (request) => guard(base.extend(request)),
    get: (id) => guard(base.get(id)),
    purgeExpired: (options) => base.purgeExpired(options)
  }
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
        respond: async () => {
          await Effect.runPromise(Deferred.succeed(started, undefined))
          await Effect.runPromise(Deferred.await(release))
          return Response.json({ ok: true }, { status: 201 })
        }
      })
      const first = yield* Effect.fork(call(handler, { key: "key-busy" }))
      yield* Deferred.await(started)
      const conflict = yield* call(handler, { key: "key-busy" })
      assert.strictEqual(conflict.status, 409)
      assert.strictEqual(problemOf(conflict).title, "Conflict")
      const retryAfter = Number(conflict.headers.get("retry-after"))
      assert.isTrue(retryAfter >= 9 && retryAfter <= 10, String(retryAfter))
      yield* Deferred.succeed(release, undefined)
      assert.strictEqual((yield* Fiber.join(first)).status, 201)
      assert.strictEqual(yield* executions, 1)
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
