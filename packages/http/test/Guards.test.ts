/**
 * The guards of an idempotent route (README.md#semantics-and-the-choices-where-the-draft-is-open, Scope; README.md#browsers-and-cors):
 * one warning for a request with credentials and no scope, a CORS response that lets a browser's
 * script read `Idempotent-Replayed` and `Retry-After`, and the memory store's refusal of a deployed
 * runtime as a handler answers it.
 */
import { IdempotencyStore } from "@effect-idempotency/core"
import { IdempotentFetch, StoredResponse } from "@effect-idempotency/http"
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as HashMap from "effect/HashMap"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { randomUUID } from "node:crypto"
import { afterEach, vi } from "vitest"

interface Line {
  readonly level: string
  readonly message: string
  readonly operation: unknown
}

/** A handler whose log lines are kept, and a POST to it. */
const route = (options: {
  readonly name: string
  readonly scope?: ((request: Request) => string | undefined) | undefined
  readonly respond?: (() => Promise<Response>) | undefined
  readonly storedHeaders?: ReadonlyArray<string> | undefined
}) => {
  const lines: Array<Line> = []
  const logger = Logger.make(({ annotations, logLevel, message }) => {
    lines.push({
      level: logLevel.label,
      message: String(Array.isArray(message) ? message.join(" ") : message),
      operation: HashMap.get(annotations, "operation").pipe((o) => o._tag === "Some" ? o.value : undefined)
    })
  })
  const handler = IdempotentFetch.wrap(
    options.respond ?? (() => Promise.resolve(Response.json({ ok: true }, { status: 201 }))),
    {
      name: options.name,
      layer: Layer.merge(
        IdempotencyStore.layerMemoryWith({ warn: false }),
        Logger.replace(Logger.defaultLogger, logger)
      ),
      scope: options.scope,
      storedHeaders: options.storedHeaders
    }
  )
  const post = (key: string, headers: Record<string, string> = {}) =>
    Effect.promise(() =>
      handler(
        new Request("http://localhost/orders", {
          method: "POST",
          headers: { "idempotency-key": key, ...headers },
          body: "{}"
        })
      )
    )
  const warnings = () => lines.filter((line) => line.message.includes("carries credentials"))
  return { handler, post, warnings, lines }
}

describe("a request with credentials and no scope", () => {
  it.live("is warned of once per operation, at WARN, with the operation", () =>
    Effect.gen(function*() {
      const name = `orders-${randomUUID()}`
      const { handler, post, warnings } = route({ name })
      yield* post("k-1", { authorization: "Bearer alice" })
      yield* post("k-2", { authorization: "Bearer bob" })
      yield* post("k-3", { cookie: "session=carol" })
      assert.strictEqual(warnings().length, 1)
      assert.strictEqual(warnings()[0]!.level, "WARN")
      assert.strictEqual(warnings()[0]!.operation, name)
      assert.include(warnings()[0]!.message, "scope")
      yield* Effect.promise(() => handler.dispose())
      // another operation warns of its own
      const other = route({ name: `${name}-other` })
      yield* other.post("k-1", { cookie: "session=dave" })
      assert.strictEqual(other.warnings().length, 1)
      yield* Effect.promise(() => other.handler.dispose())
    }))

  it.live("a request with a scope, or without credentials, is not warned of; a scope that answers none is", () =>
    Effect.gen(function*() {
      const scoped = route({
        name: `orders-${randomUUID()}`,
        scope: (request) => request.headers.get("authorization") ?? undefined
      })
      yield* scoped.post("k-1", { authorization: "Bearer alice" })
      assert.strictEqual(scoped.warnings().length, 0)
      // the scope function answers no scope for a cookie: the keys of that request are shared
      yield* scoped.post("k-2", { cookie: "session=bob" })
      assert.strictEqual(scoped.warnings().length, 1)
      const anonymous = route({ name: `orders-${randomUUID()}` })
      yield* anonymous.post("k-1")
      yield* anonymous.post("k-2", { authorization: "" })
      assert.strictEqual(anonymous.warnings().length, 0)
      yield* Effect.promise(() => scoped.handler.dispose())
      yield* Effect.promise(() => anonymous.handler.dispose())
    }))
})

