/**
 * The orders API as its README walks through it, on embedded PostgreSQL (PGlite, its default): the
 * first POST, the replay, 409 while the first runs, 422 for the key with another body, 400 without a
 * key, a rejection replayed, and the OpenAPI document.
 */
import { Postgres } from "@effect-idempotency/test-support"
import * as HttpServer from "@effect/platform/HttpServer"
import { assert, layer } from "@effect/vitest"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { randomUUID } from "node:crypto"
import * as Server from "../src/orders-api/Server.js"

class Api extends Context.Tag("test/OrdersApi")<Api, { readonly url: string }>() {}

const ApiLive = Layer.scoped(
  Api,
  Effect.gen(function*() {
    const pg = yield* Postgres.pglite({ maxConnections: 8 })
    const context = yield* Layer.build(Server.layer({
      pgUrl: pg.url,
      port: 0,
      processing: "500 millis"
    }))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("no TCP address")
    return { url: `http://127.0.0.1:${address.port}` }
  })
)

const post = (url: string, body: unknown, key?: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${url}/orders`, {
      method: "POST",
      headers: { "content-type": "application/json", ...(key === undefined ? {} : { "idempotency-key": `"${key}"` }) },
      body: JSON.stringify(body)
    })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

layer(ApiLive, { excludeTestServices: true, timeout: "60 seconds" })("the orders API", (it) => {
  it.effect("the walk-through: first POST, replay, 409, 422, 400", () =>
    Effect.gen(function*() {
      const { url } = yield* Api
      const key = randomUUID()
      const order = { sku: "BOOK-42", quantity: 1 }
      const first = yield* post(url, order, key)
      assert.strictEqual(first.status, 201)
      const replay = yield* post(url, order, key)
      assert.deepStrictEqual([replay.status, replay.text], [201, first.text])
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
      assert.strictEqual(replay.headers.get("content-length"), first.headers.get("content-length"))

      const reused = yield* post(url, { sku: "BOOK-42", quantity: 2 }, key)
      assert.strictEqual(reused.status, 422)
      assert.strictEqual(reused.headers.get("content-type"), "application/problem+json")

      const missing = yield* post(url, order)
      assert.strictEqual(missing.status, 400)

      const slowKey = randomUUID()
      const pending = yield* Effect.fork(post(url, { sku: "PEN-7", quantity: 3 }, slowKey))
      yield* Effect.sleep("200 millis")
      const busy = yield* post(url, { sku: "PEN-7", quantity: 3 }, slowKey)
      assert.strictEqual(busy.status, 409)
      assert.isNotNull(busy.headers.get("retry-after"))
      assert.strictEqual((yield* pending).status, 201)

      const orders = yield* Effect.promise(() =>
        fetch(`${url}/orders`).then((r) => r.json() as Promise<Array<unknown>>)
      )
      assert.strictEqual(orders.length, 2)
    }))

  it.effect("a rejection is recorded and replayed", () =>
    Effect.gen(function*() {
      const { url } = yield* Api
      const key = randomUUID()
      const first = yield* post(url, { sku: "SOLD-OUT", quantity: 1 }, key)
      assert.strictEqual(first.status, 409)
      assert.include(first.text, "OutOfStock")
      const replay = yield* post(url, { sku: "SOLD-OUT", quantity: 1 }, key)
      assert.deepStrictEqual([replay.status, replay.text], [409, first.text])
      assert.strictEqual(replay.headers.get("idempotent-replayed"), "true")
    }))

  it.effect("the OpenAPI document declares the key and the problem responses", () =>
    Effect.gen(function*() {
      const { url } = yield* Api
      const spec = yield* Effect.promise(() => fetch(`${url}/openapi.json`).then((r) => r.json()))
      const create = spec.paths["/orders"].post
      assert.isTrue(create.parameters.some((p: { name: string }) => p.name === "Idempotency-Key"))
      assert.includeMembers(Object.keys(create.responses), ["201", "400", "409", "413", "422", "503"])
    }))
})