describe("Access-Control-Expose-Headers", () => {
  it("merges Idempotent-Replayed and Retry-After into what is there, each name once, whatever its case", () => {
    assert.strictEqual(StoredResponse.exposeHeaders(undefined), "Idempotent-Replayed, Retry-After")
    assert.strictEqual(StoredResponse.exposeHeaders(""), "Idempotent-Replayed, Retry-After")
    assert.strictEqual(
      StoredResponse.exposeHeaders("X-Request-Id, retry-after"),
      "X-Request-Id, retry-after, Idempotent-Replayed"
    )
    assert.strictEqual(
      StoredResponse.exposeHeaders("idempotent-replayed,Retry-After"),
      "idempotent-replayed, Retry-After"
    )
    assert.strictEqual(StoredResponse.exposeHeaders("Location, Location"), "Location, Idempotent-Replayed, Retry-After")
  })

  it.live("a CORS response of the handler exposes both, fresh and replayed; a response without CORS is left alone", () =>
    Effect.gen(function*() {
      const cors = route({
        name: `cors-${randomUUID()}`,
        storedHeaders: ["content-type", "access-control-allow-origin", "access-control-expose-headers"],
        respond: () =>
          Promise.resolve(
            Response.json({ ok: true }, {
              status: 201,
              headers: {
                "access-control-allow-origin": "https://app.example",
                "access-control-expose-headers": "X-Trace"
              }
            })
          )
      })
      const fresh = yield* cors.post("k-1")
      assert.strictEqual(
        fresh.headers.get("access-control-expose-headers"),
        "X-Trace, Idempotent-Replayed, Retry-After"
      )
      const replay = yield* cors.post("k-1")
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(replay.headers.get("access-control-allow-origin"), "https://app.example")
      assert.strictEqual(
        replay.headers.get("access-control-expose-headers"),
        "X-Trace, Idempotent-Replayed, Retry-After"
      )
      yield* Effect.promise(() => cors.handler.dispose())

      const plain = route({ name: `plain-${randomUUID()}` })
      const response = yield* plain.post("k-1")
      assert.strictEqual(response.status, 201)
      assert.isNull(response.headers.get("access-control-expose-headers"))
      yield* Effect.promise(() => plain.handler.dispose())
    }))

  it.live("the library's own 409 carries no origin, so it is left alone; the fresh answer it waited on is exposed", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const finish = yield* Deferred.make<void>()
      const slow = route({
        name: `slow-${randomUUID()}`,
        respond: async () => {
          await Effect.runPromise(Deferred.succeed(started, undefined))
          await Effect.runPromise(Deferred.await(finish))
          return Response.json({ ok: true }, { status: 201, headers: { "access-control-allow-origin": "*" } })
        }
      })
      const first = yield* Effect.fork(slow.post("k-1"))
      yield* Deferred.await(started)
      const conflict = yield* slow.post("k-1")
      assert.strictEqual(conflict.status, 409)
      assert.strictEqual(conflict.headers.get("retry-after"), "1")
      assert.isNull(conflict.headers.get("access-control-expose-headers"))
      yield* Deferred.succeed(finish, undefined)
      const done = yield* Fiber.join(first)
      assert.strictEqual(done.headers.get("access-control-expose-headers"), "Idempotent-Replayed, Retry-After")
      yield* Effect.promise(() => slow.handler.dispose())
    }))
})

describe("the memory store on a deployed runtime", () => {
  afterEach(() => {
    vi.unstubAllEnvs()
  })

  it.live("is a layer that cannot be built: the handler answers 503; with allowInProduction it starts", () =>
    Effect.gen(function*() {
      vi.stubEnv("AWS_LAMBDA_FUNCTION_NAME", "create-order")
      const handlerOf = (layer: Layer.Layer<IdempotencyStore.IdempotencyStore>) =>
        IdempotentFetch.wrap(() => Response.json({ ok: true }, { status: 201 }), {
          name: `memory-${randomUUID()}`,
          layer
        })
      const post = (handler: IdempotentFetch.Handler) =>
        Effect.promise(() =>
          handler(new Request("http://localhost/orders", { method: "POST", headers: { "idempotency-key": "k-1" } }))
        )
      const refused = handlerOf(IdempotencyStore.layerMemory)
      assert.strictEqual((yield* post(refused)).status, 503)
      yield* Effect.promise(() => refused.dispose())
      const allowed = handlerOf(IdempotencyStore.layerMemoryWith({ warn: false, allowInProduction: true }))
      assert.strictEqual((yield* post(allowed)).status, 201)
      yield* Effect.promise(() => allowed.dispose())
    }))
})
